"""The SQL that pgq.Client and pgq.AsyncClient send, shared by both.

Each public function here checks its Python arguments and returns a Call: the statement,
its parameters, the shape of the answer and how to convert it. The clients only execute
Calls, on their own connection or the caller's (`conn=`), so the sync and async clients
cannot drift apart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Literal, TypeAlias

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from . import tracing
from .errors import InvalidArgument, SchemaError, UnknownJob, translate
from .rows import (
    DependencyResult,
    Enqueued,
    JobResult,
    JobRow,
    OutcomeRow,
    QueueRow,
    Reason,
    Rerun,
    ScheduleRow,
    StatsRow,
    SweepRow,
    WorkerRow,
)

Query: TypeAlias = "sql.Composable | str"
Params: TypeAlias = "Sequence[Any] | dict[str, Any]"
IntervalArg: TypeAlias = "timedelta | str | None"

# The statuses of live jobs (the pgq.jobs view), and of finished ones (pgq.outcomes).
LIVE_STATUSES = ("queued", "waiting", "running", "dead")
FINISHED_STATUSES = ("succeeded", "canceled", "dead")
# The channel pgq.watch'ed jobs notify when they finish (payload: the id).
FINISHED_CHANNEL = "pgq_finished"
# The channel pgq.progress notifies (payload: {"id", "value", "note", "delivery"} as JSON).
PROGRESS_CHANNEL = "pgq_progress"


@dataclass(frozen=True)
class Call:
    """One statement. shape: 'rows' (all rows), 'scalar' (first column of the first row),
    'column' (first column of every row), 'none'. intervals: (argument, text) pairs cast
    first on their own, so that a typo names its argument."""

    query: Query
    params: Params = ()
    shape: Literal["rows", "scalar", "column", "none"] = "scalar"
    row_class: type | None = None
    convert: Callable[[Any], Any] = lambda value: value
    intervals: tuple[tuple[str, str], ...] = field(default=())
    # Run as a server-side prepared statement where the connection allows it (see
    # pooled_threshold): the calls a producer makes per job, whose answer cannot change
    # shape across pgq versions (a prepared statement fails once its result type changes).
    prepare: bool = False


INTERVAL_CHECK = "SELECT %s::text::interval"


BACKEND_PID = "SELECT pg_backend_pid()"
# The prepare_threshold of a pooled connection straight to PostgreSQL: a statement is
# prepared on its second execution, and the clients pass prepare=False for every call but
# the Call.prepare ones. (Not on its first: a statement prepared by a call that then fails
# would stay on the server, unknown to psycopg, once per failed call.)
PREPARE_THRESHOLD = 1
# Raised before the statement runs when a prepared statement is not on the server
# connection the call reached, or another one of the same name is: a pooler in between
# that passed the server's backend key on.
STATEMENT_LOST = (psycopg.errors.InvalidSqlStatementName, psycopg.errors.DuplicatePreparedStatement)


def pooled_threshold(prepare: bool, reported_pid: int, server_pid: int | None) -> int | None:
    """psycopg's prepare_threshold for one of a client's pooled connections. Preparing saves
    the server's parse and plan of every call (some 15% of a one-job enqueue). Only on a
    connection straight to PostgreSQL: a pooler in transaction mode (PgBouncer before 1.21)
    would run the next call on another server connection, where the statement does not
    exist. PgBouncer hands out a backend key of its own, so the pid the connection reported
    at startup differs from the server's (server_pid; None when prepare is off). A pooler
    that passes the real key on is caught later (STATEMENT_LOST)."""
    return PREPARE_THRESHOLD if prepare and reported_pid == server_pid else None


def pooled_prepare(call: Call, prepare: bool) -> bool | None:
    """psycopg's prepare argument for a call on a pooled connection."""
    return None if call.prepare and prepare else False


def interval_error(argument: str, text: str, exc: psycopg.DataError) -> InvalidArgument:
    return InvalidArgument(
        f"pgq: invalid argument {argument}: {text!r} is not an interval"
        f" ({exc.diag.message_primary}) (hint: use PostgreSQL interval text, e.g. '30 seconds')"
    )


def database_error(exc: psycopg.Error) -> Exception:
    """The exception to raise for a database error: SchemaError when pgq is missing or
    older than this package, the pgq.errors class of a PQ SQLSTATE, else exc itself."""
    if isinstance(exc, (psycopg.errors.InvalidSchemaName, psycopg.errors.UndefinedTable)):
        err: Exception = SchemaError(
            f"{exc.diag.message_primary} (hint: is pgq installed in this database? Run `pgq install`.)"
        )
    elif isinstance(exc, psycopg.errors.UndefinedFunction):
        err = SchemaError(
            f"{exc.diag.message_primary} (hint: the database's pgq schema may be older"
            " than this package; run `pgq upgrade`.)"
        )
    else:
        return translate(exc)
    err.__cause__ = exc
    return err


