"""The producing statements: pgq.enqueue, pgq.enqueue_job, pgq.enqueue_batch."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeAlias

from psycopg.types.json import Jsonb

from .. import tracing
from ..rows import Enqueued
from .call import Call, check_aware, id_list, json_param, named_args

IntervalArg: TypeAlias = "timedelta | str | None"


def _run_at(run_at: datetime | timedelta | None) -> tuple[str, Any]:
    """The SQL for run_at and its parameter: a timedelta counts from the database's now()."""
    if isinstance(run_at, timedelta):
        return "now() + %(run_at)s::interval", run_at
    if run_at is not None:
        check_aware("run_at", run_at, " or a timedelta")
    return "%(run_at)s::timestamptz", run_at


def _dedupe_options(
    dedupe_scope: str | None, dedupe_window: IntervalArg, dedupe_mode: str | None
) -> tuple[dict[str, tuple[str, Any]], tuple[tuple[str, str], ...]]:
    """The uniqueness options as optional named arguments (only those given, so that calls
    without them work with any pgq schema version) and the interval texts to check."""
    options = {
        "dedupe_scope": ("text", dedupe_scope),
        "dedupe_window": ("interval", dedupe_window),
        "dedupe_mode": ("text", dedupe_mode),
    }
    checks = (("dedupe_window", dedupe_window),) if isinstance(dedupe_window, str) else ()
    return options, checks


def _enqueue_args(
    entrypoint: str,
    payload: Any,
    *,
    priority: int,
    run_at: datetime | timedelta | None,
    dedupe_key: str | None,
    headers: dict[str, Any] | None,
    max_attempts: int | None,
    depends_on: Iterable[int] | None,
    concurrency_key: str | None = None,
    dedupe_scope: str | None = None,
    dedupe_window: IntervalArg = None,
    dedupe_mode: str | None = None,
) -> tuple[str, dict[str, Any], tuple[tuple[str, str], ...]]:
    """The named arguments of pgq.enqueue and pgq.enqueue_job (the same), their
    parameters and the interval texts to check first. Only the arguments that differ from
    the functions' defaults are sent: a plain call is a short statement, which the server
    parses and plans faster than one naming eight (some 13 us less per call)."""
    run_at_sql, run_at_value = _run_at(run_at)
    args, params = ["entrypoint => %(entrypoint)s::text"], {"entrypoint": entrypoint}
    if payload is not None:
        args.append("payload => %(payload)s::jsonb")
        params["payload"] = json_param(payload)
    # priority 0 is the default; anything else (None and wrong types too) goes to the
    # function, which checks it.
    if not (type(priority) is int and priority == 0):
        args.append("priority => %(priority)s::integer")
        params["priority"] = priority
    if run_at is not None:
        args.append(f"run_at => {run_at_sql}")
        params["run_at"] = run_at_value
    options, checks = _dedupe_options(dedupe_scope, dedupe_window, dedupe_mode)
    optional, optional_params = named_args(
        {},
        {
            "dedupe_key": ("text", dedupe_key),
            "headers": ("jsonb", json_param(tracing.inject(headers))),
            "max_attempts": ("integer", max_attempts),
            "depends_on": ("bigint[]", None if depends_on is None else id_list("depends_on", depends_on)),
            "concurrency_key": ("text", concurrency_key),
            **options,
        },
    )
    if optional:
        args.append(optional)
    return ", ".join(args), {**params, **optional_params}, checks


def enqueue(entrypoint: str, payload: Any, **options: Any) -> Call:
    """pgq.enqueue; options: _enqueue_args's (the clients' enqueue() arguments but conn)."""
    args, params, checks = _enqueue_args(entrypoint, payload, **options)
    return Call(f"SELECT pgq.enqueue({args})", params, convert=int, intervals=checks, prepare=True)


