"""Batches (pgq.batch, pgq.batch_results): the calls that open a batch with its members and
read its members' results.

The rules live in SQL (sql/functions/batch.sql, _trg_batch_settle.sql): a member's end is
counted at the commit that ends it, and each callback is enqueued once, by the database.
Nothing here decides a batch's fate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias

from psycopg.types.json import Jsonb

from ..rows import Batch, BatchMember
from .call import Call
from .producing import enqueue_batch_select

# A callback: an entrypoint's name, or {"entrypoint", "payload", "priority", "headers",
# "max_attempts"} (docs/batches.md); None for none.
Callback: TypeAlias = "str | Mapping[str, Any] | None"


def _callback(value: Callback) -> Jsonb | None:
    if value is None:
        return None
    if isinstance(value, str):
        return Jsonb({"entrypoint": value})
    # Anything else goes as JSON: pgq.batch checks it and names what is wrong.
    return Jsonb(dict(value) if isinstance(value, Mapping) else value)


def batch(
    entrypoint: str,
    payloads: Iterable[Any],
    *,
    on_finish: Callback,
    on_success: Callback,
    on_death: Callback,
    **options: Any,
) -> Call:
    """One statement: pgq.batch, then pgq.enqueue_batch(..., batch => it), so that the batch
    and its members commit together (a batch closes at the commit that opened it)."""
    options = {"priority": 0, "run_at": None, **options}
    members, params, checks = enqueue_batch_select(entrypoint, payloads, "(SELECT b.id FROM b)", **options)
    query = (
        "WITH b AS MATERIALIZED (SELECT pgq.batch(on_finish => %(on_finish)s::jsonb,"
        " on_success => %(on_success)s::jsonb, on_death => %(on_death)s::jsonb) AS id)"
        f" SELECT (SELECT b.id FROM b), ARRAY({members}) AS id"
    )
    params = {
        **params,
        "on_finish": _callback(on_finish),
        "on_success": _callback(on_success),
        "on_death": _callback(on_death),
    }
    return Call(
        query,
        params,
        shape="rows",
        convert=lambda rows: Batch(int(rows[0][0]), [int(i) for i in rows[0][1]]),
        intervals=checks,
    )


def batch_results(batch: int) -> Call:
    return Call(
        "SELECT job_id, status, result FROM pgq.batch_results(batch => %s::bigint)",
        (batch,),
        shape="rows",
        row_class=BatchMember,
    )
