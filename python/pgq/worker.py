"""The worker: claims jobs, runs handlers, heartbeats and settles jobs through pgq's SQL.

It decides nothing about a job's fate: retries, backoff, dead jobs, leases and fencing are
pgq.fail, pgq.claim, pgq.heartbeat and pgq.complete. Delivery is at-least-once, so
handlers must be idempotent.

One asyncio loop runs the claimer (claims up to the free slots, then waits for a NOTIFY,
a freed slot or the poll interval; once a claim found the queue drained, only for a NOTIFY
or the poll, unless NOTIFYs do not arrive or an entrypoint has a concurrency limit) and
three supervised background tasks: the completer (completes finished jobs in batches:
what finishes during one round trip goes in the next), the heartbeat (extends the
leases, tells the database which jobs this worker runs after a failure and every two
leases or minute, learns of cancellations, and sweeps now and then; on a connection of its
own, with a deadline: pgq.worker_lease) and the listener (a dedicated autocommit
connection on LISTEN). Every statement can be abandoned without waiting (pgq._deadline):
from SIGTERM to exit takes the grace period and about 3 s more, whatever the database does.
`def` handlers run in a thread pool, `async def` handlers on the loop. Every settle names
the delivery it settles, so a late call of an earlier run of the same job changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import signal
import socket
import time
import traceback
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar
from uuid import UUID

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import PoolTimeout

from . import pools, tracebacks, tracing, worker_lease
from ._deadline import Call, bounded
from ._redelivery import log_redelivery
from ._runs import Handler, Key, NotJson, Run, Timeout, call_handler, check_result, printable
from ._wire import JsonbLoader, Undecodable
from .dsn import resolve_dsn, tcp_defaults
from .errors import InvalidArgument, PgqError, SchemaError, UnknownWorker, WorkerGone, translate
from .job import _CLAIM_FIELDS, Job, JobCancelled, Snooze
from .steps import StepRunner

log = logging.getLogger("pgq.worker")
# A line per settled job (its fields also as record attributes): successes and snoozes at
# INFO, failures at WARNING. A logger of its own, so that `pgq worker` can keep a busy
# worker's successes out of its log (--log-jobs) and still show its failures.
job_log = logging.getLogger("pgq.worker.jobs")

# A lost connection, and the read-only window of a failover: both pass.
_TRANSIENT = (psycopg.OperationalError, PoolTimeout, psycopg.errors.ReadOnlySqlTransaction)
# SIGTERM to exit takes at most the grace period and then this long, whatever the database
# does (down, blocked on a lock, behind a paused pooler): the last completions get what is
# left of the grace period or at least _FINAL_FLUSH, the unregistration _UNREGISTER, and
# every wait on the database is abandoned at its deadline (pgq._deadline).
_SHUTDOWN_MARGIN = 2.0
_FINAL_FLUSH = 0.75
_UNREGISTER = 1.0
# Signals this close to the first are the same request to stop (a supervisor that signals
# the process and its group); a later one exits at once.
_SIGNAL_WINDOW = 1.0
# After SIGTERM, how long a claim in flight may still take before it is abandoned (the
# unregistration, or the sweep after the lease, gives back whatever it took).
_CLAIM_SETTLE = 0.5
# How often a worker runs pgq.sweep (pruning when pg_cron is absent) beside its heartbeats.
_SWEEP_EVERY = 60.0
# A heartbeat tells the database which jobs the worker runs (which gives back any other it
# holds as ours) after a failed claim, settlement or lost connection, and otherwise every
# two leases, at most a minute apart: the database then walks every running-index entry
# of the worker, and under a held snapshot that is one for every job it claimed since.
_RECONCILE_LEASES = 2
# A reconciling heartbeat that found a claim in flight tries again after this long.
_RECONCILE_RETRY = 0.5
_RECONCILE_MAX = 60.0
# A handler runs in a consumer span when OpenTelemetry is installed (pgq.tracing).
_NO_SPAN = contextlib.nullcontext()
# The longest a claim waits for a pooled connection (the loop then checks for SIGTERM).
_CLAIM_WAIT = 2.0
# Connections of a worker's pool: claims, heartbeats, settlements, sweeps.
_POOL_SIZE = 4
# pgq.fail of one delivery: the worker's failures, and a completion its result cannot make.
_FAIL = (
    "SELECT pgq.fail(worker_id => %s::uuid, job_id => %s::bigint, error => %s::text,"
    " delivery => %s::int) AS status"
)
# A job whose cancellation was requested: canceled, no attempt spent (pgq.fail would spend one).
_CONFIRM_CANCEL = (
    "SELECT pgq.confirm_cancel(worker_id => %s::uuid, job_id => %s::bigint, delivery => %s::int) AS status"
)
# Default concurrency (see Worker.concurrency) and the largest default batch. A claim
# never takes more jobs than the worker has free slots, so a slow handler holds no job it
# does not run; 500 async slots and batches of up to 500 drain no-op jobs as fast as any
# setting measured (`pgq bench`), where 100 reached about three quarters of that.
_ASYNC_CONCURRENCY = 500
_THREAD_CONCURRENCY = 20
_BATCH = 500
_GATHER = 0.002
# Worker.run's choices of event loop.
EVENT_LOOPS = ("auto", "uvloop", "asyncio")
T = TypeVar("T")
# What the worker claims: the columns Job._claimed expects, in its order, by name, so a
# column a later release adds is never read. pgq.claim_v3 is the form whose rows count
# attempts from 1 and carry the delivery's reason; pgq.claim keeps the rows of 0.1.0 and
# 0.2.0 for their workers.
_CLAIM = (
    "SELECT "
    + ", ".join(f"c.{name}" for name in _CLAIM_FIELDS)
    + " FROM pgq.claim_v3(worker_id => %s::uuid, entrypoints => %s::text[], batch_size => %s::int) AS c"
)


def run_on(event_loop: str, main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run main() on a new event loop of the kind named (EVENT_LOOPS: see Worker.run)."""
    if event_loop not in EVENT_LOOPS:
        raise ValueError(f"event_loop must be one of {', '.join(EVENT_LOOPS)}, not {event_loop!r}")
    uvloop = _uvloop(required=event_loop == "uvloop") if event_loop != "asyncio" else None
    if uvloop is not None:
        return uvloop.run(main())  # type: ignore[no-any-return]
    return asyncio.run(main())


