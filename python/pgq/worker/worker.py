"""The public Worker: settings, entrypoints, run/run_async/stop, signals.

What it is for: what an application sees of the worker; the parts of one run are wired in
pgq.worker.session. What it must never do: send SQL or touch a job.

The worker claims jobs, runs handlers, heartbeats and settles jobs through pgq's SQL.

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
own, with a deadline: pgq.worker.lease) and the listener (a dedicated autocommit
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
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import Any, TypeVar
from uuid import UUID

from ..dsn import resolve_dsn
from ..job import Job
from .executor import Handler
from .protocol import Stopping
from .session import Session
from .settler import Tally

log = logging.getLogger("pgq.worker")

# Default concurrency (see Worker.concurrency) and the largest default batch. A claim
# never takes more jobs than the worker has free slots, so a slow handler holds no job it
# does not run; 500 async slots and batches of up to 500 drain no-op jobs as fast as any
# setting measured (`pgq bench`), where 100 reached about three quarters of that.
_ASYNC_CONCURRENCY = 500
_THREAD_CONCURRENCY = 20
# Signals this close to the first are the same request to stop (a supervisor that signals
# the process and its group); a later one exits at once.
_SIGNAL_WINDOW = 1.0
# Worker.run's choices of event loop.
EVENT_LOOPS = ("auto", "uvloop", "asyncio")
T = TypeVar("T")


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
        self.tally = Tally()  # jobs completed and failed over the worker's life
        self._handlers: dict[str, Handler] = {}
        self._session: Session | None = None  # the run in progress
        self._loop: asyncio.AbstractEventLoop | None = None
        self._signal_handlers: list[signal.Signals] = []
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
    def handlers(self) -> Mapping[str, Handler]:
        """The registered handlers, by entrypoint (read-only: register with entrypoint())."""
        return self._handlers

    @property
    def busy(self) -> int:
        """Handlers holding a slot now (a sync one past its timeout included)."""
        return self._session.running if self._session is not None else 0

    @property
    def completed(self) -> int:
        return self.tally.completed

    @property
    def failed(self) -> int:
        return self.tally.failed

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
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(self._begin_stop)

    async def run_async(self) -> None:
        if not self._handlers:
            raise ValueError("no handlers: register one with @worker.entrypoint(name)")
        dsn = resolve_dsn(self.dsn)
        async with self.session(dsn) as session:
            self._install_signal_handlers()
            try:
                await session.run(self.listen_dsn or dsn, self._summary_loop)
            except Stopping:
                log.info("worker %s stopped before it could register", self.name)
            finally:
                self._remove_signal_handlers()
        log.info("worker %s stopped: %d completed, %d failed", self.name, self.completed, self.failed)

    @contextlib.asynccontextmanager
    async def session(self, dsn: str) -> AsyncIterator[Session]:
        """The parts of one run against `dsn`, wired (pgq.worker.session): run_async runs
        them until the stop; pgq.testing.drain drives them claim by claim."""
        self._loop = asyncio.get_running_loop()
        # Before any await: a stop() from another thread must find the session.
        self._session = session = Session(self, dsn)
        try:
            async with session.opened():
                yield session
        finally:
            self._session = None

    def _install_signal_handlers(self) -> None:
        assert self._loop is not None
        self._signal_handlers = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                self._loop.add_signal_handler(sig, self._on_signal, sig)
                self._signal_handlers.append(sig)
            except (RuntimeError, ValueError):  # not the main thread
                pass

    def _remove_signal_handlers(self) -> None:
        assert self._loop is not None
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
        if self._session is not None:
            self._session.stop()

    async def _summary_loop(self, session: Session) -> None:
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
            done, bad, running = self.completed - completed, self.failed - failed, session.running
            seconds = max(now - since, 1e-3)
            if done or bad or running:
                fields = {"succeeded": done, "failed": bad, "running": running, "seconds": round(seconds, 3)}
                log.info(
                    "%d succeeded, %d failed in the last %.1f s (%.0f jobs/s); %d running",
                    *(done, bad, seconds, (done + bad) / seconds, running),
                    extra=fields,
                )
            completed, failed, since = self.completed, self.failed, now
