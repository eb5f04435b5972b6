"""The ledger: which deliveries the database may hold as this worker's.

What it is for: a heartbeat may tell the database the full list of jobs the worker runs,
and the database then gives back any other it holds as ours. That list is only safe to send
when no claim is in flight (the database would release a job the claim is about to return)
and is needed when we are unsure (a claim's reply lost, a settlement given up, a lost
connection: the database may hold a job we no longer track). The ledger keeps that list,
that doubt (`unsure()`), and the exclusion between claims and reconciling heartbeats.
What it must never do: talk to the database, or decide a job's fate.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from uuid import UUID

from ..job import Job
from .executor import Key


class Ledger:
    def __init__(self) -> None:
        self.held: dict[Key, Job] = {}  # claimed, not yet completed/failed in the database
        self._unsure = False
        self._claiming = asyncio.Lock()  # a claim in flight: no heartbeat may reconcile
        # Set while a heartbeat reconciles: no claim may start until it is done (or abandoned).
        self._reconciling: asyncio.Event | None = None
        self._reconciled = time.monotonic()

    def start_clock(self) -> None:
        """The heartbeat loop (re)starts: the next periodic reconciliation is a period away."""
        self._reconciled = time.monotonic()

    def hold(self, key: Key, job: Job) -> None:
        self.held[key] = job

    def release(self, key: Key, recorded: bool = True) -> None:
        """Stop tracking a delivery; not `recorded` in the database: the next heartbeat
        gives it back if the database still has it as ours."""
        self.held.pop(key, None)
        if not recorded:
            self._unsure = True

    def unsure(self) -> None:
        """The database may hold jobs of ours that we no longer track: the next heartbeat
        reconciles."""
        self._unsure = True

    def ids(self) -> list[int]:
        return sorted({job.id for job in self.held.values()})

    def reconcile_due(self, every: float) -> bool:
        """Whether a heartbeat should tell the database what we run: we are unsure, or
        `every` seconds passed since the last time."""
        return self._unsure or time.monotonic() - self._reconciled >= every

    def may_reconcile(self) -> bool:
        """No claim in flight and no other reconciling beat."""
        return not self._claiming.locked() and self._reconciling is None

    @contextlib.asynccontextmanager
    async def claiming(self) -> AsyncIterator[None]:
        """Around a claim: waits for a reconciling heartbeat to be done (it has a deadline:
        the wait is short); a claim that fails may have committed: unsure."""
        async with self._claiming:
            while self._reconciling is not None:
                await self._reconciling.wait()
            try:
                yield
            except BaseException:
                self._unsure = True  # the claim may have committed: we lost its reply
                raise

    @contextlib.asynccontextmanager
    async def reconciling(self, worker_id: UUID | None) -> AsyncIterator[list[int]]:
        """Around a reconciling heartbeat (call only when may_reconcile(), with no await in
        between): yields the ids of the jobs we hold under `worker_id`; claims wait."""
        self._reconciling = event = asyncio.Event()
        self._unsure = False  # a failure from now on needs another round
        try:
            yield sorted({job.id for job in self.held.values() if job.worker_id == worker_id})
        except BaseException:
            self._unsure = True
            raise
        finally:
            self._reconciling = None
            event.set()
        self._reconciled = time.monotonic()
