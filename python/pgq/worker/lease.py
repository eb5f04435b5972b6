"""The worker's lease: the heartbeat loop, its pace, its deadline, its connection of its own.

What it is for: keeping the leases of the jobs the worker runs, learning of cancellations
(the heartbeat returns the jobs to stop), telling the database what we run when the ledger
is unsure or every two leases, and the sweep's cadence beside the beats.
What it must never do: wait behind a claim or a settlement, or run a job.

A heartbeat that waits behind anything (a claim or a settlement on a connection that went
silent, a pool whose connections are all taken, a claim's lock on the worker row) can cost
the worker the leases of every job it runs. So the heartbeat:

- runs on a connection of its own, not the worker's pool, and never waits for a claim in
  flight (it then sends no `running` list, which releases nothing: see pgq.heartbeat);
- has a deadline well under the lease, after which its connection is abandoned
  (pgq._deadline) and the next beat, a moment later, goes through a fresh one: a partition
  that heals is felt for at most that deadline, not for TCP's retransmission backoff (a
  request sent into a 6.5 s partition is retransmitted only 12.6 s after it was sent).

With beats every lease/5 (jittered down to 3/4 of it) and a deadline of lease/10, a
partition shorter than about 0.7 of the lease costs nothing: at most lease/5 passed since the
last beat when it began, and a beat gets through at most lease/10 after it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

import psycopg

from ..errors import PgqError, UnknownWorker, WorkerGone
from .ledger import Ledger
from .protocol import TRANSIENT, Protocol, Stopping
from .wakeups import Wakeups

log = logging.getLogger("pgq.worker")
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


def interval(lease: float) -> float:
    """Seconds until the next beat: well inside the lease, so that a missed beat or two
    still keeps the jobs; jittered, so that workers started together spread their beats."""
    return min(max(lease / 5, 0.1), 10.0) * random.uniform(0.75, 1.0)


def deadline(lease: float) -> float:
    """The longest one beat (connecting included) may take before it is abandoned."""
    return min(max(lease / 10, 1.0), 5.0)


def retry_in(lease: float, failures: int) -> float:
    """After a failed beat: at once (a fresh connection), then backing off a little, never
    longer than a beat's deadline (the next attempt must come soon enough to matter)."""
    return min(0.05 * 2**failures, deadline(lease))


class Heartbeat:
    """The heartbeat loop of one run of a worker."""

    def __init__(
        self,
        protocol: Protocol,
        ledger: Ledger,
        wakeups: Wakeups,
        worker_id: Callable[[], UUID | None],
        entrypoints: list[str],
        cancel: Callable[[set[int]], None],
        reregister: Callable[[Exception, UUID | None], Awaitable[None]],
    ) -> None:
        self._protocol = protocol
        self._ledger = ledger
        self._wakeups = wakeups
        self._worker_id = worker_id
        self._entrypoints = entrypoints
        self._cancel = cancel  # the runs of these job ids are asked to stop
        self._reregister = reregister  # our worker row is gone: register again

    async def run(self) -> None:
        """Extend the leases: on the heartbeat's own connection, each beat within a deadline
        well under the lease, waiting behind no claim and no settlement."""
        pace = self._protocol.pace
        swept = time.monotonic()
        self._ledger.start_clock()
        failures = 0
        sweeping: asyncio.Task[None] | None = None
        try:
            while True:
                # After a failure, a fresh connection at once: the lease is running out.
                wait = retry_in(pace.lease, failures) if failures else interval(pace.lease)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wakeups.beat_now.wait(), wait)
                self._wakeups.beat_now.clear()
                worker_id = self._worker_id()
                failures += 1
                try:
                    rows = await self._beat(worker_id)
                except TRANSIENT as exc:
                    self._ledger.unsure()  # a failover may have lost what we committed
                    # Once per outage: the pool logs the server's reason as it changes, and
                    # a beat is retried every few seconds until the database answers.
                    level = logging.WARNING if failures == 1 else logging.DEBUG
                    log.log(level, "heartbeat failed (%s); retrying on a fresh connection", str(exc).strip())
                    continue
                except (WorkerGone, UnknownWorker) as exc:
                    failures = 0
                    if not self._wakeups.stopping.is_set():
                        with contextlib.suppress(Stopping):
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
                    sweeping = asyncio.create_task(self._protocol.sweep())
        finally:
            if sweeping is not None:
                sweeping.cancel()

    async def _beat(self, worker_id: UUID | None) -> list[dict[str, Any]]:
        """One heartbeat, then the settings, within the heartbeat's deadline. It tells the
        database which jobs we run (releasing any other it has as ours) after a failure and
        every two leases, but only while no claim is in flight: the database would release
        a job we are about to learn of. It never waits for a claim: with one in flight it
        sends no list, which releases nothing."""
        lease = self._protocol.pace.lease
        seconds = deadline(lease)
        every = min(lease * _RECONCILE_LEASES, _RECONCILE_MAX)
        due = self._ledger.reconcile_due(every)
        if not due or not self._ledger.may_reconcile():
            rows = await self._protocol.heartbeat(worker_id, None, self._entrypoints, seconds)
            if due:
                # A claim was in flight: try again soon, not a whole interval later (jobs
                # the database holds as ours would stay held that much longer).
                asyncio.get_running_loop().call_later(_RECONCILE_RETRY, self._wakeups.beat_now.set)
            return rows
        # No await between the check above and this: a claim starting now waits for us.
        async with self._ledger.reconciling(worker_id) as running:
            rows = await self._protocol.heartbeat(worker_id, running, self._entrypoints, seconds)
        log.debug("heartbeat: told the database the %d jobs we run", len(running))
        return rows