def _uvloop(required: bool) -> Any:
    """The uvloop module, or None when it is not installed and not `required`."""
    try:
        import uvloop
    except ImportError:
        if required:
            raise ImportError(
                "event_loop='uvloop' needs uvloop (pip install uvloop; it does not run on Windows)"
            ) from None
        return None
    return uvloop


def _reason(exc: BaseException) -> str:
    """Why a call failed, in one line, never empty (a timeout's own text is)."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _array(numbers: list[int]) -> str:
    """A PostgreSQL array literal of integers: for batches of ids, several times cheaper
    than letting psycopg adapt a list element by element (the server casts it)."""
    return "{" + ",".join(map(str, numbers)) + "}"


async def _configure(conn: psycopg.AsyncConnection[Any]) -> None:
    conn.adapters.register_loader("jsonb", JsonbLoader)


# What the LISTEN session needs whatever the role's or database's defaults say: it sits
# idle for as long as no job is enqueued, so idle_session_timeout would close it (and the
# NOTIFYs sent until it is back are lost); it runs no transaction, but a setting that ends
# idle transactions must not end it either. Settings the server does not know are skipped.
_LISTEN_SETTINGS = (
    "SELECT pg_catalog.set_config(n.name, '0', false) FROM unnest(%s::text[]) AS n (name)"
    " WHERE n.name IN (SELECT s.name FROM pg_catalog.pg_settings AS s)"
)
_LISTEN_ZERO = ["idle_session_timeout", "idle_in_transaction_session_timeout", "transaction_timeout"]


class _Fenced(Exception):
    """pgq.complete did not complete the job: another delivery owns it now."""


class _Stopping(Exception):
    """The worker was asked to stop while it waited for the database."""


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
        concurrency: int | None = None,
        batch_size: int | None = None,
        poll_interval: float = 1.0,
        grace_period: float = 30.0,
        name: str | None = None,
        listen_dsn: str | None = None,
        summary_interval: float | None = 10.0,
    ) -> None:
        if concurrency is not None and concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if summary_interval is not None and summary_interval < 0:
            raise ValueError("summary_interval must be 0 or more seconds (0 or None: no summaries)")
        self.dsn = dsn
        self.listen_dsn = listen_dsn
        self._concurrency = concurrency
        self.batch_size = batch_size
        self.poll_interval = poll_interval
        self.grace_period = grace_period
        # Seconds between the INFO lines that sum up what the worker did (0 or None: none).
        self.summary_interval = summary_interval
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.worker_id: UUID | None = None
        self.completed = 0
        self.failed = 0
        self._handlers: dict[str, Handler] = {}
        self._running: dict[Key, Run] = {}  # handlers holding a slot
        self._unsettled: dict[Key, Job] = {}  # claimed, not yet completed/failed in the database
        self._done: list[tuple[Job, Any, float]] = []  # finished: (job, result, seconds) to complete
        # Called with (job, outcome, seconds) for every settled job: metrics exporters.
        self.observers: list[Callable[[Job, str, float], None]] = []
        self._signaled_at: float | None = None  # when the first SIGTERM/SIGINT came

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
            self._handlers[name] = Handler(fn, is_async, transactional)
            return fn

        return decorator

    @property
    def concurrency(self) -> int:
        """Handlers running at once: as given, else 500 when every handler is `async def`
        (a waiting coroutine costs little) and 20 when some run in threads."""
        if self._concurrency is not None:
            return self._concurrency
        if self._handlers and all(h.is_async for h in self._handlers.values()):
            return _ASYNC_CONCURRENCY
        return _THREAD_CONCURRENCY

    @concurrency.setter
    def concurrency(self, value: int) -> None:
        if value < 1:
            raise ValueError("concurrency must be at least 1")
        self._concurrency = value

    @property
    def entrypoints(self) -> list[str]:
        return sorted(self._handlers)

    @property
    def busy(self) -> int:
        """Handlers holding a slot now (a sync one past its timeout included)."""
        return len(self._running)

    # --- running ------------------------------------------------------------------------

    def run(self, event_loop: str = "auto") -> None:
        """Run until SIGTERM/SIGINT: then stop claiming, let running handlers finish for up
        to grace_period seconds, release what is unfinished, unregister and return.

        event_loop: "uvloop" (libuv's event loop: tasks, timers and socket waits cost less,
        about a sixth of a fast job's CPU in the worker), "asyncio" (the standard library's)
        or "auto": uvloop when it is installed (a dependency of pgq, except on Windows)."""
        run_on(event_loop, self.run_async)

    def stop(self) -> None:
        """Ask a running worker to shut down gracefully (thread-safe via the loop)."""
        loop = getattr(self, "_loop", None)
        if loop is not None:
            loop.call_soon_threadsafe(self._begin_stop)

    async def run_async(self) -> None:
        if not self._handlers:
            raise ValueError("no handlers: register one with @worker.entrypoint(name)")
        dsn = resolve_dsn(self.dsn)
        async with self._session(dsn):
            self._install_signal_handlers()
            try:
                await self._register()
                background = [
                    asyncio.create_task(self._supervised("listen", lambda: self._listen_loop(dsn))),
                    asyncio.create_task(self._supervised("heartbeat", self._heartbeat_loop)),
                    asyncio.create_task(self._supervised("complete", self._complete_loop)),
                    asyncio.create_task(self._supervised("summary", self._summary_loop)),
                ]
                await self._claim_until_stopped()
                await self._shutdown(background)
            except _Stopping:
                log.info("worker %s stopped before it could register", self.name)
            finally:
                self._remove_signal_handlers()
        log.info("worker %s stopped: %d completed, %d failed", self.name, self.completed, self.failed)

    @contextlib.asynccontextmanager
    async def _session(self, dsn: str) -> AsyncIterator[None]:
        """The state and the connections of one run: run_async, and pgq.testing.drain,
        which runs handlers through this same code."""
        self._loop = asyncio.get_running_loop()
        # Job.step's calls of the step functions (pgq.steps), on this worker's pool.
        self._step_runner = StepRunner(self._sql, self._loop)
        self._stopping = asyncio.Event()
        self._wake = asyncio.Event()
        self._flush = asyncio.Event()
        self._beat_now = asyncio.Event()
        self._abandon = False  # past the final flush: stop retrying
        self._completing = asyncio.Lock()
        self._claiming = asyncio.Lock()  # a claim in flight: no heartbeat may reconcile
        # Set while a heartbeat reconciles: no claim may start until it is done (or abandoned).
        self._reconciling: asyncio.Event | None = None
        self._stop_at: float | None = None  # when SIGTERM (or stop()) came: shutdown's budget
        # Finished jobs whose completion the database has not confirmed yet.
        self._unflushed: dict[Key, Job] = {}
        self._lease_conn = worker_lease.LeaseConnection(dsn)  # the heartbeat's own
        # The database may hold jobs of ours that we no longer track (a claim's reply lost,
        # a settlement given up): the next heartbeat reconciles.
        self._reconcile = False
        self._registering = asyncio.Lock()
        self._batch = self.batch_size or min(self.concurrency, _BATCH)
        # With jobs running, fewer free slots than this wait _GATHER before a claim.
        self._refill = max(1, min(self._batch, self.concurrency) // 4)
        self._spans = False  # whether handlers run in OpenTelemetry spans (pgq.tracing)
        self._lease = 30.0
        self._poll = self.poll_interval
        # Whether an entrypoint has a concurrency limit (its own or per key): a job that
        # ends may free a slot there. Until the settings are read, assume so.
        self._limited = True
        # Whether NOTIFYs reach us (the LISTEN connection is up and was seen to work).
        self._listening = False
        # The last claim took fewer jobs than it asked for: nothing else was due (or free of
        # other claims' locks). Until a NOTIFY or the poll, a claim when one of our jobs ends
        # or settles would find nothing either (at a trickle, two empty claims per job).
        self._drained = False
        # No server-side prepared statements: they break behind PgBouncer in transaction
        # mode, and every statement here is a call of a function whose plans are cached.
        # UTF-8 whatever the role, database or PGCLIENTENCODING say: jsonb arrives in the
        # client encoding, and Python's JSON decoding (psycopg's, and _wire's) reads UTF-8.
        conn_kwargs = {
            "autocommit": True,
            "prepare_threshold": None,
            "client_encoding": "utf8",
            **tcp_defaults(dsn),
        }
        # pgq.pools: after an outage the pool connects again within half a second of the
        # server accepting, logs the server's reason once per change, and lends no connection
        # that died while idle (a restart would otherwise fail a claim, a heartbeat or a
        # completion per pooled connection).
        self._link = pools.Link(f"worker {self.name}", log)
        self._pool = pools.AsyncPool(
            dsn,
            link=self._link,
            min_size=2,
            max_size=_POOL_SIZE,
            open=False,
            kwargs=conn_kwargs,
            configure=_configure,
        )
        # Failures and snoozes may take two of the connections, completions (one batch at a
        # time) a third: a settlement can wait for a row lock for as long as another
        # transaction holds the job (an application's pgq.cancel left open), and the claims
        # must still get through (the heartbeat has a connection of its own: worker_lease);
        # nor may failures stuck so hold up the completions.
        self._settling = asyncio.Semaphore(_POOL_SIZE - 2)
        self._executor = ThreadPoolExecutor(self.concurrency, thread_name_prefix="pgq-handler")
        self._sync_pool: pools.Pool | None = None
        if any(h.transactional for h in self._handlers.values()):
            # Checked when lent (pgq.pools): after a restart or a terminated backend, a
            # handler must not get a dead connection (its job would be charged a failed attempt).
            self._sync_pool = pools.Pool(
                dsn,
                link=pools.Link(f"worker {self.name} (transactional handlers)", log),
                min_size=1,
                max_size=self.concurrency,
                kwargs={"prepare_threshold": None, **tcp_defaults(dsn, user_timeout=False)},
                open=True,
            )
        try:
            await self._pool.open(wait=False)
            yield
        finally:
            await self._lease_conn.close()
            await self._pool.close(timeout=1.0)
            if self._sync_pool is not None:
                self._sync_pool.close(timeout=1.0)
            self._executor.shutdown(wait=False, cancel_futures=True)

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
        now = time.monotonic()
        if self._signaled_at is not None:
            # `timeout -s TERM` and other supervisors signal the process and then its group:
            # signals that close together are one request to stop, not an insistent one.
            if now - self._signaled_at < _SIGNAL_WINDOW:
                log.debug("%s again %.3f s after the first: one request", sig.name, now - self._signaled_at)
                return
            log.warning("second %s: exiting now; unfinished jobs return after their lease", sig.name)
            # os._exit skips logging's shutdown: write the warning first (bounded).
            for handler in logging.getLogger().handlers:
                with contextlib.suppress(Exception):
                    handler.flush()
            os._exit(1)
        self._signaled_at = now
        log.info("%s: stopping; running jobs have %.0f s to finish", sig.name, self.grace_period)
        self._begin_stop()

    def _begin_stop(self) -> None:
        if self._stop_at is None:
            self._stop_at = time.monotonic()
        self._stopping.set()
        self._wake.set()

    async def _supervised(self, name: str, loop: Callable[[], Awaitable[None]]) -> None:
        """Run a background loop for the worker's whole life: a crash is logged and the loop
        restarted, so no task dies silently (heartbeats going on while completions stop)."""
        while True:
            try:
                await loop()
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("the %s task failed; restarting it in 1 s", name)
                await asyncio.sleep(1.0)

    # --- database -----------------------------------------------------------------------

    async def _sql(
        self,
        query: str,
        params: tuple[Any, ...] = (),
        *,
        wait: float | None = None,
        tuples: bool = False,
    ) -> list[Any]:
        """One statement on a pooled connection; `wait` bounds the wait for a connection.
        Rows are dicts, or plain tuples in binary format (cheaper: claims) when `tuples`.
        When the caller is cancelled (shutdown), the statement is abandoned at once
        (pgq._deadline), not waited for as psycopg would (up to 10 s more)."""

        async def work(call: Call) -> list[Any]:
            async with self._pool.connection(timeout=wait) as conn:
                call.conn = conn
                try:
                    cur = conn.cursor(binary=True) if tuples else conn.cursor(row_factory=dict_row)
                    await cur.execute(query, params)
                    return await cur.fetchall() if cur.description else []
                finally:
                    call.conn = None

        try:
            return await bounded(work, None, query.split("(", 1)[0])
        except psycopg.Error as exc:
            if isinstance(exc, _TRANSIENT):
                self._reconcile = True  # a failover may have lost what we committed
            err = translate(exc)
            if err is exc:
                raise
            raise err from exc

    async def _persist(
        self, what: str, query: str, params: tuple[Any, ...] = (), *, startup: bool = False
    ) -> list[dict[str, Any]]:
        """Run a statement until it succeeds: through a lost connection, a failover's
        read-only window or any other error but a data error (its arguments), backing off and
        saying so. Gives up (raises _Stopping) on SIGTERM while registering (startup), or
        after the final flush; while registering, an error other than a lost connection is
        raised at once."""
        delay = 0.1
        while True:
            try:
                # While registering, a database that is away must not hide SIGTERM for long.
                return await self._sql(query, params, wait=_CLAIM_WAIT if startup else None)
            except (InvalidArgument, UnknownWorker, WorkerGone, psycopg.DataError):
                raise  # the same statement would fail the same way: retrying would jam
            except (PgqError, psycopg.Error, PoolTimeout) as exc:
                transient = isinstance(exc, _TRANSIENT)
                if startup and not transient:  # not a passing fault: say so at once
                    if isinstance(exc, (psycopg.errors.UndefinedFunction, psycopg.errors.InvalidSchemaName)):
                        raise SchemaError("pgq is not installed in this database; run `pgq install`") from exc
                    raise
                log.log(
                    logging.WARNING if transient else logging.ERROR,
                    "%s failed (%s); retrying in %.1f s",
                    what,
                    str(exc).strip(),
                    delay,
                )
            if self._abandon or (startup and self._stopping.is_set()):
                raise _Stopping()
            if startup:
                await self._sleep(delay)  # SIGTERM ends the wait at once
            else:
                await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    async def _register(self) -> None:
        rows = await self._persist(
            "register",
            "SELECT pgq.register_worker(name => %s::text, entrypoints => %s::text[]) AS id",
            (self.name, self.entrypoints),
            startup=True,
        )
        self.worker_id = rows[0]["id"]
        await self._refresh_settings(startup=True)
        log.info("worker %s registered as %s for %s", self.name, self.worker_id, ", ".join(self.entrypoints))

    _SETTINGS = (
        "SELECT extract(epoch FROM min(lease))::float8 AS lease, max(rate)::float8 AS rate,"
        " bool_or(concurrency IS NOT NULL OR key_concurrency IS NOT NULL) AS limited"
        " FROM pgq.settings(entrypoints => %s::text[], protocol => 2)"
    )

    async def _refresh_settings(self, startup: bool = False) -> None:
        """Read the settings the worker paces itself by. While registering (startup) through
        a lost connection too: a worker that just registered again must not die of it."""
        if startup:
            rows = await self._persist("read settings", self._SETTINGS, (self.entrypoints,), startup=True)
        else:
            rows = await self._sql(self._SETTINGS, (self.entrypoints,))
        self._apply_settings(rows)

    def _apply_settings(self, rows: list[dict[str, Any]]) -> None:
        self._lease = rows[0]["lease"]
        self._limited = bool(rows[0]["limited"])
        # A rate-limited entrypoint earns a token every 1/rate seconds and no NOTIFY says so:
        # poll about that often (each claim then takes what the bucket holds).
        rate = rows[0]["rate"]
        self._poll = min(self.poll_interval, max(1 / rate, 0.01)) if rate else self.poll_interval

    async def _reregister(self, reason: Exception, old: UUID | None) -> None:
        """Our worker row `old` is gone (reaped after a long outage): the jobs we hold were or
        will be re-delivered elsewhere, so stop them and start over under a new id. The claim
        and heartbeat loops may both find out: the lock and the id check make it happen once.
        The old runs keep their slots until their handlers really stop."""
        async with self._registering:
            if self.worker_id != old:
                return  # the other loop registered already
            log.warning("worker %s: %s; registering again", old, reason)
            for run in list(self._running.values()):
                if run.job.worker_id == old:
                    run.job._cancel.set()
                    if run.handler.is_async and run.task is not None:
                        run.task.cancel()
            await self._register()

    # --- claiming -----------------------------------------------------------------------

    async def _claim_until_stopped(self) -> None:
        """Run the claim loop until SIGTERM. A claim still in flight then (the database
        blocked or away) gets _CLAIM_SETTLE to end and is then abandoned: it cannot hold
        the shutdown up, and whatever it took goes back with the unregistration (or after
        the lease)."""
        claimer = asyncio.create_task(self._claim_loop())
        stopping = asyncio.create_task(self._stopping.wait())
        try:
            await asyncio.wait({claimer, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not claimer.done():
                done, _ = await asyncio.wait({claimer}, timeout=_CLAIM_SETTLE)
                if not done:
                    log.warning("stopping: a claim in flight was abandoned; jobs it took will run again")
                    claimer.cancel()
                    await asyncio.wait({claimer})  # at once: its statement is abandoned
        finally:
            stopping.cancel()
            if not claimer.done():  # run_async itself was cancelled
                claimer.cancel()
        if not claimer.cancelled() and not isinstance(claimer.exception(), (_Stopping, type(None))):
            raise claimer.exception()  # type: ignore[misc]

    async def _claim_loop(self) -> None:
        delay = 0.1
        while not self._stopping.is_set():
            free = self.concurrency - len(self._running)
            if free <= 0:
                self._drained = False  # full (concurrency may have been lowered): a freed slot wakes us
                self._wake.clear()
                await self._wake.wait()
                continue
            if free < self._refill and self._running:
                # Fast handlers give their slots back one by one: a claim per freed slot
                # would cost a round trip per job. Gather a few (slow ones lose 2 ms).
                await asyncio.sleep(_GATHER)
                if self._stopping.is_set():
                    break
                free = self.concurrency - len(self._running)
            wanted = min(free, self._batch)
            self._wake.clear()
            worker_id = self.worker_id  # re-registration, if the claim says so, replaces this id
            try:
                runs = await self._claim(wanted)
            except _TRANSIENT as exc:
                # The claim may have committed before the connection broke: the next
                # heartbeat tells the database what we run, which gives those jobs back.
                self._beat_now.set()
                log.log(
                    logging.DEBUG if self._refused(exc) else logging.WARNING,
                    "claim failed (%s); retrying in %.1f s",
                    str(exc).strip(),
                    delay,
                )
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
            except Exception:
                # Anything else (reading a row, starting a job) must not end the worker:
                # the heartbeat gives back what the claim may have taken.
                log.exception("claim failed; retrying in %.1f s", delay)
                await self._sleep(delay)
                delay = min(delay * 2, 30.0)
                continue
            delay = 0.1
            self._drained = len(runs) < wanted
            if len(runs) < wanted:
                # Drained (or at a limit): sleep until a NOTIFY (or, under a concurrency
                # limit, a settled job) wakes us, or poll (a lost NOTIFY, a run_at reached).
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._poll)

    async def _claim(self, wanted: int) -> list[Run]:
        """Claim up to `wanted` jobs and start their handlers; returns their runs."""
        worker_id = self.worker_id  # the claim's jobs belong to this id, whatever happens next
        async with self._claiming:
            # A heartbeat telling the database what we run must be done first: it would
            # release a job this claim takes. It has a deadline: this wait is short.
            while self._reconciling is not None:
                await self._reconciling.wait()
            try:
                # While the database is away, waiting for a connection must not keep SIGTERM
                # from being noticed for long.
                rows = await self._sql(
                    _CLAIM, (worker_id, self.entrypoints, wanted), wait=_CLAIM_WAIT, tuples=True
                )
                self._spans = tracing.enabled()  # checked per batch: it reads the environment
                return [self._start(Job._claimed(row, worker_id)) for row in rows]
            except BaseException:
                self._reconcile = True  # the claim may have committed: we lost its reply
                raise

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    def _start(self, job: Job) -> Run:
        run = Run(job, self._handlers[job.entrypoint])
        job.__dict__["_steps"] = self._step_runner
        if job.deliveries > 1:
            log_redelivery(log, job)
        self._unsettled[run.key] = job
        self._running[run.key] = run
        run.task = self._loop.create_task(self._execute(run))
        return run

    # --- running handlers ---------------------------------------------------------------

    async def _execute(self, run: Run) -> None:
        job = run.job
        run.t0 = started = time.monotonic()
        try:
            if type(job.payload) is Undecodable or type(job.headers) is Undecodable:
                what = "payload" if type(job.payload) is Undecodable else "headers"
                error = getattr(job, what).error
                raise NotJson(f"the job's {what} is JSON that Python cannot decode: {error}")
            with tracing.job_span(job) if self._spans else _NO_SPAN:
                result = await call_handler(run, self._executor, self._in_thread)
            if run.handler.transactional:
                self._settled(run)  # completed in the handler's transaction
                self.completed += 1
                self._outcome(job, "succeeded", time.monotonic() - started)
            elif job.cancelled and self.worker_id == job.worker_id:
                await self._fail(run, "canceled: the handler returned after cancellation was requested")
            else:
                self._done.append((job, check_result(result), time.monotonic() - started))
                self._unflushed[run.key] = job
                self._flush.set()
        except Timeout:
            job._cancel.set()
            await self._fail(run, f"timeout: ran longer than {job.timeout}")
            if run.thread is not None:
                log.warning("job %d (%s): the handler goes on past its timeout", job.id, job.entrypoint)
                with contextlib.suppress(BaseException):
                    await asyncio.shield(run.thread)  # its slot stays taken until it stops
        except asyncio.CancelledError:
            if self._stopping.is_set() and not job.cancelled:
                return  # shutdown past the grace period: unregister releases the job
            await self._fail(run, "canceled")
        except _Fenced:
            self._settled(run)
            log.warning(
                "job %d (%s): delivery %d no longer held by this worker; its writes were rolled back",
                job.id,
                job.entrypoint,
                job.deliveries,
            )
        except NotJson as exc:
            await self._fail(run, str(exc))
        except Snooze as exc:
            await self._snooze(run, exc.seconds)
        except Exception:  # JobCancelled included: pgq.fail cancels a job whose cancel was requested
            await self._fail(run, traceback.format_exc())
        finally:
            self._running.pop(run.key, None)
            self._slot_freed()

    def _slot_freed(self) -> None:
        """Wake the claim loop: one of our jobs ended or settled. Not after a claim that
        found nothing more, when NOTIFYs reach us and no entrypoint has a concurrency limit:
        then only a NOTIFY (a job enqueued, released, retried or re-queued at once) or the
        poll (a run_at reached) can make a claim find something. Under a limit, the end of a
        job may free a slot; without LISTEN, our own settlements' NOTIFYs (dependents
        released, a failure retried at once) are not heard."""
        if not self._drained or not self._listening or self._limited:
            self._wake.set()

    def _in_thread(self, run: Run) -> Any:
        # A delivery given up before its handler began (the worker was reaped and registered
        # again, or the job was canceled) is not started at all: another delivery may run.
        job = run.job
        if job.cancelled:
            raise JobCancelled()
        if not run.handler.transactional:
            return run.handler.fn(job)
        assert self._sync_pool is not None
        with self._sync_pool.connection() as conn, conn.transaction():
            if job.cancelled:  # it waited for a connection (a restart) meanwhile
                raise JobCancelled()
            job.__dict__["_conn"] = conn  # Job.step records in this transaction
            result = check_result(run.handler.fn(job, conn))
            done = conn.execute(
                "SELECT pgq.complete(worker_id => %s::uuid, job_ids => %s::bigint[],"
                " results => %s::jsonb[], deliveries => %s::int[])",
                (job.worker_id, [job.id], [None if result is None else Jsonb(result)], [job.deliveries]),
            ).fetchall()
            if not done:
                raise _Fenced()
        return result

    def _settled(self, run: Run, recorded: bool = True) -> None:
        """Stop tracking a job; not `recorded` in the database: the next heartbeat gives it
        back if the database still has it as ours."""
        self._unsettled.pop(run.key, None)
        if not recorded:
            self._reconcile = True

    async def _fail(self, run: Run, error: str) -> None:
        job = run.job
        run.error = error = printable(error)
        self.failed += 1
        recorded = False
        try:
            async with self._settling:
                if run.cancel_requested:
                    rows = await self._persist(
                        f"cancel job {job.id}", _CONFIRM_CANCEL, (job.worker_id, job.id, job.deliveries)
                    )
                else:
                    rows = await self._persist(
                        f"fail job {job.id}", _FAIL, (job.worker_id, job.id, error, job.deliveries)
                    )
            recorded = True
        except (PgqError, _Stopping, psycopg.DataError) as exc:
            log.error("job %d (%s): could not record the failure: %s", job.id, job.entrypoint, exc)
            return
        finally:
            self._settled(run, recorded)
            self._slot_freed()
        status = rows[0]["status"]
        outcome = {"queued": "failed (retried later)", "dead": "failed (dead)", "canceled": "canceled"}.get(
            status, "failed (no longer held by this delivery)"
        )
        # The exception and where the handler's own code raised it; the error is stored whole.
        self._outcome(
            job, outcome, time.monotonic() - run.t0, logging.WARNING, f": {tracebacks.summary(error)}"
        )

    async def _snooze(self, run: Run, seconds: float) -> None:
        job = run.job
        recorded = False
        try:
            async with self._settling:
                rows = await self._persist(
                    f"snooze job {job.id}",
                    "SELECT pgq.snooze(worker_id => %s::uuid, job_id => %s::bigint,"
                    " delay => make_interval(secs => %s::float8), delivery => %s::int) AS status",
                    (job.worker_id, job.id, seconds, job.deliveries),
                )
            recorded = True
        except (PgqError, _Stopping, psycopg.DataError) as exc:
            log.error("job %d (%s): could not snooze: %s", job.id, job.entrypoint, exc)
            return
        finally:
            self._settled(run, recorded)
            self._slot_freed()
        status = rows[0]["status"] or "not held by this delivery any more"
        self._outcome(job, "snoozed", time.monotonic() - run.t0, detail=f" for {seconds:.1f} s -> {status}")

    # --- completing ---------------------------------------------------------------------

    async def _complete_loop(self) -> None:
        while True:
            await self._flush.wait()
            self._flush.clear()
            await self._complete_pending()

    async def _complete_pending(self) -> None:
        # One flush at a time: shutdown's final flush must wait for a batch in flight.
        async with self._completing:
            while self._done:
                batch, self._done = self._done[:10000], self._done[10000:]
                by_worker: dict[UUID, list[tuple[Job, Any, float]]] = {}
                for entry in batch:
                    by_worker.setdefault(entry[0].worker_id, []).append(entry)
                for worker_id, entries in by_worker.items():
                    await self._complete(worker_id, entries)
                self._slot_freed()

    async def _complete(self, worker_id: UUID, entries: list[tuple[Job, Any, float]]) -> None:
        ids = [job.id for job, _, _ in entries]
        results = None
        if any(result is not None for _, result, _ in entries):
            results = [None if result is None else Jsonb(result) for _, result, _ in entries]
        recorded = given_up = False
        try:
            rows = await self._persist(
                "complete",
                # One row holding an array, not a row per job: cheaper to read.
                "SELECT coalesce(array_agg(c.id), '{}') AS ids FROM pgq.complete(worker_id => %s::uuid,"
                " job_ids => %s::bigint[], results => %s::jsonb[], deliveries => %s::int[]) AS c (id)",
                (worker_id, _array(ids), results, _array([job.deliveries for job, _, _ in entries])),
            )
            recorded = True
        except _Stopping:
            given_up = True  # shutdown reports them
            return
        except psycopg.DataError as exc:
            if len(entries) == 1:
                # Completed, it would run again and again: failed, it is retried and ends dead.
                job = entries[0][0]
                log.error("job %d (%s) finished but could not be completed: %s", job.id, job.entrypoint, exc)
                with contextlib.suppress(PgqError, _Stopping, psycopg.Error):
                    async with self._settling:
                        await self._persist(
                            f"fail job {job.id}",
                            _FAIL,
                            (
                                worker_id,
                                job.id,
                                printable(f"its result could not be stored: {exc}"),
                                job.deliveries,
                            ),
                        )
                return
            # One job's data (check_result should have refused it): the others complete.
            for entry in entries:
                await self._complete(worker_id, [entry])
            return
        except asyncio.CancelledError:
            given_up = True  # shutdown: past its deadline
            raise
        finally:
            for job, _, _ in entries:
                self._unsettled.pop((job.id, job.deliveries), None)
                if recorded or not given_up:
                    self._unflushed.pop((job.id, job.deliveries), None)
            if not recorded:
                self._reconcile = True
        completed: list[int] = rows[0]["ids"]
        self.completed += len(completed)
        if self.observers or job_log.isEnabledFor(logging.INFO):
            done = set(completed)
            for job, _, seconds in entries:
                if job.id in done:
                    self._outcome(job, "succeeded", seconds)
        if len(completed) < len(ids):
            lost = sorted(set(ids) - set(completed))
            log.warning("jobs %s were no longer held by this delivery (re-delivered); not completed", lost)

    async def _summary_loop(self) -> None:
        """Every summary_interval seconds in which jobs settled or ran: one INFO line of
        what the worker did (figures also as record attributes). A busy worker's log says
        how it is doing without a line per job (see job_log)."""
        interval = self.summary_interval
        if not interval or interval <= 0:
            return
        completed, failed, since = self.completed, self.failed, time.monotonic()
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            done, bad, running = self.completed - completed, self.failed - failed, len(self._running)
            seconds = max(now - since, 1e-3)
            if done or bad or running:
                fields = {"succeeded": done, "failed": bad, "running": running, "seconds": round(seconds, 3)}
                log.info(
                    "%d succeeded, %d failed in the last %.1f s (%.0f jobs/s); %d running",
                    *(done, bad, seconds, (done + bad) / seconds, running),
                    extra=fields,
                )
            completed, failed, since = self.completed, self.failed, now

    # --- heartbeat and wake-ups ---------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        """Extend the leases: on the heartbeat's own connection, each beat within a deadline
        well under the lease, waiting behind no claim and no settlement (worker_lease)."""
        swept = time.monotonic()
        self._reconciled = time.monotonic()
        failures = 0
        sweeping: asyncio.Task[None] | None = None
        try:
            while True:
                if failures:  # a fresh connection, at once: the lease is running out
                    wait = worker_lease.retry_in(self._lease, failures)
                else:
                    wait = worker_lease.interval(self._lease)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._beat_now.wait(), wait)
                self._beat_now.clear()
                worker_id = self.worker_id
                failures += 1
                try:
                    rows = await self._beat(worker_id)
                except _TRANSIENT as exc:
                    self._reconcile = True  # a failover may have lost what we committed
                    # Once per outage: the pool logs the server's reason as it changes, and
                    # a beat is retried every few seconds until the database answers.
                    level = logging.WARNING if failures == 1 else logging.DEBUG
                    log.log(level, "heartbeat failed (%s); retrying on a fresh connection", str(exc).strip())
                    continue
                except (WorkerGone, UnknownWorker) as exc:
                    failures = 0
                    if not self._stopping.is_set():
                        with contextlib.suppress(_Stopping):
                            await self._reregister(exc, worker_id)
                    continue
                except (PgqError, psycopg.Error) as exc:
                    failures = 0  # not the connection: the next beat at its time
                    log.error("heartbeat failed: %s", exc)
                    continue
                failures = 0
                self._cancel({row["id"] for row in rows})
                if time.monotonic() - swept > _SWEEP_EVERY and (sweeping is None or sweeping.done()):
                    swept = time.monotonic()
                    # Beside the beats, not in their way: a sweep may take its time.
                    sweeping = asyncio.create_task(self._sweep())
        finally:
            if sweeping is not None:
                sweeping.cancel()

    async def _beat(self, worker_id: UUID | None) -> list[dict[str, Any]]:
        """One heartbeat, then the settings, within the heartbeat's deadline. It tells the
        database which jobs we run (releasing any other it has as ours) after a failure and
        every two leases, but only while no claim is in flight: the database would release
        a job we are about to learn of. It never waits for a claim: with one in flight it
        sends no list, which releases nothing."""
        query = "SELECT pgq.heartbeat(worker_id => %s::uuid, running => %s::bigint[]) AS id"
        settings = (self._SETTINGS, (self.entrypoints,))
        seconds = worker_lease.deadline(self._lease)
        every = min(self._lease * _RECONCILE_LEASES, _RECONCILE_MAX)
        due = self._reconcile or time.monotonic() - self._reconciled >= every
        if not due or self._claiming.locked() or self._reconciling is not None:
            rows, current = await self._lease_conn.execute(
                [(query, (worker_id, None)), settings], seconds, "heartbeat"
            )
            self._apply_settings(current)
            if due:
                # A claim was in flight: try again soon, not a whole interval later (jobs
                # the database holds as ours would stay held that much longer).
                self._loop.call_later(_RECONCILE_RETRY, self._beat_now.set)
            return rows
        # No await between the check above and this: a claim starting now waits for us.
        self._reconciling = reconciling = asyncio.Event()
        self._reconcile = False  # a failure from now on needs another round
        running = sorted({job.id for job in self._unsettled.values() if job.worker_id == worker_id})
        try:
            rows, current = await self._lease_conn.execute(
                [(query, (worker_id, running)), settings], seconds, "heartbeat"
            )
        except BaseException:
            self._reconcile = True
            raise
        finally:
            self._reconciling = None
            reconciling.set()
        self._reconciled = time.monotonic()
        log.debug("heartbeat: told the database the %d jobs we run", len(running))
        self._apply_settings(current)
        return rows

    def _cancel(self, ids: set[int]) -> None:
        for run in self._running.values():
            if run.job.id in ids and run.job.worker_id == self.worker_id:
                run.cancel_requested = True
            if run.job.id in ids and run.job.worker_id == self.worker_id and not run.job.cancelled:
                log.info("job %d (%s): cancellation requested", run.job.id, run.job.entrypoint)
                run.job._cancel.set()
                if run.handler.is_async and run.task is not None:
                    run.task.cancel()

    async def _sweep(self) -> None:
        """Maintenance when pg_cron is absent (pruning), in its own transaction: it can
        neither slow nor fail a heartbeat."""
        try:
            await self._sql("SELECT pgq.sweep()")
        except (PgqError, psycopg.Error, PoolTimeout) as exc:
            log.warning("sweep failed: %s", exc)

    async def _listen_loop(self, dsn: str) -> None:
        try:
            await self._listen(self.listen_dsn or dsn)
        finally:
            self._listening = False  # stopped, failed or fell back to polling

    async def _listen(self, listen_dsn: str) -> None:
        delay = 0.1
        # Connects again as quickly as the pool, saying why it cannot once per change.
        connection = pools.async_connection_class(pools.Link(f"worker {self.name} (LISTEN)", log))
        settings_told = False
        while True:
            try:
                connect = connection.connect(listen_dsn, autocommit=True, **tcp_defaults(listen_dsn))
                async with await connect as conn:
                    settings_told = await self._configure_listen(conn, settings_told)
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
                    self._listening = True
                    # While we were not listening (starting, reconnecting, the probe) jobs
                    # may have arrived and cancels been requested: claim, and heartbeat
                    # (which returns the jobs to stop).
                    self._wake.set()
                    self._beat_now.set()
                    async for notify in conn.notifies():
                        if notify.payload in self._handlers:
                            self._wake.set()
                        elif notify.payload == f"cancel:{self.worker_id}":
                            self._beat_now.set()  # the heartbeat returns the jobs to stop
            except psycopg.OperationalError as exc:
                self._listening = False
                log.warning("LISTEN connection lost (%s); reconnecting in %.1f s", str(exc).strip(), delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _configure_listen(self, conn: psycopg.AsyncConnection[Any], told: bool) -> bool:
        """Turn off, for the LISTEN session, the timeouts a role or database default may set
        (_LISTEN_ZERO). Where the server does not allow it (a pooler, a managed service's
        restrictions), say so once: the connection is then closed now and again and
        NOTIFYs sent meanwhile are lost (claims still poll). Returns whether it was told."""
        try:
            await conn.execute(_LISTEN_SETTINGS, (_LISTEN_ZERO,))
        except psycopg.OperationalError:
            raise
        except psycopg.Error as exc:
            if not told:
                log.warning(
                    "LISTEN session: could not turn off %s (%s); a timeout set for the role may"
                    " close it while it waits, and notifications are then late by up to %.2f s",
                    ", ".join(_LISTEN_ZERO),
                    str(exc).strip(),
                    self._poll,
                )
            return True
        return told

    def _refused(self, exc: BaseException) -> bool:
        """Whether a call failed for want of a connection while the database refuses them:
        the pool has said why (once per change of reason), so the call's own line would
        only repeat it every few seconds."""
        return isinstance(exc, PoolTimeout) and self._link.reason is not None

    async def _notifications_arrive(self, conn: psycopg.AsyncConnection[Any]) -> bool:
        """Send ourselves a NOTIFY through the pool and wait for it on the LISTEN connection.

        Behind PgBouncer in transaction mode the LISTEN lands on a pooled server connection
        and notifications never come back, which would silently cost the poll interval on
        every job; a direct connection gets the probe within milliseconds.
        """
        token = f"probe:{uuid.uuid4()}"
        await self._persist("notify probe", "SELECT pg_notify('pgq', %s)", (token,))
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

    async def _shutdown(self, background: Collection[asyncio.Task[None]] = ()) -> None:
        """Bounded whatever the database does: from SIGTERM, the grace period for the running
        handlers, then at most _SHUTDOWN_MARGIN for the last completions (what is left of
        the grace period, or at least _FINAL_FLUSH) and the unregistration (_UNREGISTER).
        Every wait on the database is abandoned at its deadline (pgq._deadline). The log
        says which jobs were left and what becomes of them."""
        stop_at = self._stop_at if self._stop_at is not None else time.monotonic()
        grace_end = stop_at + self.grace_period
        end = grace_end + _SHUTDOWN_MARGIN
        tasks = [run.task for run in self._running.values() if run.task is not None]
        if tasks:
            log.info("waiting up to %.0f s for %d running jobs", self.grace_period, len(tasks))
            await asyncio.wait(tasks, timeout=max(grace_end - time.monotonic(), 0))
        leftover = [run for run in self._running.values() if run.task is not None]
        cut_short = sorted(run.job.id for run in leftover)
        for run in leftover:
            run.task.cancel()  # type: ignore[union-attr]
        if leftover:
            await asyncio.wait([run.task for run in leftover if run.task], timeout=0.5)
        # The last completions: through the completer's batch in flight, if any.
        flush = asyncio.create_task(self._complete_pending())
        flush_end = max(grace_end, min(time.monotonic() + _FINAL_FLUSH, end - _UNREGISTER))
        done, _ = await asyncio.wait({flush}, timeout=max(flush_end - time.monotonic(), 0.1))
        if not done:
            self._abandon = True  # settlements retrying give up
            for task in (flush, *background):
                task.cancel()  # their statements are abandoned at once
            await asyncio.wait({flush, *background}, timeout=0.5)
        elif flush.exception() is not None:
            log.error("final completions failed: %s", flush.exception())
        unflushed = sorted(job.id for job in self._unflushed.values())
        if unflushed:
            reason = "the database did not answer in time" if not done else "the database refused them"
            log.error(
                "could not complete %d finished jobs (%s): %s; they will run again",
                len(unflushed),
                reason,
                unflushed,
            )
        self._abandon = True
        for task in background:  # the heartbeat too: it must not reconcile now
            task.cancel()
        if background:
            await asyncio.wait(background, timeout=0.5)
        # What the database may still hold for us: unsettled jobs (cut short, finished but
        # not completed, failures not recorded) and whatever a claim abandoned took.
        left = sorted({job.id for job in self._unsettled.values()} | set(unflushed) | set(cut_short))
        if self.worker_id is None:
            return
        try:
            rows = await self._lease_conn.execute(
                [("SELECT pgq.unregister_worker(worker_id => %s::uuid) AS released", (self.worker_id,))],
                min(max(end - time.monotonic(), 0.25), _UNREGISTER),
                "unregister",
            )
            released = rows[0][0]["released"] if rows and rows[0] else 0
            if released or left:
                log.info("released %d unfinished jobs %s: they will run again", released, left)
        except (PgqError, *_TRANSIENT) as exc:
            log.warning(
                "could not unregister (%s); the sweep will release our jobs after the lease (%.0f s):"
                " jobs %s and any a claim took will run again then",
                _reason(exc),
                self._lease,
                left,
            )

    def _outcome(
        self, job: Job, outcome: str, seconds: float, level: int = logging.INFO, detail: str = ""
    ) -> None:
        """A settled job: told to the observers, and logged to job_log (its fields also as
        record attributes, for `--log-format json`)."""
        for observe in self.observers:
            observe(job, outcome.split(" ", 1)[0], seconds)
        if not job_log.isEnabledFor(level):
            return
        job_log.log(
            level,
            "job %d (%s) %s on attempt %d, delivery %d, in %.3f s%s",
            job.id,
            job.entrypoint,
            outcome,
            job.attempt,
            job.deliveries,
            seconds,
            detail,
            extra={
                "job_id": job.id,
                "entrypoint": job.entrypoint,
                "attempt": job.attempt,
                "deliveries": job.deliveries,
                "reason": job.reason,
                "duration": round(seconds, 6),
                "outcome": outcome.split(" ", 1)[0],
            },
        )
