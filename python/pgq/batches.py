"""Batches (pgq.batch): enqueue a set of jobs whose end enqueues callbacks, from Python.

The rules live in SQL (sql/functions/batch.sql, _batch_settle.sql): a member's end is
counted at the commit that ends it, and each callback is enqueued once, by the database.
This module only builds the calls; Client and AsyncClient take its methods as a mixin.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from psycopg.types.json import Jsonb

from . import queries as q
from .queries import Call

# A callback: an entrypoint's name, or {"entrypoint", "payload", "priority", "headers",
# "max_attempts"} (docs/batches.md); None for none.
Callback: TypeAlias = "str | Mapping[str, Any] | None"


@dataclass(frozen=True)
class Batch:
    """A batch opened by Client.batch: its id and its members' ids, in payload order."""

    id: int
    job_ids: list[int]


@dataclass(frozen=True)
class BatchMember:
    """One member of a batch (pgq.batch_results): its status (as pgq.job_status) and, once
    it succeeded, its result."""

    job_id: int
    status: str | None
    result: Any


def _callback(value: Callback) -> Jsonb | None:
    if value is None:
        return None
    if isinstance(value, str):
        return Jsonb({"entrypoint": value})
    # Anything else goes as JSON: pgq.batch checks it and names what is wrong.
    return Jsonb(dict(value) if isinstance(value, Mapping) else value)


def batch_call(
    entrypoint: str,
    payloads: Iterable[Any],
    *,
    on_finish: Callback,
    on_success: Callback,
    on_death: Callback,
    **options: Any,
) -> Call:
    """One statement: pgq.batch, then pgq.enqueue_batch(..., batch => it), so that the batch
    and its members commit together (and close at that commit)."""
    options = {"priority": 0, "run_at": None, **options}
    members = q.enqueue_batch(entrypoint, payloads, **options)
    head = str(members.query)
    assert head.endswith(") AS id"), head
    head = head[: -len(") AS id")]
    query = (
        "WITH b AS MATERIALIZED (SELECT pgq.batch(on_finish => %(on_finish)s::jsonb,"
        " on_success => %(on_success)s::jsonb, on_death => %(on_death)s::jsonb) AS id)"
        f" SELECT (SELECT b.id FROM b), ARRAY({head}, batch => (SELECT b.id FROM b)) AS id)"
    )
    params = {
        **dict(members.params),  # type: ignore[call-overload]
        "on_finish": _callback(on_finish),
        "on_success": _callback(on_success),
        "on_death": _callback(on_death),
    }
    return Call(
        query,
        params,
        shape="rows",
        convert=lambda rows: Batch(int(rows[0][0]), [int(i) for i in rows[0][1]]),
        intervals=members.intervals,
    )


def results_call(batch: int) -> Call:
    return Call(
        "SELECT job_id, status, result FROM pgq.batch_results(batch => %s::bigint)",
        (batch,),
        shape="rows",
        row_class=BatchMember,
    )


class BatchMethods:
    """Client's batch methods (it supplies _run)."""

    def _run(self, call: Call, conn: Any = None) -> Any:
        raise NotImplementedError

    def batch(
        self,
        entrypoint: str,
        payloads: Iterable[Any],
        *,
        on_finish: Callback = None,
        on_success: Callback = None,
        on_death: Callback = None,
        conn: Any = None,
        **options: Any,
    ) -> Batch:
        """Enqueue one job per payload as a batch (pgq.batch + pgq.enqueue_batch(batch =>
        ...)); returns its id and the members' ids. Its callbacks are enqueued once each:
        on_death at the first death of a member, on_finish when every member has ended,
        on_success when every member has succeeded. A callback is an entrypoint, or a dict
        with entrypoint, payload (a dict; the batch's id and counts are added under
        "batch"), priority, headers, max_attempts. options: enqueue_batch's (priority,
        run_at, headers, max_attempts, depends_on, concurrency_keys; not dedupe_keys). With
        conn=, the batch commits (and closes) with your transaction. Raises InvalidArgument."""
        call = batch_call(
            entrypoint, payloads, on_finish=on_finish, on_success=on_success, on_death=on_death, **options
        )
        opened: Batch = self._run(call, conn)
        return opened

    def batch_results(self, batch: int, *, conn: Any = None) -> list[BatchMember]:
        """The members of a batch, in id order, each with its status and (once it succeeded)
        its result (pgq.batch_results): what a callback's handler reads. Raises UnknownJob
        for an unknown batch, or one that is not the caller's to read."""
        members: list[BatchMember] = self._run(results_call(batch), conn)
        return members


class AsyncBatchMethods:
    """AsyncClient's batch methods: those of BatchMethods, awaitable."""

    async def _run(self, call: Call, conn: Any = None) -> Any:
        raise NotImplementedError

    async def batch(
        self,
        entrypoint: str,
        payloads: Iterable[Any],
        *,
        on_finish: Callback = None,
        on_success: Callback = None,
        on_death: Callback = None,
        conn: Any = None,
        **options: Any,
    ) -> Batch:
        """As Client.batch."""
        call = batch_call(
            entrypoint, payloads, on_finish=on_finish, on_success=on_success, on_death=on_death, **options
        )
        opened: Batch = await self._run(call, conn)
        return opened

    async def batch_results(self, batch: int, *, conn: Any = None) -> list[BatchMember]:
        """As Client.batch_results."""
        members: list[BatchMember] = await self._run(results_call(batch), conn)
        return members
