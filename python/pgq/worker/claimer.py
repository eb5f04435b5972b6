"""The claimer: the worker's slots, when to claim, and backing off when claims fail.

What it is for: claiming up to the free slots (gathering a few freed slots first, so that
fast handlers do not cost a round trip per job), then waiting for a NOTIFY, a freed slot or
the poll interval; once a claim found the queue drained, only for a NOTIFY or the poll,
unless NOTIFYs do not arrive or an entrypoint has a concurrency limit. Each claimed
delivery holds a slot (`running`) until its handler really stops: its task runs the
executor, then the settler. `claim_once(n)` is one claim without the loop (pgq.testing).
What it must never do: settle a job, or claim while a heartbeat tells the database what we
run (the ledger orders the two).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from uuid import UUID

import psycopg

from .. import steps
from .._redelivery import log_redelivery
from ..errors import PgqError, UnknownWorker, WorkerGone
from ..job import Job, claimed, request_cancel
from ..steps import StepRunner
from .executor import Executor, Handler, Key, Run
from .ledger import Ledger
from .protocol import TRANSIENT, Protocol
from .settler import Settler
from .wakeups import Wakeups

log = logging.getLogger("pgq.worker")
# With jobs running, fewer free slots than a quarter of a batch wait this long before a claim.
_GATHER = 0.002


class Claimer:
    def __init__(
        self,
        protocol: Protocol,
        ledger: Ledger,
        wakeups: Wakeups,
        executor: Executor,
        handlers: dict[str, Handler],
        concurrency: Callable[[], int],
        batch: int,
        worker_id: Callable[[], UUID | None],
        reregister: Callable[[Exception, UUID | None], Awaitable[None]],
    ) -> None:
        self._protocol = protocol
        self._ledger = ledger
        self._wakeups = wakeups
        self._executor = executor
        self._handlers = handlers
        self._steps: StepRunner | None = None
        self._entrypoints = sorted(handlers)
        self._concurrency = concurrency  # the worker's, read at each claim
        self._batch = batch
        # With jobs running, fewer free slots than this wait _GATHER before a claim.
        self._refill = max(1, min(batch, concurrency()) // 4)
        self._worker_id = worker_id
        self._reregister = reregister
        self.settler: Settler | None = None  # wired after both are made
        self.running: dict[Key, Run] = {}  # handlers holding a slot
        # Whether NOTIFYs reach us (the LISTEN connection is up and was seen to work).
        self.listening = False
        # The last claim took fewer jobs than it asked for: nothing else was due (or free of
        # other claims' locks). Until a NOTIFY or the poll, a claim when one of our jobs ends
        # or settles would find nothing either (at a trickle, two empty claims per job).
        self._drained = False

    async def run(self) -> None:
        delay = 0.1
        wakeups = self._wakeups
        while not wakeups.stopping.is_set():
            free = self._concurrency() - len(self.running)
            if free <= 0:
                self._drained = False  # full (concurrency may have been lowered): a freed slot wakes us
                wakeups.wake.clear()
                await wakeups.wake.wait()
                continue
            if free < self._refill and self.running:
                # Fast handlers give their slots back one by one: a claim per freed slot
                # would cost a round trip per job. Gather a few (slow ones lose 2 ms).
                await asyncio.sleep(_GATHER)
                if wakeups.stopping.is_set():
                    break
                free = self._concurrency() - len(self.running)
            wanted = min(free, self._batch)
            wakeups.wake.clear()
            worker_id = self._worker_id()  # re-registration, if the claim says so, replaces this id
            try:
                runs = await self.claim_once(wanted)
            except TRANSIENT as exc:
                # The claim may have committed before the connection broke: the next
                # heartbeat tells the database what we run, which gives those jobs back.
                wakeups.beat_now.set()
                log.log(
                    logging.DEBUG if self._protocol.refused(exc) else logging.WARNING,
                    "claim failed (%s); retrying in %.1f s",
                    str(exc).strip(),
                    delay,
                )
                await wakeups.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            except (WorkerGone, UnknownWorker) as exc:
                await self._reregister(exc, worker_id)
                continue
            except (PgqError, psycopg.Error) as exc:
                # Not the connection: a bug or a misconfiguration. Keep the worker (and the
                # leases of its running jobs) alive, say so, and try again later.
                log.error("claim failed: %s; retrying in %.1f s", exc, delay)
                await wakeups.sleep(delay)
                delay = min(delay * 2, 30.0)
                continue
            except Exception:
                # Anything else (reading a row, starting a job) must not end the worker:
                # the heartbeat gives back what the claim may have taken.
                log.exception("claim failed; retrying in %.1f s", delay)
                await wakeups.sleep(delay)
                delay = min(delay * 2, 30.0)
                continue
            delay = 0.1
            self._drained = len(runs) < wanted
            if len(runs) < wanted:
                # Drained (or at a limit): sleep until a NOTIFY (or, under a concurrency
                # limit, a settled job) wakes us, or poll (a lost NOTIFY, a run_at reached).
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(wakeups.wake.wait(), self._protocol.pace.poll)

    async def claim_once(self, wanted: int) -> list[Run]:
        """Claim up to `wanted` jobs and start their handlers; returns their runs."""
        worker_id = self._worker_id()  # the claim's jobs belong to this id, whatever happens next
        async with self._ledger.claiming():
            rows = await self._protocol.claim(worker_id, self._entrypoints, wanted)
            self._executor.check_spans()
            loop = asyncio.get_running_loop()
            return [self._start(claimed(row, worker_id), loop) for row in rows]  # type: ignore[arg-type]

    def _start(self, job: Job, loop: asyncio.AbstractEventLoop) -> Run:
        run = Run(job, self._handlers[job.entrypoint])
        if self._steps is None:  # Job.step's calls of the step functions, on our pool
            self._steps = StepRunner(self._protocol.sql, loop)
        steps.attach(job, self._steps)
        if job.deliveries > 1:
            log_redelivery(log, job)
        self._ledger.hold(run.key, job)
        self.running[run.key] = run
        run.task = loop.create_task(self._run(run))
        return run

    async def _run(self, run: Run) -> None:
        """One delivery: run it, settle it, and give its slot back when it really stops."""
        assert self.settler is not None
        try:
            settlement = await self._executor.execute(run)
            if not self.settler.settle_now(run, settlement):
                await self.settler.settle(run, settlement)
            if settlement.kind == "timeout":
                await self._executor.outlive(run)  # its slot stays taken until it stops
        finally:
            self.running.pop(run.key, None)
            self.slot_freed()

    def slot_freed(self) -> None:
        """Wake the claim loop: one of our jobs ended or settled. Not after a claim that
        found nothing more, when NOTIFYs reach us and no entrypoint has a concurrency limit:
        then only a NOTIFY (a job enqueued, released, retried or re-queued at once) or the
        poll (a run_at reached) can make a claim find something. Under a limit, the end of a
        job may free a slot; without LISTEN, our own settlements' NOTIFYs (dependents
        released, a failure retried at once) are not heard."""
        if not self._drained or not self.listening or self._protocol.pace.limited:
            self._wakeups.wake.set()

    def cancel(self, ids: set[int]) -> None:
        """The heartbeat returned these jobs: their cancellation was requested."""
        worker_id = self._worker_id()
        for run in self.running.values():
            if run.job.id in ids and run.job.worker_id == worker_id:
                run.cancel_requested = True
            if run.job.id in ids and run.job.worker_id == worker_id and not run.job.cancelled:
                log.info("job %d (%s): cancellation requested", run.job.id, run.job.entrypoint)
                self._stop(run)

    def stop_runs_of(self, old: UUID | None) -> None:
        """Our worker row `old` is gone: stop the runs claimed under it."""
        for run in list(self.running.values()):
            if run.job.worker_id == old:
                self._stop(run)

    @staticmethod
    def _stop(run: Run) -> None:
        request_cancel(run.job)
        if run.handler.is_async and run.task is not None:
            run.task.cancel()
