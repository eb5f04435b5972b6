"""The events by which the worker's parts wake one another, and the stop.

What it is for: one place for the few signals that cross parts (a freed slot or a NOTIFY
wakes the claimer, a finished job wakes the settler, a lost claim or a cancel wakes the
heartbeat, SIGTERM stops everything), so that no part reaches into another to poke it.
What it must never do: hold state about jobs, or talk to the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import time


class Wakeups:
    """The events of one run of a worker (made on its event loop)."""

    def __init__(self) -> None:
        self.stopping = asyncio.Event()  # SIGTERM or stop(): claim no more
        self.wake = asyncio.Event()  # the claimer: a NOTIFY, a freed slot, the stop
        self.flush = asyncio.Event()  # the settler: finished jobs to complete
        self.beat_now = asyncio.Event()  # the heartbeat: beat now, not at its time
        # Past the final flush: settlements retrying give up (Protocol.persist).
        self.abandon = False
        self.stop_at: float | None = None  # when the stop came: the shutdown's budget

    def stop(self) -> None:
        if self.stop_at is None:
            self.stop_at = time.monotonic()
        self.stopping.set()
        self.wake.set()

    async def sleep(self, seconds: float) -> None:
        """Sleep, but wake at once on the stop."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.stopping.wait(), seconds)
