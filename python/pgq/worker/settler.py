"""The settler: carries out the executor's settlements through pgq's SQL, and reports them.

What it is for: completions in batches (what finishes during one round trip goes in the
next), failures and snoozes one by one (capped by the protocol, so that they cannot take
the connections the claims need), the ledger kept true (a settlement not recorded makes it
unsure), and one report per settled delivery: the job log line (pgq.worker.jobs), the
worker's observers and its tally. In production its loop completes what finished; in
tests (pgq.testing.drain) nothing runs that loop and the caller flushes after each round
(`flush()`), so every success is completed before the next claim.
What it must never do: decide a job's fate (pgq.fail and pgq.complete do), or claim.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import psycopg

from .. import tracebacks
from ..errors import PgqError
from ..job import Job
from .executor import Key, Run, Settlement, printable
from .ledger import Ledger
from .protocol import Protocol, Stopping
from .wakeups import Wakeups

log = logging.getLogger("pgq.worker")
# A line per settled job (its fields also as record attributes): successes and snoozes at
# INFO, failures at WARNING. A logger of its own, so that `pgq worker` can keep a busy
# worker's successes out of its log (--log-jobs) and still show its failures.
job_log = logging.getLogger("pgq.worker.jobs")

# Called with (run, outcome, seconds) for every settled delivery (outcome: its first word).
Watcher = Callable[[Run, str, float], None]


@dataclass
class Tally:
    """What a worker settled over its life."""

    completed: int = 0
    failed: int = 0


class Settler:
    def __init__(
        self,
        protocol: Protocol,
        ledger: Ledger,
        wakeups: Wakeups,
        tally: Tally,
        observers: list[Callable[[Job, str, float], None]],
        slot_freed: Callable[[], None],
    ) -> None:
        self._protocol = protocol
        self._ledger = ledger
        self._wakeups = wakeups
        self._tally = tally
        self._observers = observers  # the worker's (metrics exporters)
        self._watchers: list[Watcher] = []
        self._slot_freed = slot_freed
        self._done: list[tuple[Run, Any, float]] = []  # finished: (run, result, seconds) to complete
        # Finished jobs whose completion the database has not confirmed yet.
        self.unflushed: dict[Key, Job] = {}
        self._completing = asyncio.Lock()

    def watch(self, watcher: Watcher) -> None:
        """Also tell `watcher` of every settled delivery, with its run (pgq.testing)."""
        self._watchers.append(watcher)

    def settle_now(self, run: Run, settlement: Settlement) -> bool:
        """Settle what needs no wait (a success joins the next batch): returns False when
        `settle` must be awaited instead. No coroutine for the common case: one per job."""
        kind = settlement.kind
        if kind == "complete":
            self._done.append((run, settlement.value, settlement.seconds))
            self.unflushed[run.key] = run.job
            self._wakeups.flush.set()
            return True
        if kind == "completed":
            self._ledger.release(run.key)  # completed in the handler's transaction
            self._tally.completed += 1
            self._report(run, "succeeded", settlement.seconds)
            return True
        return False

    async def settle(self, run: Run, settlement: Settlement) -> None:
        job = run.job
        kind = settlement.kind
        if self.settle_now(run, settlement):
            return
        if kind in ("fail", "timeout"):
            await self.fail(run, settlement.error)
        elif kind == "snooze":
            await self._snooze(run, settlement.value)
        elif kind == "cancelled":
            if self._wakeups.stopping.is_set() and not job.cancelled:
                return  # shutdown past the grace period: unregister releases the job
            await self.fail(run, "canceled")
        elif kind == "fenced":
            self._ledger.release(run.key)
            log.warning(
                "job %d (%s): delivery %d no longer held by this worker; its writes were rolled back",
                job.id,
                job.entrypoint,
                job.deliveries,
            )

    async def fail(self, run: Run, error: str) -> None:
        job = run.job
        run.error = error = printable(error)
        self._tally.failed += 1
        recorded = False
        try:
            if run.cancel_requested:
                status = await self._protocol.confirm_cancel(job.worker_id, job.id, job.deliveries)
            else:
                status = await self._protocol.fail(job.worker_id, job.id, error, job.deliveries)
            recorded = True
        except (PgqError, Stopping, psycopg.DataError) as exc:
            log.error("job %d (%s): could not record the failure: %s", job.id, job.entrypoint, exc)
            return
        finally:
            self._ledger.release(run.key, recorded)
            self._slot_freed()
        outcome = {"queued": "failed (retried later)", "dead": "failed (dead)", "canceled": "canceled"}.get(
            status or "", "failed (no longer held by this delivery)"
        )
        # The exception and where the handler's own code raised it; the error is stored whole.
        self._report(
            run, outcome, time.monotonic() - run.t0, logging.WARNING, f": {tracebacks.summary(error)}"
        )

    async def _snooze(self, run: Run, seconds: float) -> None:
        job = run.job
        recorded = False
        try:
            status = await self._protocol.snooze(job.worker_id, job.id, seconds, job.deliveries)
            recorded = True
        except (PgqError, Stopping, psycopg.DataError) as exc:
            log.error("job %d (%s): could not snooze: %s", job.id, job.entrypoint, exc)
            return
        finally:
            self._ledger.release(run.key, recorded)
            self._slot_freed()
        status = status or "not held by this delivery any more"
        self._report(run, "snoozed", time.monotonic() - run.t0, detail=f" for {seconds:.1f} s -> {status}")

    # --- completing ---------------------------------------------------------------------

    async def run(self) -> None:
        """Production: complete what finished, batch after batch."""
        while True:
            await self._wakeups.flush.wait()
            self._wakeups.flush.clear()
            await self.flush()

    async def flush(self) -> None:
        """Complete every finished job now. One flush at a time: shutdown's final flush
        must wait for a batch in flight."""
        async with self._completing:
            while self._done:
                batch, self._done = self._done[:10000], self._done[10000:]
                by_worker: dict[UUID, list[tuple[Run, Any, float]]] = {}
                for entry in batch:
                    by_worker.setdefault(entry[0].job.worker_id, []).append(entry)
                for worker_id, entries in by_worker.items():
                    await self._complete(worker_id, entries)
                self._slot_freed()

    async def _complete(self, worker_id: UUID, entries: list[tuple[Run, Any, float]]) -> None:
        ids = [run.job.id for run, _, _ in entries]
        results = None
        if any(result is not None for _, result, _ in entries):
            results = [result for _, result, _ in entries]
        recorded = given_up = False
        try:
            completed = await self._protocol.complete(
                worker_id, ids, results, [run.job.deliveries for run, _, _ in entries]
            )
            recorded = True
        except Stopping:
            given_up = True  # shutdown reports them
            return
        except psycopg.DataError as exc:
            if len(entries) == 1:
                # Completed, it would run again and again: failed, it is retried and ends dead.
                job = entries[0][0].job
                log.error("job %d (%s) finished but could not be completed: %s", job.id, job.entrypoint, exc)
                with contextlib.suppress(PgqError, Stopping, psycopg.Error):
                    error = printable(f"its result could not be stored: {exc}")
                    await self._protocol.fail(worker_id, job.id, error, job.deliveries)
                return
            # One job's data (check_result should have refused it): the others complete.
            for entry in entries:
                await self._complete(worker_id, [entry])
            return
        except asyncio.CancelledError:
            given_up = True  # shutdown: past its deadline
            raise
        finally:
            for run, _, _ in entries:
                self._ledger.release(run.key)
                if recorded or not given_up:
                    self.unflushed.pop(run.key, None)
            if not recorded:
                self._ledger.unsure()
        self._tally.completed += len(completed)
        if self._observers or self._watchers or job_log.isEnabledFor(logging.INFO):
            done = set(completed)
            for run, _, seconds in entries:
                if run.job.id in done:
                    self._report(run, "succeeded", seconds)
        if len(completed) < len(ids):
            lost = sorted(set(ids) - set(completed))
            log.warning("jobs %s were no longer held by this delivery (re-delivered); not completed", lost)

    def _report(
        self, run: Run, outcome: str, seconds: float, level: int = logging.INFO, detail: str = ""
    ) -> None:
        """A settled delivery: told to the watchers and observers, and logged to job_log
        (its fields also as record attributes, for `--log-format json`)."""
        job = run.job
        word = outcome.split(" ", 1)[0]
        for watch in self._watchers:
            watch(run, word, seconds)
        for observe in self._observers:
            observe(job, word, seconds)
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
                "outcome": word,
            },
        )