def enqueue_job(entrypoint: str, payload: Any, **options: Any) -> Call:
    """pgq.enqueue_job; options as enqueue()'s."""
    args, params, checks = _enqueue_args(entrypoint, payload, **options)
    query = f"SELECT e.id, e.created, e.replaced FROM pgq.enqueue_job({args}) AS e"
    return Call(
        query,
        params,
        shape="rows",
        row_class=Enqueued,
        convert=lambda rows: rows[0],
        intervals=checks,
        prepare=True,
    )


_PAYLOAD_CHUNK = 64


def enqueue_batch(
    entrypoint: str, payloads: Iterable[Any], *, batch: int | None = None, **options: Any
) -> Call:
    """pgq.enqueue_batch; options as enqueue_batch_select()'s. batch: a batch's id (pgq.batch)."""
    query, params, checks = enqueue_batch_select(
        entrypoint, payloads, "%(batch)s::bigint" if batch is not None else None, **options
    )
    if batch is not None:
        params["batch"] = batch
    return Call(query, params, shape="column", convert=lambda ids: [int(i) for i in ids], intervals=checks)


def enqueue_batch_select(
    entrypoint: str,
    payloads: Iterable[Any],
    batch_sql: str | None,
    *,
    priority: int,
    run_at: datetime | timedelta | None,
    concurrency_keys: Sequence[str | None] | None = None,
    dedupe_keys: Sequence[str | None] | None = None,
    dedupe_scope: str | None = None,
    dedupe_window: IntervalArg = None,
    dedupe_mode: str | None = None,
    headers: dict[str, Any] | None = None,
    max_attempts: int | None = None,
    depends_on: Iterable[int] | None = None,
) -> tuple[str, dict[str, Any], tuple[tuple[str, str], ...]]:
    """The statement `SELECT id FROM pgq.enqueue_batch(...)`, its parameters and interval
    checks; batch_sql: the SQL of its batch argument (a parameter, or a subquery when
    pgq.batch opens the batch in the same statement), None for none."""
    run_at_sql, run_at_value = _run_at(run_at)
    options, checks = _dedupe_options(dedupe_scope, dedupe_window, dedupe_mode)
    optional, optional_params = named_args(
        {},
        {
            "concurrency_keys": ("text[]", None if concurrency_keys is None else list(concurrency_keys)),
            "dedupe_keys": ("text[]", None if dedupe_keys is None else list(dedupe_keys)),
            **options,
            # As enqueue() takes them, for every job of the batch.
            "headers": ("jsonb", None if headers is None else json_param(headers)),
            "max_attempts": ("integer", max_attempts),
            "depends_on": ("bigint[]", None if depends_on is None else id_list("depends_on", depends_on)),
        },
    )
    # The payloads travel as a few JSON arrays (binary jsonb[]), taken apart in the database:
    # a jsonb[] element per payload cost the client an encoding and an escaped array element
    # each, and the server a parse each, several times the cost of a single JSON document.
    # A chunk holds _PAYLOAD_CHUNK payloads, far below a jsonb value's 256 MB limit for
    # payloads within pgq's 1 MiB each. A None payload, JSON null in its array, is SQL NULL.
    query = (
        "SELECT id FROM pgq.enqueue_batch("
        "entrypoint => %(entrypoint)s::text, payloads => ARRAY("
        "SELECT nullif(e.value, 'null') FROM unnest(%(payloads)b::jsonb[]) WITH ORDINALITY AS c (doc, n)"
        " CROSS JOIN LATERAL jsonb_array_elements(c.doc) WITH ORDINALITY AS e (value, m)"
        " ORDER BY c.n, e.m),"
        f" priority => %(priority)s::integer, run_at => {run_at_sql}"
        + (", " + optional if optional else "")
        + (f", batch => {batch_sql}" if batch_sql else "")
        + ") AS id"
    )
    items = list(payloads)
    params = {
        "entrypoint": entrypoint,
        "payloads": [Jsonb(items[i : i + _PAYLOAD_CHUNK]) for i in range(0, len(items), _PAYLOAD_CHUNK)],
        "priority": priority,
        "run_at": run_at_value,
        **optional_params,
    }
    return query, params, checks
