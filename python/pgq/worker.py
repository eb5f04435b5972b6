"""The worker: claims jobs, runs handlers, heartbeats and settles jobs through pgq's SQL.

It decides nothing about a job's fate: retries, backoff, dead jobs, leases and fencing are
pgq.fail, pgq.claim, pgq.heartbeat and pgq.complete. Delivery is at-least-once, so
handlers must be idempotent.

One asyncio loop runs four tasks: the claimer (claims up to the free capacity, then waits
for a NOTIFY or the poll interval), the completer (completes finished jobs in batches: what
finishes during one round trip goes in the next), the heartbeat (extends the leases and
learns of cancellations) and the listener (a dedicated autocommit connection on LISTEN).
`def` handlers run in a thread pool, `async def` handlers on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import signal
import socket
import sys
import traceback
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from .dsn import resolve_dsn
from .errors import PgqError, UnknownWorker, WorkerGone, translate
from .job import Job

log = logging.getLogger("pgq.worker")

_TRANSIENT = (psycopg.OperationalError, PoolTimeout)


@dataclass(frozen=True)
class _Handler:
    fn: Callable[..., Any]
    is_async: bool
    transactional: bool


if sys.version_info >= (3, 11):

    async def _within(coro: Any, seconds: float) -> Any:
        """Await coro for at most `seconds` (TimeoutError). Unlike wait_for, no extra Task."""
        async with asyncio.timeout(seconds):
            return await coro

else:

    async def _within(coro: Any, seconds: float) -> Any:
        return await asyncio.wait_for(coro, seconds)


class _Fenced(Exception):
    """pgq.complete did not complete the job: another delivery owns it now."""


class Worker:
    """Runs handlers for entrypoints.

    worker = pgq.Worker(dsn, concurrency=20)

    @worker.entrypoint("send_email")
    async def send_email(job: pgq.Job) -> None: ...

    worker.run()  # until SIGTERM or SIGINT
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        concurrency: int = 20,
        batch_size: int | None = None,
        poll_interval: float = 1.0,
        grace_period: float = 30.0,
        name: str | None = None,
        listen_dsn: str | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.dsn = dsn
        self.listen_dsn = listen_dsn
        self.concurrency = concurrency
        self.batch_size = batch_size
        self.poll_interval = poll_interval
        self.grace_period = grace_period
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.worker_id: UUID | None = None
        self.completed = 0
        self.failed = 0
        self._handlers: dict[str, _Handler] = {}
        self._running: dict[int, tuple[Job, asyncio.Task[None], _Handler]] = {}
        self._done: list[Job] = []
        self._signals = 0

    # --- registration -------------------------------------------------------------------

    def entrypoint(self, name: str, *, transactional: bool = False) -> Callable[[Any], Any]:
        """Register the decorated function as the handler of an entrypoint.

        With transactional=True the handler must be a `def` taking (job, conn): conn is a
        psycopg connection in an open transaction, and the job is completed in that same
        transaction, so the handler's writes commit if and only if the job completes.
        """

        def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
            is_async = inspect.iscoroutinefunction(fn)
            if transactional and is_async:
                raise TypeError("transactional handlers must be plain `def` functions")
            if name in self._handlers:
                raise ValueError(f"entrypoint {name!r} already has a handler")
            self._handlers[name] = _Handler(fn, is_async, transactional)
            return fn

        return decorator

    @property
    def entrypoints(self) -> list[str]:
        return sorted(self._handlers)

    # --- running ------------------------------------------------------------------------

    def run(self) -> None:
        """Run until SIGTERM/SIGINT: then stop claiming, let running handlers finish for up
        to grace_period seconds, release what is unfinished, unregister and return."""
        asyncio.run(self.run_async())

    def stop(self) -> None:
        """Ask a running worker to shut down gracefully (thread-safe via the loop)."""
        loop = getattr(self, "_loop", None)
        if loop is not None:
            loop.call_soon_threadsafe(self._begin_stop)

    async def run_async(self) -> None:
        if not self._handlers:
            raise ValueError("no handlers: register one with @worker.entrypoint(name)")
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._wake = asyncio.Event()
        self._capacity = asyncio.Event()
        self._flush = asyncio.Event()
        self._completing = asyncio.Lock()
        self._completing_ids: list[int] = []  # the batch pgq.complete is working on
        self._registering = asyncio.Lock()
        self._claim_lost: UUID | None = None  # a claim of this worker id lost its reply
        self._batch = self.batch_size or self.concurrency
        self._lease = 30.0
        self._poll = self.poll_interval
        dsn = resolve_dsn(self.dsn)
        # No server-side prepared statements: they break behind PgBouncer in transaction
        # mode, and every statement here is a call of a function whose plans are cached.
        conn_kwargs = {"autocommit": True, "prepare_threshold": None}
        self._pool = AsyncConnectionPool(dsn, min_size=2, max_size=4, open=False, kwargs=conn_kwargs)
        self._executor = ThreadPoolExecutor(self.concurrency, thread_name_prefix="pgq-handler")
        self._sync_pool: ConnectionPool | None = None
        if any(h.transactional for h in self._handlers.values()):
            self._sync_pool = ConnectionPool(
                dsn, min_size=1, max_size=self.concurrency, kwargs={"prepare_threshold": None}, open=True
            )
        self._install_signal_handlers()
        await self._pool.open(wait=False)
        try:
            await self._register()
            background = [
                asyncio.create_task(self._listen_loop(dsn), name="pgq-listen"),
                asyncio.create_task(self._heartbeat_loop(), name="pgq-heartbeat"),
                asyncio.create_task(self._complete_loop(), name="pgq-complete"),
            ]
            await self._claim_loop()
            await self._shutdown()
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
        finally:
            self._remove_signal_handlers()
            await self._pool.close()
            if self._sync_pool is not None:
                self._sync_pool.close()
            self._executor.shutdown(wait=False, cancel_futures=True)
        log.info("worker %s stopped: %d completed, %d failed", self.name, self.completed, self.failed)

    def _install_signal_handlers(self) -> None:
        self._signal_handlers = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                self._loop.add_signal_handler(sig, self._on_signal, sig)
                self._signal_handlers.append(sig)
            except (RuntimeError, ValueError):  # not the main thread
                pass

    def _remove_signal_handlers(self) -> None:
        for sig in self._signal_handlers:
            self._loop.remove_signal_handler(sig)

    def _on_signal(self, sig: signal.Signals) -> None:
        self._signals += 1
        if self._signals > 1:
            log.warning("second %s: exiting now; unfinished jobs return after their lease", sig.name)
            os._exit(1)
        log.info("%s: stopping; running jobs have %.0f s to finish", sig.name, self.grace_period)
        self._begin_stop()

    def _begin_stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        self._capacity.set()

    # --- database -----------------------------------------------------------------------

    async def _sql(self, query: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        try:
            async with self._pool.connection() as conn:
                cur = conn.cursor(row_factory=dict_row)
                await cur.execute(query, params)
                return await cur.fetchall() if cur.description else []
        except psycopg.Error as exc:
            err = translate(exc)
            if err is exc:
                raise
            raise err from exc

    async def _retrying(self, what: str, query: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """Run a statement until it succeeds, backing off while the database is away."""
        delay = 0.1
        while True:
            try:
                return await self._sql(query, params)
            except _TRANSIENT as exc:
                log.warning("%s failed (%s); retrying in %.1f s", what, str(exc).strip(), delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _register(self) -> None:
        rows = await self._retrying(
            "register",
            "SELECT pgq.register_worker(name => %s::text, entrypoints => %s::text[]) AS id",
            (self.name, self.entrypoints),
        )
        self.worker_id = rows[0]["id"]
        await self._refresh_settings()
        log.info(
            "worker %s registered as %s for %s",
            self.name,
            self.worker_id,
            ", ".join(self.entrypoints),
        )

    async def _refresh_settings(self) -> None:
        rows = await self._sql(
            "SELECT extract(epoch FROM min(lease))::float8 AS lease, max(rate)::float8 AS rate"
            " FROM pgq.settings(entrypoints => %s::text[])",
            (self.entrypoints,),
        )
        self._lease = rows[0]["lease"]
        # A rate-limited entrypoint earns a token every 1/rate seconds and no NOTIFY says so:
        # poll about that often (each claim then takes what the bucket holds).
        rate = rows[0]["rate"]
        self._poll = min(self.poll_interval, max(1 / rate, 0.01)) if rate else self.poll_interval

    async def _reregister(self, reason: Exception, old: UUID | None) -> None:
        """Our worker row `old` is gone (reaped after a long outage): the jobs we hold were or
        will be re-delivered elsewhere, so stop them and start over under a new id. The claim
        and heartbeat loops may both find out: the lock and the id check make it happen once."""
        async with self._registering:
            if self.worker_id != old:
                return  # the other loop registered already
            log.warning("worker %s: %s; registering again", old, reason)
            for job, task, handler in list(self._running.values()):
                if job.worker_id == old:
                    job._cancel.set()
                    if handler.is_async:
                        task.cancel()
            await self._register()

    async def _release_unknown(self, worker_id: UUID | None) -> None:
        """A claim's reply was lost: it may have committed, leaving us jobs we will never run
        (and would keep alive with our heartbeats). Give back all but the ones we know of."""
        known = [*self._running, *(job.id for job in self._done), *self._completing_ids]
        rows = await self._sql(
            "SELECT pgq.release(worker_id => %s::uuid, keep => %s::bigint[]) AS released",
            (worker_id, known),
        )
        self._claim_lost = None
        if rows[0]["released"]:
            log.warning("released %d jobs of a claim whose reply was lost", rows[0]["released"])

    # --- claiming -----------------------------------------------------------------------

    async def _claim_loop(self) -> None:
        delay = 0.1
        while not self._stopping.is_set():
            free = self.concurrency - len(self._running)
            if free <= 0:
                self._capacity.clear()
                await self._capacity.wait()
                continue
            wanted = min(free, self._batch)
            self._wake.clear()
            worker_id = self.worker_id  # the claim's jobs belong to this id, whatever happens next
            try:
                if self._claim_lost == worker_id:
                    await self._release_unknown(worker_id)
                rows = await self._sql(
                    "SELECT * FROM pgq.claim(worker_id => %s::uuid, entrypoints => %s::text[],"
                    " batch_size => %s::int)",
                    (worker_id, self.entrypoints, wanted),
                )
            except _TRANSIENT as exc:
                # The claim may have committed before the connection broke.
                self._claim_lost = worker_id
                log.warning("claim failed (%s); retrying in %.1f s", str(exc).strip(), delay)
                await self._sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            except (WorkerGone, UnknownWorker) as exc:
                await self._reregister(exc, worker_id)
                continue
            except (PgqError, psycopg.Error) as exc:
                # Not the connection: a bug or a misconfiguration. Keep the worker (and the
                # leases of its running jobs) alive, say so, and try again later.
                log.error("claim failed: %s; retrying in %.1f s", exc, delay)
                await self._sleep(delay)
                delay = min(delay * 2, 30.0)
                continue
            delay = 0.1
            for row in rows:
                self._start(Job(**row, worker_id=worker_id))
            if len(rows) < wanted:
                # Drained: sleep until a NOTIFY, or poll (a lost NOTIFY, a run_at reached).
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._poll)

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    def _start(self, job: Job) -> None:
        handler = self._handlers[job.entrypoint]
        if job.deliveries > 1:
            log.info("job %d (%s): delivery %d", job.id, job.entrypoint, job.deliveries)
        task = self._loop.create_task(self._execute(job, handler))
        self._running[job.id] = (job, task, handler)

    # --- running handlers ---------------------------------------------------------------

    async def _execute(self, job: Job, handler: _Handler) -> None:
        timeout = job.timeout.total_seconds()
        try:
            if handler.transactional:
                await asyncio.wait_for(
                    asyncio.shield(
                        self._loop.run_in_executor(self._executor, self._run_in_transaction, job, handler)
                    ),
                    timeout,
                )
                self.completed += 1
                return
            if handler.is_async:
                await _within(handler.fn(job), timeout)
            else:
                await asyncio.wait_for(
                    asyncio.shield(self._loop.run_in_executor(self._executor, handler.fn, job)),
                    timeout,
                )
        except asyncio.TimeoutError:
            job._cancel.set()
            await self._fail(job, f"timeout: ran longer than {job.timeout}")
        except asyncio.CancelledError:
            if self._stopping.is_set() and not job.cancelled:
                return  # shutdown past the grace period: unregister releases the job
            await self._fail(job, "canceled")
        except _Fenced:
            log.warning(
                "job %d (%s): no longer held by this worker; its writes were rolled back",
                job.id,
                job.entrypoint,
            )
        except Exception:
            await self._fail(job, traceback.format_exc())
        else:
            self._done.append(job)
            self._flush.set()
        finally:
            self._running.pop(job.id, None)
            self._capacity.set()

    def _run_in_transaction(self, job: Job, handler: _Handler) -> None:
        assert self._sync_pool is not None
        with self._sync_pool.connection() as conn, conn.transaction():
            handler.fn(job, conn)
            done = conn.execute(
                "SELECT pgq.complete(worker_id => %s::uuid, job_ids => %s::bigint[])",
                (job.worker_id, [job.id]),
            ).fetchall()
            if not done:
                raise _Fenced()

    async def _fail(self, job: Job, error: str) -> None:
        self.failed += 1
        try:
            rows = await self._retrying(
                f"fail job {job.id}",
                "SELECT pgq.fail(worker_id => %s::uuid, job_id => %s::bigint, error => %s::text) AS status",
                (job.worker_id, job.id, error),
            )
        except PgqError as exc:
            log.error("job %d (%s): could not record the failure: %s", job.id, job.entrypoint, exc)
            return
        status = rows[0]["status"] or "not held by this worker any more"
        first_line = error.strip().splitlines()[-1] if error.strip() else error
        log.warning(
            "job %d (%s) failed on attempt %d: %s -> %s",
            job.id,
            job.entrypoint,
            job.attempt + 1,
            first_line,
            status,
        )

    # --- completing ---------------------------------------------------------------------

    async def _complete_loop(self) -> None:
        while True:
            await self._flush.wait()
            self._flush.clear()
            await self._complete_pending()

    async def _complete_pending(self) -> None:
        # One flush at a time: shutdown's final flush must wait for a batch in flight.
        async with self._completing:
            await self._complete_batches()

    async def _complete_batches(self) -> None:
        while self._done:
            batch, self._done = self._done[:10000], self._done[10000:]
            by_worker: dict[UUID, list[int]] = {}
            for job in batch:
                by_worker.setdefault(job.worker_id, []).append(job.id)
            for worker_id, ids in by_worker.items():
                self._completing_ids = ids
                try:
                    rows = await self._retrying(
                        "complete",
                        "SELECT pgq.complete(worker_id => %s::uuid, job_ids => %s::bigint[]) AS id",
                        (worker_id, ids),
                    )
                finally:
                    self._completing_ids = []
                self.completed += len(rows)
                if len(rows) < len(ids):
                    lost = sorted(set(ids) - {r["id"] for r in rows})
                    log.warning(
                        "jobs %s were no longer held by this worker (re-delivered); not completed",
                        lost,
                    )

    # --- heartbeat and wake-ups ---------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        while True:
            # Well inside the lease: a missed beat or two still keeps the jobs.
            await asyncio.sleep(min(max(self._lease / 4, 0.1), 10.0))
            worker_id = self.worker_id
            try:
                rows = await self._sql("SELECT pgq.heartbeat(worker_id => %s::uuid) AS id", (worker_id,))
                await self._refresh_settings()
            except _TRANSIENT as exc:
                log.warning("heartbeat failed (%s)", str(exc).strip())
                continue
            except (WorkerGone, UnknownWorker) as exc:
                if not self._stopping.is_set():
                    await self._reregister(exc, worker_id)
                continue
            except (PgqError, psycopg.Error) as exc:
                log.error("heartbeat failed: %s", exc)
                continue
            for row in rows:
                entry = self._running.get(row["id"])
                if entry is None:
                    continue
                job, task, handler = entry
                log.info("job %d (%s): cancellation requested", job.id, job.entrypoint)
                job._cancel.set()
                if handler.is_async:
                    task.cancel()

    async def _listen_loop(self, dsn: str) -> None:
        delay = 0.1
        listen_dsn = self.listen_dsn or dsn
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(listen_dsn, autocommit=True) as conn:
                    await conn.execute("LISTEN pgq")
                    if not await self._notifications_arrive(conn):
                        log.warning(
                            "NOTIFY does not reach the LISTEN connection (a pooler in transaction mode?);"
                            " polling every %.2f s instead. Pass listen_dsn, a direct connection to"
                            " PostgreSQL, to be woken within milliseconds.",
                            self._poll,
                        )
                        return
                    delay = 0.1
                    self._wake.set()  # jobs may have arrived while we were not listening
                    async for notify in conn.notifies():
                        if notify.payload in self._handlers:
                            self._wake.set()
            except psycopg.OperationalError as exc:
                log.warning("LISTEN connection lost (%s); reconnecting in %.1f s", str(exc).strip(), delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _notifications_arrive(self, conn: psycopg.AsyncConnection[Any]) -> bool:
        """Send ourselves a NOTIFY through the pool and wait for it on the LISTEN connection.

        Behind PgBouncer in transaction mode the LISTEN lands on a pooled server connection
        and notifications never come back, which would silently cost the poll interval on
        every job; a direct connection gets the probe within milliseconds.
        """
        token = f"probe:{uuid.uuid4()}"
        await self._retrying("notify probe", "SELECT pg_notify('pgq', %s)", (token,))
        probe = conn.notifies(timeout=10)
        try:
            async for notify in probe:
                if notify.payload == token:
                    return True
            return False
        finally:
            # Close it now: the generator holds the connection's lock until it is closed.
            await probe.aclose()

    # --- shutdown -----------------------------------------------------------------------

    async def _shutdown(self) -> None:
        tasks = [task for _, task, _ in self._running.values()]
        if tasks:
            log.info("waiting up to %.0f s for %d running jobs", self.grace_period, len(tasks))
            await asyncio.wait(tasks, timeout=self.grace_period)
        leftover = [task for _, task, _ in self._running.values()]
        for task in leftover:
            task.cancel()
        await asyncio.gather(*leftover, return_exceptions=True)
        await self._complete_pending()
        if self.worker_id is not None:
            try:
                rows = await self._sql(
                    "SELECT pgq.unregister_worker(worker_id => %s::uuid) AS released",
                    (self.worker_id,),
                )
                if rows and rows[0]["released"]:
                    log.info("released %d unfinished jobs", rows[0]["released"])
            except (PgqError, *_TRANSIENT) as exc:
                log.warning(
                    "could not unregister (%s); the sweep will release our jobs after the lease",
                    exc,
                )
