"""pgq.Client: one method per public SQL function of pgq, over a small connection pool.

Every method calls its SQL function with named arguments and explicit casts. Pass `conn=`
(a psycopg Connection) to run the call on your connection, inside your transaction: the
job exists if and only if your transaction commits. Without `conn=`, the call runs on a
pooled connection and is committed before the method returns.

Errors of SQLSTATE class PQ are raised as the matching pgq.errors class (InvalidArgument,
PayloadTooLarge, ...); a database without pgq (or with an older pgq) gives SchemaError;
other database errors are raised as psycopg raises them.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from types import TracebackType
from typing import Any, TypeAlias, TypeVar

import psycopg
from psycopg import sql
from psycopg.rows import class_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from .dsn import resolve_dsn
from .errors import InvalidArgument, PgqError, SchemaError, translate
from .rows import JobRow, QueueRow, ScheduleRow, StatsRow, WorkerRow

__all__ = ["Client", "JobRow", "QueueRow", "ScheduleRow", "StatsRow", "WorkerRow"]

R = TypeVar("R")
Conn: TypeAlias = "psycopg.Connection[Any] | None"
Query: TypeAlias = "sql.Composable | str"
Params: TypeAlias = "Sequence[Any] | dict[str, Any]"

# The statuses of live jobs, the only ones the pgq.jobs view holds.
LIVE_STATUSES = ("queued", "waiting", "running", "dead")


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


class Client:
    """Talks to the pgq schema of one database.

    dsn: a libpq connection string; default $PGQ_DSN, else libpq's environment (PGHOST, ...).
    The pool (min_size to max_size connections) opens on first use; close() or a `with`
    block closes it. A Client is safe to share between threads.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        min_size: int = 1,
        max_size: int = 4,
        timeout: float = 30.0,
    ) -> None:
        self.dsn = resolve_dsn(dsn)
        self._pool: ConnectionPool = ConnectionPool(
            self.dsn,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            open=False,
            name="pgq-client",
            # Autocommit: one round trip per call, no BEGIN/COMMIT around it. No server-side
            # prepared statements, so the client works through PgBouncer.
            kwargs={"autocommit": True, "prepare_threshold": None},
        )
        self._lock = threading.Lock()
        self._state = "new"  # new -> open -> closed

    # --- lifecycle -------------------------------------------------------------------

    def _open(self) -> ConnectionPool:
        if self._state == "open":
            return self._pool
        with self._lock:
            if self._state == "closed":
                raise PgqError("this pgq.Client is closed")
            if self._state == "new":
                # Connect once directly: a wrong DSN or a server that is down fails here,
                # with libpq's message, instead of as a pool timeout much later.
                psycopg.connect(self.dsn).close()
                self._pool.open()
                self._state = "open"
        return self._pool

    def close(self) -> None:
        """Close the pool. The Client cannot be used afterwards."""
        with self._lock:
            if self._state == "open":
                self._pool.close()
            self._state = "closed"

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- plumbing --------------------------------------------------------------------

    def _fetch(self, query: Query, params: Params, conn: Conn, row_class: type[R] | None = None) -> list[Any]:
        """Run one statement and fetch its rows (tuples, or row_class instances).

        On `conn` the statement joins the caller's transaction; otherwise it runs on a
        pooled connection and is committed.
        """
        try:
            if conn is not None:
                return self._fetch_on(conn, query, params, row_class)
            with self._open().connection() as pooled:
                return self._fetch_on(pooled, query, params, row_class)
        except (psycopg.errors.InvalidSchemaName, psycopg.errors.UndefinedTable) as exc:
            raise SchemaError(
                f"{exc.diag.message_primary} (hint: is pgq installed in this database? Run `pgq install`.)"
            ) from exc
        except psycopg.errors.UndefinedFunction as exc:
            raise SchemaError(
                f"{exc.diag.message_primary} (hint: the database's pgq schema may be older"
                " than this package; run `pgq upgrade`.)"
            ) from exc
        except psycopg.Error as exc:
            err = translate(exc)
            if err is exc:
                raise
            raise err from exc

    @staticmethod
    def _fetch_on(
        conn: psycopg.Connection[Any], query: Query, params: Params, row_class: type[R] | None
    ) -> list[Any]:
        cursor = conn.cursor(row_factory=class_row(row_class)) if row_class else conn.cursor()
        with cursor as cur:
            cur.execute(query, params)
            return cur.fetchall()

    def _scalar(self, query: Query, params: Params, conn: Conn) -> Any:
        return self._fetch(query, params, conn)[0][0]

    # --- producing -------------------------------------------------------------------

    def enqueue(
        self,
        entrypoint: str,
        payload: Any = None,
        *,
        priority: int = 0,
        run_at: datetime | timedelta | None = None,
        dedupe_key: str | None = None,
        headers: dict[str, Any] | None = None,
        max_attempts: int | None = None,
        depends_on: Iterable[int] | None = None,
        conn: Conn = None,
    ) -> int:
        """Enqueue one job (pgq.enqueue); returns its id.

        payload: any JSON-serialisable value (None is SQL NULL). run_at: an aware datetime,
        or a timedelta from the database's now(). A live job with the same entrypoint and
        dedupe_key is not duplicated: its id is returned. depends_on: ids of jobs that must
        succeed first: the job is 'waiting' until they all have, and is canceled if one of
        them ends dead or canceled. Raises InvalidArgument, PayloadTooLarge.
        """
        params: dict[str, Any] = {
            "entrypoint": entrypoint,
            "payload": _json(payload),
            "priority": priority,
            "dedupe_key": dedupe_key,
            "headers": _json(headers),
            "max_attempts": max_attempts,
        }
        run_at_sql, params["run_at"] = _run_at(run_at)
        parts = [
            "entrypoint => %(entrypoint)s::text",
            "payload => %(payload)s::jsonb",
            "priority => %(priority)s::integer",
            f"run_at => {run_at_sql}",
            "dedupe_key => %(dedupe_key)s::text",
            "headers => %(headers)s::jsonb",
            "max_attempts => %(max_attempts)s::integer",
            "depends_on => %(depends_on)s::bigint[]",
        ]
        params["depends_on"] = None if depends_on is None else _ids("depends_on", depends_on)
        query = "SELECT pgq.enqueue(" + ", ".join(parts) + ")"
        return int(self._scalar(query, params, conn))

    def enqueue_batch(
        self,
        entrypoint: str,
        payloads: Iterable[Any],
        *,
        priority: int = 0,
        run_at: datetime | timedelta | None = None,
        conn: Conn = None,
    ) -> list[int]:
        """Enqueue one job per payload in one statement (pgq.enqueue_batch).

        Returns the ids in the order of payloads. At most 100000 payloads per call.
        Raises InvalidArgument, PayloadTooLarge.
        """
        run_at_sql, run_at_value = _run_at(run_at)
        query = (
            "SELECT id FROM pgq.enqueue_batch("
            "entrypoint => %(entrypoint)s::text, payloads => %(payloads)s::jsonb[],"
            f" priority => %(priority)s::integer, run_at => {run_at_sql}) AS id"
        )
        params = {
            "entrypoint": entrypoint,
            "payloads": [_json(p) for p in payloads],
            "priority": priority,
            "run_at": run_at_value,
        }
        return [int(row[0]) for row in self._fetch(query, params, conn)]

    def job_status(self, job_id: int, *, conn: Conn = None) -> str | None:
        """queued, waiting, running, dead, succeeded or canceled; None when unknown."""
        status: str | None = self._scalar("SELECT pgq.job_status(job_id => %s::bigint)", (job_id,), conn)
        return status

    # --- administration --------------------------------------------------------------

    def cancel(self, job_ids: int | Iterable[int], *, conn: Conn = None) -> int:
        """Cancel jobs (pgq.cancel): queued, waiting and dead ones at once, running ones at
        their next heartbeat. Returns how many were canceled or marked."""
        query = "SELECT pgq.cancel(job_ids => %s::bigint[])"
        return int(self._scalar(query, (_ids("job_ids", job_ids),), conn))

    def retry(self, job_ids: int | Iterable[int], *, conn: Conn = None) -> int:
        """Re-queue dead jobs now with attempts reset (pgq.retry); returns how many."""
        query = "SELECT pgq.retry(job_ids => %s::bigint[])"
        return int(self._scalar(query, (_ids("job_ids", job_ids),), conn))

    def pause(self, entrypoint: str, *, conn: Conn = None) -> None:
        """Stop claims of an entrypoint until resume(); enqueue still accepts jobs."""
        self._fetch("SELECT pgq.pause(entrypoint => %s::text)", (entrypoint,), conn)

    def resume(self, entrypoint: str, *, conn: Conn = None) -> None:
        """Let claims take an entrypoint's jobs again."""
        self._fetch("SELECT pgq.resume(entrypoint => %s::text)", (entrypoint,), conn)

    def configure(
        self,
        entrypoint: str,
        *,
        max_attempts: int | None = None,
        backoff_base: timedelta | str | None = None,
        backoff_max: timedelta | str | None = None,
        lease: timedelta | str | None = None,
        timeout: timedelta | str | None = None,
        concurrency: int | None = None,
        rate: Decimal | float | None = None,
        retention: timedelta | str | None = None,
        conn: Conn = None,
    ) -> None:
        """Set per-entrypoint settings (pgq.configure); None leaves a setting as it is.

        Intervals are timedeltas or PostgreSQL interval text ("30 seconds").
        concurrency=0 removes the limit. rate: jobs started per second across all workers
        (0.001 to 1000000; a Decimal, or a float or int); rate=0 removes the limit.
        Raises InvalidArgument; nothing changes then.
        """
        intervals = {
            "backoff_base": backoff_base,
            "backoff_max": backoff_max,
            "lease": lease,
            "timeout": timeout,
            "retention": retention,
        }
        for name, value in intervals.items():
            if isinstance(value, str):
                self._check_interval_text(name, value, conn)
        query = (
            "SELECT pgq.configure(entrypoint => %(entrypoint)s::text,"
            " max_attempts => %(max_attempts)s::integer,"
            " backoff_base => %(backoff_base)s::interval,"
            " backoff_max => %(backoff_max)s::interval,"
            " lease => %(lease)s::interval, timeout => %(timeout)s::interval,"
            " concurrency => %(concurrency)s::integer, rate => %(rate)s::numeric,"
            " retention => %(retention)s::interval)"
        )
        params = {
            "entrypoint": entrypoint,
            "max_attempts": max_attempts,
            "concurrency": concurrency,
            "rate": rate,
            **intervals,
        }
        self._fetch(query, params, conn)

    def _check_interval_text(self, argument: str, text: str, conn: Conn) -> None:
        """Cast interval text on its own first, so that a typo names its argument."""
        query = "SELECT %s::text::interval"
        try:
            if conn is None:
                self._fetch(query, (text,), None)
            else:
                with conn.transaction():  # a savepoint: the caller's transaction survives
                    self._fetch_on(conn, query, (text,), None)
        except psycopg.DataError as exc:
            raise InvalidArgument(
                f"pgq: invalid argument {argument}: {text!r} is not an interval"
                f" ({exc.diag.message_primary}) (hint: use PostgreSQL interval text,"
                " e.g. '30 seconds')"
            ) from exc

    def reap(self, *, conn: Conn = None) -> int:
        """Run the sweep now (pgq.reap); returns the number of jobs released or failed."""
        return int(self._scalar("SELECT pgq.reap()", (), conn))

    def prune(self, *, conn: Conn = None) -> int:
        """Apply outcome-log retention now (pgq.prune); returns how many outcomes it removed.

        pg_cron (or the workers' sweep) runs it hourly; 0 while another prune is running.
        """
        return int(self._scalar("SELECT pgq.prune()", (), conn))

    # --- periodic jobs ---------------------------------------------------------------

    def schedule(
        self,
        name: str,
        cron: str,
        entrypoint: str,
        payload: Any = None,
        *,
        conn: Conn = None,
    ) -> datetime:
        """Create or replace the periodic job `name` (pgq.schedule); returns its next run.

        cron: 5 fields in UTC (minute hour day-of-month month day-of-week) or a macro such
        as @daily. Every matching minute, pgq.run_schedules enqueues one job of entrypoint
        with payload. Replacing a schedule keeps its last run (and its next run when the
        cron is unchanged). Raises InvalidCron (naming the field, or for an expression that
        matches no date such as '0 0 31 2 *'), InvalidArgument, PayloadTooLarge.
        """
        query = (
            "SELECT pgq.schedule(name => %(name)s::text, cron => %(cron)s::text,"
            " entrypoint => %(entrypoint)s::text, payload => %(payload)s::jsonb)"
        )
        params = {"name": name, "cron": cron, "entrypoint": entrypoint, "payload": _json(payload)}
        next_run: datetime | None = self._scalar(query, params, conn)
        return next_run

    def unschedule(self, name: str, *, conn: Conn = None) -> bool:
        """Remove the periodic job `name` (pgq.unschedule); False when there was none.

        Jobs it already enqueued are left alone."""
        return bool(self._scalar("SELECT pgq.unschedule(name => %s::text)", (name,), conn))

    def run_schedules(self, now: datetime | None = None, *, conn: Conn = None) -> int:
        """Enqueue the schedules due at `now` (pgq.run_schedules); returns how many.

        now: an aware datetime, default the database's current time. Each schedule fires
        at most once per minute however often this runs; pg_cron and the workers' sweep
        call it, so call it yourself only without either (or in tests).
        """
        if now is not None:
            _check_aware("now", now)
        query = "SELECT pgq.run_schedules(now => %s::timestamptz)"
        return int(self._scalar(query, (now,), conn))

    # --- views -----------------------------------------------------------------------

    def schedules(self, *, conn: Conn = None) -> list[ScheduleRow]:
        """The pgq.schedules view: every periodic job, by name."""
        query = sql.SQL("SELECT {} FROM pgq.schedules ORDER BY name").format(_columns(ScheduleRow))
        return self._fetch(query, (), conn, ScheduleRow)

    def stats(self, since: timedelta | str = timedelta(minutes=5), *, conn: Conn = None) -> list[StatsRow]:
        """pgq.stats: per-entrypoint outcomes, jobs per second and wait/run percentiles over
        the last `since` (a timedelta or interval text, 1 second to 31 days).

        Only entrypoints with outcomes in the window have a row. Raises InvalidArgument.
        """
        if isinstance(since, str):
            self._check_interval_text("since", since, conn)
        query = sql.SQL("SELECT {} FROM pgq.stats(since => %s::interval) ORDER BY entrypoint").format(
            _columns(StatsRow)
        )
        return self._fetch(query, (since,), conn, StatsRow)

    def queues(self, *, conn: Conn = None) -> list[QueueRow]:
        """The pgq.queues view: one row per entrypoint with jobs or settings."""
        query = sql.SQL("SELECT {} FROM pgq.queues ORDER BY entrypoint").format(_columns(QueueRow))
        return self._fetch(query, (), conn, QueueRow)

    def workers(self, *, conn: Conn = None) -> list[WorkerRow]:
        """The pgq.workers view: alive workers first, then the most recently registered."""
        query = sql.SQL(
            "SELECT {} FROM pgq.workers ORDER BY state = 'alive' DESC, registered_at DESC"
        ).format(_columns(WorkerRow))
        return self._fetch(query, (), conn, WorkerRow)

    def jobs(
        self,
        entrypoint: str | None = None,
        status: str | None = None,
        limit: int = 100,
        *,
        conn: Conn = None,
    ) -> list[JobRow]:
        """Live jobs from the pgq.jobs view, oldest id first, optionally filtered.

        status: queued, waiting, running or dead (finished jobs are in pgq.outcomes).
        """
        if status is not None and status not in LIVE_STATUSES:
            raise InvalidArgument(
                f"pgq: invalid argument status: {status!r} is not a live status"
                f" (hint: use one of {', '.join(LIVE_STATUSES)}; finished jobs are in pgq.outcomes)"
            )
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidArgument(f"pgq: invalid argument limit: {limit!r} (hint: use a positive integer)")
        query = sql.SQL(
            "SELECT {} FROM pgq.jobs"
            " WHERE (%(entrypoint)s::text IS NULL OR entrypoint = %(entrypoint)s::text)"
            " AND (%(status)s::text IS NULL OR status = %(status)s::text)"
            " ORDER BY id LIMIT %(limit)s::integer"
        ).format(_columns(JobRow))
        params = {"entrypoint": entrypoint, "status": status, "limit": limit}
        return self._fetch(query, params, conn, JobRow)


def _run_at(run_at: datetime | timedelta | None) -> tuple[str, Any]:
    """The SQL for run_at and its parameter: a timedelta counts from the database's now()."""
    if isinstance(run_at, timedelta):
        return "now() + %(run_at)s::interval", run_at
    if run_at is not None:
        _check_aware("run_at", run_at, " or a timedelta")
    return "%(run_at)s::timestamptz", run_at


def _check_aware(argument: str, when: object, alternative: str = "") -> None:
    """A point in time must be an aware datetime: a naive one is ambiguous."""
    if not isinstance(when, datetime):
        raise InvalidArgument(f"pgq: invalid argument {argument}: {when!r} is not a datetime{alternative}")
    if when.utcoffset() is None:
        raise InvalidArgument(
            f"pgq: invalid argument {argument}: a naive datetime is ambiguous"
            f" (hint: pass an aware datetime, e.g. datetime.now(timezone.utc){alternative})"
        )
