# Generated from async_client.py by scripts/async_to_sync.py: do not edit.
# Edit async_client.py and run `make client`.
"""pgq.Client and pgq.AsyncClient: one method per public SQL function of pgq, over a small
connection pool.

Every method calls its SQL function with named arguments and explicit casts (the SQL text
is in pgq.queries, shared by both clients). Pass `conn=` (a psycopg Connection; an
AsyncConnection to pgq.AsyncClient) to run the call on your connection, inside your
transaction: the job exists if and only if your transaction commits. Without `conn=`, the
call runs on a pooled connection and is committed before the method returns.

Errors of SQLSTATE class PQ are raised as the matching pgq.errors class (InvalidArgument,
PayloadTooLarge, ...); a database without pgq (or with an older pgq) gives SchemaError;
other database errors are raised as psycopg raises them.

One definition for both: async_client.py (pgq.AsyncClient), async_client_enqueue.py and
async_client_admin.py are written by hand; client.py (pgq.Client), client_enqueue.py and
client_admin.py are generated from them by scripts/async_to_sync.py (`make client`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any, TypeAlias

import psycopg
from psycopg import sql
from psycopg.rows import class_row

from . import pools
from . import queries as q
from .client_admin import ClientAdmin
from .client_enqueue import ClientEnqueue
from .dsn import resolve_dsn
from .errors import PgqError, UnknownJob
from .queries import FINISHED_CHANNEL, FINISHED_STATUSES, LIVE_STATUSES, Call
from .rows import (
    DependencyResult,
    Enqueued,
    JobResult,
    JobRow,
    OutcomeRow,
    QueueRow,
    Reason,
    ScheduleRow,
    StatsRow,
    WorkerRow,
)

__all__ = [
    "LIVE_STATUSES",
    "Client",
    "Enqueued",
    "JobResult",
    "JobRow",
    "OutcomeRow",
    "QueueRow",
    "ScheduleRow",
    "StatsRow",
    "WorkerRow",
]

Conn: TypeAlias = "psycopg.Connection[Any] | None"
# While waiting, re-read the job's status this often even without a notification.
RECHECK_SECONDS = 10.0
log = logging.getLogger("pgq.client")


class Client(ClientAdmin, ClientEnqueue):
    """Talks to the pgq schema of one database: pgq.Client for threads and plain code,
    pgq.AsyncClient for asyncio (the same methods, awaitable).

    dsn: a libpq connection string; default $PGQ_DSN, else libpq's environment (PGHOST, ...).
    The pool (min_size to max_size connections) opens on first use (an AsyncClient's on
    `async with` too); close() or leaving the `with` / `async with` block closes it. A
    Client is safe to share between threads, an AsyncClient between the tasks of one event
    loop. prepare: enqueue calls run as server-side prepared statements on connections
    straight to PostgreSQL (never through a pooler such as PgBouncer, which it recognizes);
    False turns that off.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        min_size: int = 1,
        max_size: int = 4,
        timeout: float = 30.0,
        prepare: bool = True,
    ) -> None:
        self.dsn = resolve_dsn(dsn)
        self._prepare = prepare
        # pgq.pools: connects again within half a second of the server accepting again, never
        # lends a connection that died while idle, and a PoolTimeout says why.
        self._pool = pools.Pool(
            self.dsn,
            link=pools.Link("pgq-client", log),
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            open=False,
            name="pgq-client",
            # Autocommit: one round trip per call, no BEGIN/COMMIT around it. No server-side
            # prepared statements unless _configure finds PostgreSQL itself at the other end,
            # so the client works through PgBouncer.
            kwargs={"autocommit": True, "prepare_threshold": None},
            configure=self._configure,
        )
        self._lock = threading.Lock()
        self._state = "new"  # new -> open -> closed

    # --- lifecycle -------------------------------------------------------------------

    def _open(self) -> pools.Pool:
        if self._state == "open":
            return self._pool
        with self._lock:
            if self._state == "closed":
                raise PgqError("this pgq.Client is closed")
            if self._state == "new":
                # Connect once directly: a wrong DSN or a server that is down fails here,
                # with libpq's message, instead of as a pool timeout much later.
                psycopg.Connection.connect(self.dsn).close()
                self._pool.open()
                self._state = "open"
        return self._pool

    def close(self) -> None:
        """Close the pool. The client cannot be used afterwards."""
        with self._lock:
            if self._state == "open":
                self._pool.close()
            self._state = "closed"

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """Lend one of the pool's connections for your own statements, for the block's
        duration, then take it back. It is in autocommit (`conn.transaction()` opens a
        transaction); pass it as conn= to run pgq's calls on it. Its errors are psycopg's."""
        with self._open().connection() as conn:
            yield conn

    # --- plumbing --------------------------------------------------------------------

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        """A new pooled connection: prepared statements only straight to PostgreSQL."""
        server_pid = None
        if self._prepare:
            (server_pid,) = conn.execute(q.BACKEND_PID).fetchall()[0]
        conn.prepare_threshold = q.pooled_threshold(self._prepare, conn.info.backend_pid, server_pid)

    def _run(self, call: Call, conn: Conn = None) -> Any:
        """Run one Call: on `conn` inside the caller's transaction, else on a pooled
        connection (committed)."""
        try:
            if conn is not None:
                return _run_on(conn, call, savepoint=True)
            progress = pools.Progress()
            try:
                return self._run_pooled(call, progress)
            except psycopg.OperationalError as exc:
                if not pools.retry_unsent(exc, progress):
                    raise
                # The connection was lost before the statement was sent: it cannot have
                # committed. Once more, on a fresh connection.
                log.info("connection lost before the call was sent (%s); sending it once more", exc)
                return self._run_pooled(call, pools.Progress())
        except psycopg.Error as exc:
            err = q.database_error(exc)
            if err is exc:
                raise
            raise err from exc

    def _run_pooled(self, call: Call, progress: pools.Progress) -> Any:
        """Run one Call on a pooled connection (committed)."""
        try:
            with self._open().connection() as pooled:
                prepare = q.pooled_prepare(call, self._prepare)
                return _run_on(pooled, call, savepoint=False, prepare=prepare, progress=progress)
        except q.STATEMENT_LOST:
            # Not run: a pooler sits in between after all. Prepare nothing any more.
            self._prepare = False
            progress.sent = False  # that statement was not run
            with self._open().connection() as pooled:
                return _run_on(pooled, call, savepoint=False, prepare=False, progress=progress)

    # --- following jobs --------------------------------------------------------------

    def job_status(self, job_id: int, *, conn: Conn = None) -> str | None:
        """queued, waiting, running, dead, succeeded or canceled; None when unknown."""
        status: str | None = self._run(q.job_status(job_id), conn)
        return status

    def job(self, job_id: int, *, conn: Conn = None) -> dict[str, Any] | None:
        """One job's whole story (pgq.job), live or finished: a dict with status, payload,
        headers, attempts (each failed attempt with its full error), result, timings,
        depends_on and dependents. None for an unknown (or pruned) id."""
        story: dict[str, Any] | None = self._run(q.job(job_id), conn)
        return story

    def explain(self, job_id: int, *, conn: Conn = None) -> list[Reason]:
        """Why the job is not running now (pgq.explain): one Reason per cause, none for a
        due job that nothing holds back. Raises UnknownJob for an unknown (or pruned) id."""
        reasons: list[Reason] = self._run(q.explain(job_id), conn)
        return reasons

    def dependency_results(self, job_id: int, *, conn: Conn = None) -> list[DependencyResult]:
        """The jobs this job depends on, in id order, each with its status and (once it
        succeeded) its result (pgq.dependency_results). Raises UnknownJob for an unknown id."""
        rows: list[DependencyResult] = self._run(q.dependency_results(job_id), conn)
        return rows

    def result(self, job_id: int, *, conn: Conn = None) -> JobResult | None:
        """How the job ended (status succeeded, canceled or dead; result; error), or None
        while it is unfinished. Raises UnknownJob for an unknown (or pruned) id."""
        return q.to_result(job_id, self.job(job_id, conn=conn))

    def wait(
        self,
        job_id: int,
        *,
        timeout: float | None = None,
        on_progress: Callable[[dict[str, Any]], Any] | None = None,
    ) -> JobResult:
        """Block until the job is finished (succeeded, canceled or dead); return its
        JobResult. Listens for the job's end on a connection of its own (pgq.watch), so
        it costs no polling. Raises TimeoutError after `timeout` seconds (None: no limit),
        UnknownJob for an unknown (or pruned) id. on_progress is called with each progress
        report of the job ({"value", "note", "delivery"}; pgq.progress), the last stored
        one first (an AsyncClient awaits it when it returns an awaitable)."""
        q.check_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            with psycopg.Connection.connect(self.dsn, autocommit=True, prepare_threshold=None) as conn:
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(FINISHED_CHANNEL)))
                if on_progress is not None:
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(q.PROGRESS_CHANNEL)))
                status = _run_on(conn, q.watch(job_id), savepoint=False)
                if on_progress is not None and status is not None:
                    report = q.stored_progress(_run_on(conn, q.job(job_id), savepoint=False))
                    if report is not None:
                        on_progress(report)
                while status is not None and status not in FINISHED_STATUSES:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        raise TimeoutError(f"job {job_id} unfinished after {timeout} s (status {status})")
                    wait_for = RECHECK_SECONDS if remaining is None else min(remaining, RECHECK_SECONDS)
                    for notify in conn.notifies(timeout=wait_for):
                        if notify.channel == q.PROGRESS_CHANNEL:
                            report = q.progress_of(job_id, notify.payload)
                            if report is not None and on_progress is not None:
                                on_progress(report)
                        elif notify.payload == str(job_id):
                            break
                    status = _run_on(conn, q.job_status(job_id), savepoint=False)
                if status is None:
                    raise UnknownJob(f"pgq: job {job_id} is unknown (or its outcome was pruned)")
                result = q.to_result(job_id, _run_on(conn, q.job(job_id), savepoint=False))
        except psycopg.Error as exc:
            err = q.database_error(exc)
            if err is exc:
                raise
            raise err from exc
        assert result is not None
        return result


def _run_on(
    conn: psycopg.Connection[Any],
    call: Call,
    *,
    savepoint: bool,
    prepare: bool | None = None,
    progress: pools.Progress | None = None,
) -> Any:
    """Execute a Call on one connection. Interval texts are cast first, each on its own (in
    a savepoint on the caller's connection, so that its transaction survives a typo).
    prepare: psycopg's (None: the connection's prepare_threshold decides). progress: marked
    sent just before the call's own statement goes out."""
    for argument, text in call.intervals:
        try:
            if savepoint:
                with conn.transaction():
                    conn.execute(q.INTERVAL_CHECK, (text,), prepare=prepare)
            else:
                conn.execute(q.INTERVAL_CHECK, (text,), prepare=prepare)
        except psycopg.DataError as exc:
            raise q.interval_error(argument, text, exc) from exc
    cursor = conn.cursor(row_factory=class_row(call.row_class)) if call.row_class else conn.cursor()
    with cursor as cur:
        if progress is not None:
            progress.sent = True
        cur.execute(call.query, call.params, prepare=prepare)
        return q.shape_rows(call, cur.fetchall())