def shape_rows(call: Call, rows: list[Any]) -> Any:
    if call.shape == "scalar":
        return call.convert(rows[0][0])
    if call.shape == "column":
        return call.convert([row[0] for row in rows])
    if call.shape == "none":
        return None
    return call.convert(rows)


def _columns(cls: type) -> sql.Composed:
    """The dataclass's fields as a column list: the views may gain columns safely."""
    return sql.SQL(", ").join(sql.Identifier(f.name) for f in dataclasses.fields(cls))


def _json(value: Any) -> Jsonb | None:
    return None if value is None else Jsonb(value)


def _ids(argument: str, job_ids: int | Iterable[int]) -> list[int]:
    if isinstance(job_ids, int):
        return [job_ids]
    if isinstance(job_ids, (str, bytes)):
        raise InvalidArgument(f"pgq: invalid argument {argument}: pass job ids, not a string")
    return list(job_ids)


def _run_at(run_at: datetime | timedelta | None) -> tuple[str, Any]:
    """The SQL for run_at and its parameter: a timedelta counts from the database's now()."""
    if isinstance(run_at, timedelta):
        return "now() + %(run_at)s::interval", run_at
    if run_at is not None:
        check_aware("run_at", run_at, " or a timedelta")
    return "%(run_at)s::timestamptz", run_at


def check_aware(argument: str, when: object, alternative: str = "") -> None:
    """A point in time must be an aware datetime: a naive one is ambiguous."""
    if not isinstance(when, datetime):
        raise InvalidArgument(f"pgq: invalid argument {argument}: {when!r} is not a datetime{alternative}")
    if when.utcoffset() is None:
        raise InvalidArgument(
            f"pgq: invalid argument {argument}: a naive datetime is ambiguous"
            f" (hint: pass an aware datetime, e.g. datetime.now(timezone.utc){alternative})"
        )


def _named(fixed: dict[str, tuple[str, Any]], optional: dict[str, tuple[str, Any]]) -> tuple[str, dict]:
    """Named-notation arguments `name => %(name)s::type`; optional ones only when not None,
    so that calls without them work with any pgq schema version."""
    parts, params = [], {}
    for name, (cast, value) in {**fixed, **{k: v for k, v in optional.items() if v[1] is not None}}.items():
        parts.append(f"{name} => %({name})s::{cast}")
        params[name] = value
    return ", ".join(parts), params


# --- producing -------------------------------------------------------------------------------


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
    concurrency_key: str | None,
    dedupe_scope: str | None,
    dedupe_window: IntervalArg,
    dedupe_mode: str | None,
) -> tuple[str, dict[str, Any], tuple[tuple[str, str], ...]]:
    """The named arguments of pgq.enqueue and pgq.enqueue_job (the same), their
    parameters and the interval texts to check first. Only the arguments that differ from
    the functions' defaults are sent: a plain call is a short statement, which the server
    parses and plans faster than one naming eight (some 13 us less per call)."""
    run_at_sql, run_at_value = _run_at(run_at)
    args, params = ["entrypoint => %(entrypoint)s::text"], {"entrypoint": entrypoint}
    if payload is not None:
        args.append("payload => %(payload)s::jsonb")
        params["payload"] = _json(payload)
    # priority 0 is the default; anything else (None and wrong types too) goes to the
    # function, which checks it.
    if not (type(priority) is int and priority == 0):
        args.append("priority => %(priority)s::integer")
        params["priority"] = priority
    if run_at is not None:
        args.append(f"run_at => {run_at_sql}")
        params["run_at"] = run_at_value
    options, checks = _dedupe_options(dedupe_scope, dedupe_window, dedupe_mode)
    optional, optional_params = _named(
        {},
        {
            "dedupe_key": ("text", dedupe_key),
            "headers": ("jsonb", _json(tracing.inject(headers))),
            "max_attempts": ("integer", max_attempts),
            "depends_on": ("bigint[]", None if depends_on is None else _ids("depends_on", depends_on)),
            "concurrency_key": ("text", concurrency_key),
            **options,
        },
    )
    if optional:
        args.append(optional)
    return ", ".join(args), {**params, **optional_params}, checks


