"""pgq.Client: one method per public SQL function of pgq, over a small connection pool.

Every method calls its SQL function with named arguments and explicit casts (the SQL text
is in pgq.queries, shared with pgq.AsyncClient). Pass `conn=` (a psycopg Connection) to
run the call on your connection, inside your transaction: the job exists if and only if
your transaction commits. Without `conn=`, the call runs on a pooled connection and is
committed before the method returns.

Errors of SQLSTATE class PQ are raised as the matching pgq.errors class (InvalidArgument,
PayloadTooLarge, ...); a database without pgq (or with an older pgq) gives SchemaError;
other database errors are raised as psycopg raises them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from types import TracebackType
from typing import Any, TypeAlias

import psycopg
from psycopg import sql
from psycopg.rows import class_row

from . import batches, pools
from . import queries as q
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
    Rerun,
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
]
__all__ += ["StatsRow", "WorkerRow"]

Conn: TypeAlias = "psycopg.Connection[Any] | None"
Interval: TypeAlias = "timedelta | str | None"
# While waiting, re-read the job's status this often even without a notification.
RECHECK_SECONDS = 10.0
log = logging.getLogger("pgq.client")


class Client(batches.BatchMethods):
    """Talks to the pgq schema of one database.

    dsn: a libpq connection string; default $PGQ_DSN, else libpq's environment (PGHOST, ...).
    The pool (min_size to max_size connections) opens on first use; close() or a `with`
    block closes it. A Client is safe to share between threads. prepare: enqueue calls run
    as server-side prepared statements on connections straight to PostgreSQL (never through
    a pooler such as PgBouncer, which it recognizes); False turns that off.
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
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

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
        concurrency_key: str | None = None,
        dedupe_scope: str | None = None,
        dedupe_window: Interval = None,
        dedupe_mode: str | None = None,
        conn: Conn = None,
    ) -> int:
        """Enqueue one job (pgq.enqueue); returns its id.

        payload: any JSON-serialisable value (None is SQL NULL). run_at: an aware datetime,
        or a timedelta from the database's now(). A live job with the same entrypoint and
        dedupe_key is not duplicated: its id is returned. depends_on: ids of jobs that must
        succeed first: the job is 'waiting' until they all have, and is canceled if one of
        them ends dead or canceled. concurrency_key: the key (a tenant, a customer) the job
        counts against: claims rotate among keys, and the entrypoint's key_concurrency limits
        the running jobs of one key. dedupe_scope, dedupe_window, dedupe_mode: see
        enqueue_job(), which also tells whether the call created the job. Raises
        InvalidArgument, PayloadTooLarge.
        """
        call = q.enqueue(
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
        return int(self._run(call, conn))

    def enqueue_job(
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
        concurrency_key: str | None = None,
        dedupe_scope: str | None = None,
        dedupe_window: Interval = None,
        dedupe_mode: str | None = None,
        conn: Conn = None,
    ) -> Enqueued:
        """Enqueue one job (pgq.enqueue_job) and tell whether this call created it: an
        Enqueued(id, created, replaced). Takes enqueue()'s arguments. dedupe_scope: which jobs
        with the same entrypoint and dedupe_key stand for this one: 'live' (default: queued,
        waiting, running) or 'queued' (not started yet: a running job gives its key up and
        a new job is created). dedupe_window (a timedelta or interval text): a job with the
        key that succeeded within it stands too. dedupe_mode 'replace': a standing job not
        started yet takes this call's payload, priority, run_at, headers, max_attempts and
        concurrency_key (replaced=True). Raises InvalidArgument, PayloadTooLarge,
        WrongIsolation (a window in a REPEATABLE READ or SERIALIZABLE transaction).
        """
        call = q.enqueue_job(
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
        enqueued: Enqueued = self._run(call, conn)
        return enqueued

    def enqueue_batch(
        self,
        entrypoint: str,
        payloads: Iterable[Any],
        *,
        priority: int = 0,
        run_at: datetime | timedelta | None = None,
        concurrency_keys: Sequence[str | None] | None = None,
        dedupe_keys: Sequence[str | None] | None = None,
        dedupe_scope: str | None = None,
        dedupe_window: Interval = None,
        dedupe_mode: str | None = None,
        headers: dict[str, Any] | None = None,
        max_attempts: int | None = None,
        depends_on: Iterable[int] | None = None,
        conn: Conn = None,
    ) -> list[int]:
        """Enqueue one job per payload in one statement (pgq.enqueue_batch); returns the ids
        in the order of payloads. At most 100000 payloads. dedupe_keys: one per payload (None:
        no key), with dedupe_scope, dedupe_window, dedupe_mode as in enqueue_job(); a payload
        whose key finds a standing job gets that job's id (jobs go in one by one then).
        headers, max_attempts, depends_on: as in enqueue(), for every job of the batch.
        Raises InvalidArgument, PayloadTooLarge."""
        call = q.enqueue_batch(
            entrypoint,
            payloads,
            priority=priority,
            run_at=run_at,
            concurrency_keys=concurrency_keys,
            dedupe_keys=dedupe_keys,
            dedupe_scope=dedupe_scope,
            dedupe_window=dedupe_window,
            dedupe_mode=dedupe_mode,
            headers=headers,
            max_attempts=max_attempts,
            depends_on=depends_on,
        )
        ids: list[int] = self._run(call, conn)
        return ids

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
        on_progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> JobResult:
        """Block until the job is finished (succeeded, canceled or dead); return its
        JobResult. Listens for the job's end on a connection of its own (pgq.watch), so
        it costs no polling. Raises TimeoutError after `timeout` seconds (None: no limit),
        UnknownJob for an unknown (or pruned) id. on_progress is called with each progress
        report of the job ({"value", "note", "delivery"}; pgq.progress), the last stored
        one first."""
        q.check_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            with psycopg.connect(self.dsn, autocommit=True, prepare_threshold=None) as conn:
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

    # --- worker protocol -------------------------------------------------------------

    def complete(
        self,
        worker_id: Any,
        job_ids: Iterable[int],
        *,
        results: Sequence[Any] | None = None,
        deliveries: Sequence[int] | None = None,
        conn: Conn = None,
    ) -> list[int]:
        """Complete jobs the worker holds (pgq.complete, fenced); returns the ids completed.
        results: one JSON value per id; deliveries: per id, the delivery to settle."""
        done: list[int] = self._run(q.complete(worker_id, job_ids, results, deliveries), conn)
        return done

    def fail(
        self,
        worker_id: Any,
        job_id: int,
        error: str,
        *,
        retry_in: timedelta | None = None,
        delivery: int | None = None,
        conn: Conn = None,
    ) -> str | None:
        """Fail a held job (pgq.fail): 'queued', 'dead', 'canceled', or None when the worker
        no longer holds it (or that delivery)."""
        outcome: str | None = self._run(q.fail(worker_id, job_id, error, retry_in, delivery), conn)
        return outcome

    def snooze(
        self,
        worker_id: Any,
        job_id: int,
        delay: timedelta,
        *,
        delivery: int | None = None,
        conn: Conn = None,
    ) -> str | None:
        """Put a held job back for `delay` without spending an attempt (pgq.snooze):
        'snoozed'; 'queued', 'dead' or 'canceled' past max_snoozes (the job failed); None
        when the worker no longer holds it (or that delivery)."""
        outcome: str | None = self._run(q.snooze(worker_id, job_id, delay, delivery), conn)
        return outcome

    def confirm_cancel(
        self, worker_id: Any, job_id: int, *, delivery: int | None = None, conn: Conn = None
    ) -> str | None:
        """Settle a held job whose cancellation was requested (pgq.heartbeat returned its id)
        as canceled, no attempt spent (pgq.confirm_cancel): 'canceled', or None when the
        worker no longer holds it (or that delivery)."""
        outcome: str | None = self._run(q.confirm_cancel(worker_id, job_id, delivery), conn)
        return outcome

    # --- administration --------------------------------------------------------------

    def cancel(self, job_ids: int | Iterable[int], *, conn: Conn = None) -> int:
        """Cancel jobs (pgq.cancel): queued, waiting and dead ones at once, running ones at
        their next heartbeat. Returns how many were canceled or marked."""
        return int(self._run(q.cancel(job_ids), conn))

    def retry(self, job_ids: int | Iterable[int], *, conn: Conn = None) -> int:
        """Re-queue dead jobs now with attempts reset (pgq.retry); returns how many."""
        return int(self._run(q.retry(job_ids), conn))

    def forget_steps(self, job_ids: int | Iterable[int], *, conn: Conn = None) -> int:
        """Forget the durable steps of jobs that are not running (pgq.forget_steps), so that
        their next run starts over; with retry() in one transaction, a retry from scratch."""
        return int(self._run(q.forget_steps(job_ids), conn))

    def rerun(self, job_ids: int | Iterable[int], *, conn: Conn = None) -> list[Rerun]:
        """Enqueue finished jobs (succeeded, canceled, discarded) again, each as a new job
        from its stored row (pgq.rerun); live and unknown ids are skipped."""
        rows: list[Rerun] = self._run(q.rerun(job_ids), conn)
        return rows

    def pause(self, entrypoint: str, *, create_new: bool | None = None, conn: Conn = None) -> None:
        """Stop claims of an entrypoint until resume(); enqueue still accepts jobs.
        create_new=False refuses an entrypoint nothing names yet (no job, settings, schedule
        or worker: a typo) with InvalidArgument; None or True pauses it anyway."""
        self._run(q.pause(entrypoint, create_new), conn)

    def resume(self, entrypoint: str, *, conn: Conn = None) -> None:
        """Let claims take an entrypoint's jobs again."""
        self._run(q.resume(entrypoint), conn)

    def configure(
        self,
        entrypoint: str,
        *,
        max_attempts: int | None = None,
        backoff_base: Interval = None,
        backoff_max: Interval = None,
        lease: Interval = None,
        timeout: Interval = None,
        concurrency: int | None = None,
        rate: Decimal | float | None = None,
        retention: Interval = None,
        max_deliveries: int | None = None,
        key_concurrency: int | None = None,
        max_snoozes: int | None = None,
        create_new: bool | None = None,
        conn: Conn = None,
    ) -> None:
        """Set per-entrypoint settings (pgq.configure); None leaves a setting as it is.

        Intervals are timedeltas or PostgreSQL interval text ("30 seconds").
        concurrency=0 removes the limit. rate: jobs started per second across all workers
        (0.001 to 1000000; a Decimal, or a float or int); rate=0 removes the limit.
        key_concurrency: the most running jobs of one concurrency key (1: one at a time, in
        order); 0 removes the limit. max_snoozes: how often one job may snooze.
        create_new=False refuses an entrypoint nothing names yet (a typo).
        Raises InvalidArgument; nothing changes then.
        """
        call = q.configure(
            entrypoint,
            max_attempts=max_attempts,
            backoff_base=backoff_base,
            backoff_max=backoff_max,
            lease=lease,
            timeout=timeout,
            concurrency=concurrency,
            rate=rate,
            retention=retention,
            max_deliveries=max_deliveries,
            key_concurrency=key_concurrency,
            max_snoozes=max_snoozes,
            create_new=create_new,
        )
        self._run(call, conn)

    def reap(self, *, conn: Conn = None) -> int:
        """Run the sweep now (pgq.reap); returns how many jobs it released or failed."""
        return int(self._run(q.reap(), conn))

    def prune(self, *, conn: Conn = None) -> int:
        """Apply outcome-log retention now (pgq.prune); returns how many outcomes it removed.
        pg_cron (or the workers' sweep) runs it hourly; 0 while another prune is running."""
        return int(self._run(q.prune(), conn))

    # --- periodic jobs ---------------------------------------------------------------

    def schedule(
        self, name: str, cron: str, entrypoint: str, payload: Any = None, *, conn: Conn = None
    ) -> datetime:
        """Create or replace the periodic job `name` (pgq.schedule); returns its next run.
        cron: 5 fields in UTC or a macro such as @daily; every matching minute,
        pgq.run_schedules enqueues one job of entrypoint with payload. Replacing a schedule
        keeps its last run (and next run when the cron is unchanged). Raises InvalidCron
        (naming the field, or for a cron that matches no date), InvalidArgument."""
        next_run: datetime = self._run(q.schedule(name, cron, entrypoint, payload), conn)
        return next_run

    def unschedule(self, name: str, *, conn: Conn = None) -> bool:
        """Remove the periodic job `name` (pgq.unschedule); False when there was none. Jobs it
        already enqueued are left alone."""
        return bool(self._run(q.unschedule(name), conn))

    def run_schedules(self, now: datetime | None = None, *, conn: Conn = None) -> int:
        """Enqueue the schedules due at `now` (pgq.run_schedules); returns how many.

        now: an aware datetime, default the database's current time. Each schedule fires
        at most once per minute however often this runs; pg_cron and the workers' sweep
        call it, so call it yourself only without either (or in tests).
        """
        return int(self._run(q.run_schedules(now), conn))

    # --- views -----------------------------------------------------------------------

    def schedules(self, *, conn: Conn = None) -> list[ScheduleRow]:
        """The pgq.schedules view: every periodic job, by name."""
        rows: list[ScheduleRow] = self._run(q.schedules(), conn)
        return rows

    def stats(self, since: timedelta | str = timedelta(minutes=5), *, conn: Conn = None) -> list[StatsRow]:
        """pgq.stats: per-entrypoint outcomes, jobs per second and wait/run percentiles over
        the last `since` (a timedelta or interval text, 1 second to 31 days); only entrypoints
        with outcomes in the window have a row. Raises InvalidArgument."""
        rows: list[StatsRow] = self._run(q.stats(since), conn)
        return rows

    def queues(self, *, conn: Conn = None) -> list[QueueRow]:
        """The pgq.queues view: one row per entrypoint with jobs or settings."""
        rows: list[QueueRow] = self._run(q.queues(), conn)
        return rows

    def workers(self, *, conn: Conn = None) -> list[WorkerRow]:
        """The pgq.workers view: alive workers first, then the most recently registered."""
        rows: list[WorkerRow] = self._run(q.workers(), conn)
        return rows

    def jobs(
        self, entrypoint: str | None = None, status: str | None = None, limit: int = 100, *, conn: Conn = None
    ) -> list[JobRow]:
        """Live jobs from the pgq.jobs view, oldest id first, optionally filtered. status:
        queued, waiting, running or dead (finished jobs: outcomes())."""
        rows: list[JobRow] = self._run(q.jobs(entrypoint, status, limit), conn)
        return rows

    def outcomes(
        self,
        entrypoint: str | None = None,
        outcome: str | None = None,
        limit: int = 100,
        *,
        conn: Conn = None,
    ) -> list[OutcomeRow]:
        """The outcome log (pgq.outcomes), newest first, optionally filtered. outcome:
        succeeded, canceled, dead (discarded) or failed (one row per failed attempt)."""
        rows: list[OutcomeRow] = self._run(q.outcomes(entrypoint, outcome, limit), conn)
        return rows


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
