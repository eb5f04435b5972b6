"""One run of a worker: its parts wired together, its background tasks, its ordered shutdown.

What it is for: making the parts of one run (protocol, ledger, claimer, executor, settler,
heartbeat, listener) on the running loop, registering (and registering again when the
worker row is gone), running the claimer until the stop with the background tasks
supervised, and the shutdown, bounded whatever the database does: the grace period for
the running handlers, then at most _SHUTDOWN_MARGIN for the last completions and the
unregistration. pgq.testing.drain runs handlers through this same session.
What it must never do: send SQL of its own (the protocol does), or decide a job's fate.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING
from uuid import UUID

from .. import pools
from ..dsn import tcp_defaults
from ..errors import PgqError
from .claimer import Claimer
from .executor import Executor
from .lease import Heartbeat
from .ledger import Ledger
from .listener import Listener
from .protocol import TRANSIENT, Pace, Protocol, Stopping, reason
from .settler import Settler
from .statements import COMPLETE_IN_TRANSACTION
from .wakeups import Wakeups

if TYPE_CHECKING:
    from .worker import Worker

log = logging.getLogger("pgq.worker")

# SIGTERM to exit takes at most the grace period and then this long, whatever the database
# does (down, blocked on a lock, behind a paused pooler): the last completions get what is
# left of the grace period or at least _FINAL_FLUSH, the unregistration _UNREGISTER, and
# every wait on the database is abandoned at its deadline (pgq._deadline).
_SHUTDOWN_MARGIN = 2.0
_FINAL_FLUSH = 0.75
_UNREGISTER = 1.0
# After SIGTERM, how long a claim in flight may still take before it is abandoned (the
# unregistration, or the sweep after the lease, gives back whatever it took).
_CLAIM_SETTLE = 0.5
# The largest default batch (see Worker.concurrency).
_BATCH = 500


class Session:
    """The parts of one run of `worker` against `dsn` (Worker.session makes it)."""

    def __init__(self, worker: Worker, dsn: str) -> None:
        self._worker = worker
        self.wakeups = Wakeups()
        self.ledger = Ledger()
        self.protocol = Protocol(worker.name, dsn, self.ledger, self.wakeups, Pace(worker.poll_interval))
        self._registering = asyncio.Lock()
        self._threads = ThreadPoolExecutor(worker.concurrency, thread_name_prefix="pgq-handler")
        self._sync_pool: pools.Pool | None = None
        handlers = worker.handlers
        if any(h.transactional for h in handlers.values()):
            # Checked when lent (pgq.pools): after a restart or a terminated backend, a
            # handler must not get a dead connection (its job would be charged a failed attempt).
            self._sync_pool = pools.Pool(
                dsn,
                link=pools.Link(f"worker {worker.name} (transactional handlers)", log),
                min_size=1,
                max_size=worker.concurrency,
                kwargs={"prepare_threshold": None, **tcp_defaults(dsn, user_timeout=False)},
                open=True,
            )

        def worker_id() -> UUID | None:
            return worker.worker_id

        self.executor = Executor(self._threads, self._sync_pool, worker_id, COMPLETE_IN_TRANSACTION)
        batch = worker.batch_size or min(worker.concurrency, _BATCH)
        self.claimer = Claimer(
            self.protocol,
            self.ledger,
            self.wakeups,
            self.executor,
            handlers,
            lambda: worker.concurrency,
            batch,
            worker_id,
            self._reregister,
        )
        self.settler = Settler(
            self.protocol,
            self.ledger,
            self.wakeups,
            worker.tally,
            worker.observers,
            self.claimer.slot_freed,
        )
        self.claimer.settler = self.settler
        entrypoints = worker.entrypoints
        self.heartbeat = Heartbeat(
            self.protocol,
            self.ledger,
            self.wakeups,
            worker_id,
            entrypoints,
            self.claimer.cancel,
            self._reregister,
        )
        self.listener = Listener(
            worker.name, self.protocol, self.wakeups, handlers, worker_id, self._listening, self.ledger.unsure
        )

    @contextlib.asynccontextmanager
    async def opened(self) -> AsyncIterator[None]:
        """The connections of the run: open while in the block, closed after."""
        try:
            await self.protocol.open()
            yield
        finally:
            await self._close()

    async def _close(self) -> None:
        await self.protocol.close()
        if self._sync_pool is not None:
            self._sync_pool.close(timeout=1.0)
        self._threads.shutdown(wait=False, cancel_futures=True)

    def _listening(self, up: bool) -> None:
        self.claimer.listening = up

    @property
    def running(self) -> int:
        return len(self.claimer.running)

    def stop(self) -> None:
        """Stop claiming; the shutdown follows (run())."""
        self.wakeups.stop()

    async def supervised(self, name: str, loop: Callable[[], Awaitable[None]]) -> None:
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

    async def register(self) -> None:
        worker = self._worker
        worker.worker_id = await self.protocol.register(worker.name, worker.entrypoints)
        await self.protocol.read_settings(worker.entrypoints, startup=True)
        log.info(
            "worker %s registered as %s for %s", worker.name, worker.worker_id, ", ".join(worker.entrypoints)
        )

    async def _reregister(self, reason: Exception, old: UUID | None) -> None:
        """Our worker row `old` is gone (reaped after a long outage): the jobs we hold were or
        will be re-delivered elsewhere, so stop them and start over under a new id. The claim
        and heartbeat loops may both find out: the lock and the id check make it happen once.
        The old runs keep their slots until their handlers really stop."""
        async with self._registering:
            if self._worker.worker_id != old:
                return  # the other loop registered already
            log.warning("worker %s: %s; registering again", old, reason)
            self.claimer.stop_runs_of(old)
            await self.register()

    async def run(self, listen_dsn: str, summary: Callable[[Session], Awaitable[None]]) -> None:
        """Register, claim until the stop with the background tasks beside, shut down.
        Raises Stopping when the stop came before the worker could register."""
        await self.register()
        background = [
            asyncio.create_task(self.supervised("listen", lambda: self.listener.run(listen_dsn))),
            asyncio.create_task(self.supervised("heartbeat", self.heartbeat.run)),
            asyncio.create_task(self.supervised("complete", self.settler.run)),
            asyncio.create_task(self.supervised("summary", lambda: summary(self))),
        ]
        await self._claim_until_stopped()
        await self.shutdown(background)

    async def _claim_until_stopped(self) -> None:
        """Run the claim loop until SIGTERM. A claim still in flight then (the database
        blocked or away) gets _CLAIM_SETTLE to end and is then abandoned: it cannot hold
        the shutdown up, and whatever it took goes back with the unregistration (or after
        the lease)."""
        claimer = asyncio.create_task(self.claimer.run())
        stopping = asyncio.create_task(self.wakeups.stopping.wait())
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
        if not claimer.cancelled() and not isinstance(claimer.exception(), (Stopping, type(None))):
            raise claimer.exception()  # type: ignore[misc]

    async def shutdown(self, background: Collection[asyncio.Task[None]] = ()) -> None:
        """Bounded whatever the database does: from SIGTERM, the grace period for the running
        handlers, then at most _SHUTDOWN_MARGIN for the last completions (what is left of
        the grace period, or at least _FINAL_FLUSH) and the unregistration (_UNREGISTER).
        Every wait on the database is abandoned at its deadline (pgq._deadline). The log
        says which jobs were left and what becomes of them."""
        wakeups, running = self.wakeups, self.claimer.running
        grace_period = self._worker.grace_period
        stop_at = wakeups.stop_at if wakeups.stop_at is not None else time.monotonic()
        grace_end = stop_at + grace_period
        end = grace_end + _SHUTDOWN_MARGIN
        tasks = [run.task for run in running.values() if run.task is not None]
        if tasks:
            log.info("waiting up to %.0f s for %d running jobs", grace_period, len(tasks))
            await asyncio.wait(tasks, timeout=max(grace_end - time.monotonic(), 0))
        leftover = [run for run in running.values() if run.task is not None]
        cut_short = sorted(run.job.id for run in leftover)
        for run in leftover:
            run.task.cancel()  # type: ignore[union-attr]
        if leftover:
            await asyncio.wait([run.task for run in leftover if run.task], timeout=0.5)
        # The last completions: through the completer's batch in flight, if any.
        flush = asyncio.create_task(self.settler.flush())
        flush_end = max(grace_end, min(time.monotonic() + _FINAL_FLUSH, end - _UNREGISTER))
        done, _ = await asyncio.wait({flush}, timeout=max(flush_end - time.monotonic(), 0.1))
        if not done:
            wakeups.abandon = True  # settlements retrying give up
            for task in (flush, *background):
                task.cancel()  # their statements are abandoned at once
            await asyncio.wait({flush, *background}, timeout=0.5)
        elif flush.exception() is not None:
            log.error("final completions failed: %s", flush.exception())
        unflushed = sorted(job.id for job in self.settler.unflushed.values())
        if unflushed:
            why = "the database did not answer in time" if not done else "the database refused them"
            log.error(
                "could not complete %d finished jobs (%s): %s; they will run again",
                len(unflushed),
                why,
                unflushed,
            )
        wakeups.abandon = True
        for task in background:  # the heartbeat too: it must not reconcile now
            task.cancel()
        if background:
            await asyncio.wait(background, timeout=0.5)
        # What the database may still hold for us: unsettled jobs (cut short, finished but
        # not completed, failures not recorded) and whatever a claim abandoned took.
        left = sorted(set(self.ledger.ids()) | set(unflushed) | set(cut_short))
        worker_id = self._worker.worker_id
        if worker_id is None:
            return
        try:
            released = await self.protocol.unregister(
                worker_id, min(max(end - time.monotonic(), 0.25), _UNREGISTER)
            )
            if released or left:
                log.info("released %d unfinished jobs %s: they will run again", released, left)
        except (PgqError, *TRANSIENT) as exc:
            log.warning(
                "could not unregister (%s); the sweep will release our jobs after the lease (%.0f s):"
                " jobs %s and any a claim took will run again then",
                reason(exc),
                self.protocol.pace.lease,
                left,
            )