def enqueue(
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
) -> Call:
    args, params, checks = _enqueue_args(
        entrypoint,
        payload,
        priority=priority,
        run_at=run_at,
        dedupe_key=dedupe_key,
        headers=headers,
        max_attempts=max_attempts,
        depends_on=depends_on,
        concurrency_key=concurrency_key,
        dedupe_scope=dedupe_scope,
        dedupe_window=dedupe_window,
        dedupe_mode=dedupe_mode,
    )
    return Call(f"SELECT pgq.enqueue({args})", params, convert=int, intervals=checks, prepare=True)


def enqueue_job(
    entrypoint: str,
    payload: Any,
    *,
    priority: int,
    run_at: datetime | timedelta | None,
    dedupe_key: str | None,
    headers: dict[str, Any] | None,
    max_attempts: int | None,
    depends_on: Iterable[int] | None,
    concurrency_key: str | None,
    dedupe_scope: str | None,
    dedupe_window: IntervalArg,
    dedupe_mode: str | None,
) -> Call:
    args, params, checks = _enqueue_args(
        entrypoint,
        payload,
        priority=priority,
        run_at=run_at,
        dedupe_key=dedupe_key,
        headers=headers,
        max_attempts=max_attempts,
        depends_on=depends_on,
        concurrency_key=concurrency_key,
        dedupe_scope=dedupe_scope,
        dedupe_window=dedupe_window,
        dedupe_mode=dedupe_mode,
    )
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
    entrypoint: str,
    payloads: Iterable[Any],
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
) -> Call:
    run_at_sql, run_at_value = _run_at(run_at)
    options, checks = _dedupe_options(dedupe_scope, dedupe_window, dedupe_mode)
    optional, optional_params = _named(
        {},
        {
            "concurrency_keys": ("text[]", None if concurrency_keys is None else list(concurrency_keys)),
            "dedupe_keys": ("text[]", None if dedupe_keys is None else list(dedupe_keys)),
            **options,
            # As enqueue() takes them, for every job of the batch.
            "headers": ("jsonb", None if headers is None else _json(headers)),
            "max_attempts": ("integer", max_attempts),
            "depends_on": ("bigint[]", None if depends_on is None else _ids("depends_on", depends_on)),
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
    return Call(query, params, shape="column", convert=lambda ids: [int(i) for i in ids], intervals=checks)


# --- following jobs --------------------------------------------------------------------------


def job_status(job_id: int) -> Call:
    return Call("SELECT pgq.job_status(job_id => %s::bigint)", (job_id,))


def job(job_id: int) -> Call:
    return Call("SELECT pgq.job(job_id => %s::bigint)", (job_id,))


def explain(job_id: int) -> Call:
    return Call(
        "SELECT e.reason, e.detail, e.until, e.job_ids FROM pgq.explain(job_id => %s::bigint) AS e",
        (job_id,),
        shape="rows",
        row_class=Reason,
    )


def dependency_results(job_id: int) -> Call:
    return Call(
        "SELECT d.id, d.status, d.result FROM pgq.dependency_results(job_id => %s::bigint) AS d",
        (job_id,),
        shape="rows",
        row_class=DependencyResult,
    )


def watch(job_id: int) -> Call:
    return Call("SELECT pgq.watch(job_id => %s::bigint)", (job_id,))


def to_result(job_id: int, story: dict[str, Any] | None) -> JobResult | None:
    """A JobResult from pgq.job's document: None while the job is unfinished. Raises
    UnknownJob for an id pgq does not know (or whose outcome was pruned)."""
    if story is None:
        raise UnknownJob(f"pgq: job {job_id} is unknown (or its outcome was pruned)")
    if not story["finished"]:
        return None
    return JobResult(job_id, story["status"], story["result"], story["error"])


def progress_of(job_id: int, payload: str) -> dict[str, Any] | None:
    """A pgq_progress notification's report when it is about job_id (Client.wait's
    on_progress gets {"value", "note", "delivery"}), else None."""
    import json

    try:
        doc = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("id") != job_id:
        return None
    return {"value": doc.get("value"), "note": doc.get("note"), "delivery": doc.get("delivery")}


def stored_progress(story: dict[str, Any] | None) -> dict[str, Any] | None:
    """pgq.job's last progress report as on_progress gets it, or None."""
    report = (story or {}).get("progress")
    if not report:
        return None
    return {"value": report["value"], "note": report["note"], "delivery": report["delivery"]}


def check_timeout(timeout: float | None) -> None:
    if timeout is not None and (isinstance(timeout, bool) or timeout < 0):
        raise InvalidArgument(f"pgq: invalid argument timeout: {timeout!r} (hint: seconds >= 0, or None)")


# --- worker protocol -------------------------------------------------------------------------


def complete(
    worker_id: Any, job_ids: Iterable[int], results: Sequence[Any] | None, deliveries: Sequence[int] | None
) -> Call:
    args, params = _named(
        {"worker_id": ("uuid", worker_id), "job_ids": ("bigint[]", _ids("job_ids", job_ids))},
        {
            "results": ("jsonb[]", None if results is None else [_json(r) for r in results]),
            "deliveries": ("integer[]", None if deliveries is None else list(deliveries)),
        },
    )
    return Call(
        f"SELECT id FROM pgq.complete({args}) AS id",
        params,
        shape="column",
        convert=lambda ids: [int(i) for i in ids],
    )


def fail(worker_id: Any, job_id: int, error: str, retry_in: timedelta | None, delivery: int | None) -> Call:
    args, params = _named(
        {"worker_id": ("uuid", worker_id), "job_id": ("bigint", job_id), "error": ("text", error)},
        {"retry_in": ("interval", retry_in), "delivery": ("integer", delivery)},
    )
    return Call(f"SELECT pgq.fail({args})", params)


def snooze(worker_id: Any, job_id: int, delay: timedelta, delivery: int | None) -> Call:
    args, params = _named(
        {"worker_id": ("uuid", worker_id), "job_id": ("bigint", job_id), "delay": ("interval", delay)},
        {"delivery": ("integer", delivery)},
    )
    return Call(f"SELECT pgq.snooze({args})", params)


def confirm_cancel(worker_id: Any, job_id: int, delivery: int | None) -> Call:
    args, params = _named(
        {"worker_id": ("uuid", worker_id), "job_id": ("bigint", job_id)},
        {"delivery": ("integer", delivery)},
    )
    return Call(f"SELECT pgq.confirm_cancel({args})", params)


# --- administration --------------------------------------------------------------------------


def cancel(job_ids: int | Iterable[int]) -> Call:
    return Call("SELECT pgq.cancel(job_ids => %s::bigint[])", (_ids("job_ids", job_ids),), convert=int)


def retry(job_ids: int | Iterable[int]) -> Call:
    return Call("SELECT pgq.retry(job_ids => %s::bigint[])", (_ids("job_ids", job_ids),), convert=int)


def forget_steps(job_ids: int | Iterable[int]) -> Call:
    return Call("SELECT pgq.forget_steps(job_ids => %s::bigint[])", (_ids("job_ids", job_ids),), convert=int)


def rerun(job_ids: int | Iterable[int]) -> Call:
    return Call(
        "SELECT * FROM pgq.rerun(job_ids => %s::bigint[])",
        (_ids("job_ids", job_ids),),
        shape="rows",
        row_class=Rerun,
    )


def pause(entrypoint: str, create_new: bool | None = None) -> Call:
    args, params = _named({"entrypoint": ("text", entrypoint)}, {"create_new": ("boolean", create_new)})
    return Call(f"SELECT pgq.pause({args})", params, shape="none")


def resume(entrypoint: str) -> Call:
    return Call("SELECT pgq.resume(entrypoint => %s::text)", (entrypoint,), shape="none")


def configure(
    entrypoint: str,
    *,
    max_attempts: int | None,
    backoff_base: IntervalArg,
    backoff_max: IntervalArg,
    lease: IntervalArg,
    timeout: IntervalArg,
    concurrency: int | None,
    rate: Decimal | float | None,
    retention: IntervalArg,
    max_deliveries: int | None,
    key_concurrency: int | None = None,
    max_snoozes: int | None = None,
    create_new: bool | None = None,
) -> Call:
    intervals = {
        "backoff_base": backoff_base,
        "backoff_max": backoff_max,
        "lease": lease,
        "timeout": timeout,
        "retention": retention,
    }
    args, params = _named(
        {
            "entrypoint": ("text", entrypoint),
            "max_attempts": ("integer", max_attempts),
            **{name: ("interval", value) for name, value in intervals.items()},
            "concurrency": ("integer", concurrency),
            "rate": ("numeric", rate),
        },
        {
            "max_deliveries": ("integer", max_deliveries),
            "key_concurrency": ("integer", key_concurrency),
            "max_snoozes": ("integer", max_snoozes),
            "create_new": ("boolean", create_new),
        },
    )
    checks = tuple((name, value) for name, value in intervals.items() if isinstance(value, str))
    return Call(f"SELECT pgq.configure({args})", params, shape="none", intervals=checks)


def reap() -> Call:
    return Call("SELECT pgq.reap()", convert=int)


def prune() -> Call:
    return Call("SELECT pgq.prune()", convert=int)


# --- periodic jobs ---------------------------------------------------------------------------


def schedule(name: str, cron: str, entrypoint: str, payload: Any) -> Call:
    query = (
        "SELECT pgq.schedule(name => %(name)s::text, cron => %(cron)s::text,"
        " entrypoint => %(entrypoint)s::text, payload => %(payload)s::jsonb)"
    )
    return Call(query, {"name": name, "cron": cron, "entrypoint": entrypoint, "payload": _json(payload)})


def unschedule(name: str) -> Call:
    return Call("SELECT pgq.unschedule(name => %s::text)", (name,), convert=bool)


def run_schedules(now: datetime | None) -> Call:
    if now is not None:
        check_aware("now", now)
    return Call("SELECT pgq.run_schedules(now => %s::timestamptz)", (now,), convert=int)


# --- views -----------------------------------------------------------------------------------


def schedules() -> Call:
    query = sql.SQL("SELECT {} FROM pgq.schedules ORDER BY name").format(_columns(ScheduleRow))
    return Call(query, shape="rows", row_class=ScheduleRow)


def stats(since: timedelta | str) -> Call:
    query = sql.SQL("SELECT {} FROM pgq.stats(since => %s::interval) ORDER BY entrypoint").format(
        _columns(StatsRow)
    )
    checks = (("since", since),) if isinstance(since, str) else ()
    return Call(query, (since,), shape="rows", row_class=StatsRow, intervals=checks)


def queues() -> Call:
    query = sql.SQL("SELECT {} FROM pgq.queues ORDER BY entrypoint").format(_columns(QueueRow))
    return Call(query, shape="rows", row_class=QueueRow)


def workers() -> Call:
    query = sql.SQL("SELECT {} FROM pgq.workers ORDER BY state = 'alive' DESC, registered_at DESC").format(
        _columns(WorkerRow)
    )
    return Call(query, shape="rows", row_class=WorkerRow)


def sweeps() -> Call:
    query = sql.SQL("SELECT {} FROM pgq.sweeps").format(_columns(SweepRow))
    return Call(query, shape="rows", row_class=SweepRow)


def jobs(entrypoint: str | None, status: str | None, limit: int) -> Call:
    if status is not None and status not in LIVE_STATUSES:
        raise InvalidArgument(
            f"pgq: invalid argument status: {status!r} is not a live status"
            f" (hint: use one of {', '.join(LIVE_STATUSES)}; finished jobs are in outcomes())"
        )
    _check_limit(limit)
    query = sql.SQL(
        "SELECT {} FROM pgq.jobs"
        " WHERE (%(entrypoint)s::text IS NULL OR entrypoint = %(entrypoint)s::text)"
        " AND (%(status)s::text IS NULL OR status = %(status)s::text)"
        " ORDER BY id LIMIT %(limit)s::integer"
    ).format(_columns(JobRow))
    params = {"entrypoint": entrypoint, "status": status, "limit": limit}
    return Call(query, params, shape="rows", row_class=JobRow)


OUTCOMES = ("succeeded", "canceled", "dead", "failed")


def outcomes(entrypoint: str | None, outcome: str | None, limit: int) -> Call:
    """Rows of pgq.outcomes, newest first (outcome: succeeded, canceled, dead, failed)."""
    if outcome is not None and outcome not in OUTCOMES:
        raise InvalidArgument(
            f"pgq: invalid argument outcome: {outcome!r} (hint: use one of {', '.join(OUTCOMES)})"
        )
    _check_limit(limit)
    query = sql.SQL(
        "SELECT {} FROM pgq.outcomes"
        " WHERE (%(entrypoint)s::text IS NULL OR entrypoint = %(entrypoint)s::text)"
        " AND (%(outcome)s::text IS NULL OR outcome = %(outcome)s::text)"
        " ORDER BY finished_at DESC, job_id DESC LIMIT %(limit)s::integer"
    ).format(_columns(OutcomeRow))
    params = {"entrypoint": entrypoint, "outcome": outcome, "limit": limit}
    return Call(query, params, shape="rows", row_class=OutcomeRow)


def _check_limit(limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidArgument(f"pgq: invalid argument limit: {limit!r} (hint: use a positive integer)")
