"""The listener: the worker's dedicated autocommit connection on LISTEN pgq.

What it is for: waking the claimer when a job of ours is enqueued (or released, retried,
re-queued) and the heartbeat when a cancellation of one of our jobs is requested; checking
first that NOTIFYs arrive at all (behind a pooler in transaction mode they do not, and the
worker then polls, saying so); reconnecting, backing off, when the connection is lost.
What it must never do: claim or settle (it only sets the wake-up events), or run a
transaction on its connection.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Collection
from typing import Any
from uuid import UUID

import psycopg

from .. import pools
from ..dsn import tcp_defaults
from .protocol import Protocol
from .statements import LISTEN_SETTINGS, LISTEN_ZERO
from .wakeups import Wakeups

log = logging.getLogger("pgq.worker")


class Listener:
    def __init__(
        self,
        name: str,
        protocol: Protocol,
        wakeups: Wakeups,
        entrypoints: Collection[str],
        worker_id: Callable[[], UUID | None],
        listening: Callable[[bool], None],
        lost: Callable[[], None],
    ) -> None:
        self._name = name
        self._protocol = protocol
        self._wakeups = wakeups
        self._entrypoints = entrypoints
        self._worker_id = worker_id
        self._listening = listening  # told whether NOTIFYs reach us now
        # Told when a listening session is lost: the server may have failed over and lost
        # what the worker committed, though no call of ours failed (the ledger is then unsure).
        self._lost = lost

    async def run(self, listen_dsn: str) -> None:
        try:
            await self._listen(listen_dsn)
        finally:
            self._listening(False)  # stopped, failed or fell back to polling

    async def _listen(self, listen_dsn: str) -> None:
        delay = 0.1
        # Connects again as quickly as the pool, saying why it cannot once per change.
        connection = pools.async_connection_class(pools.Link(f"worker {self._name} (LISTEN)", log))
        settings_told = False
        wakeups = self._wakeups
        while True:
            listened = False  # whether this attempt's session was up: only its loss tells
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
                            self._protocol.pace.poll,
                        )
                        return
                    delay = 0.1
                    listened = True
                    self._listening(True)
                    # While we were not listening (starting, reconnecting, the probe) jobs
                    # may have arrived and cancels been requested: claim, and heartbeat
                    # (which returns the jobs to stop).
                    wakeups.wake.set()
                    wakeups.beat_now.set()
                    async for notify in conn.notifies():
                        if notify.payload in self._entrypoints:
                            wakeups.wake.set()
                        elif notify.payload == f"cancel:{self._worker_id()}":
                            wakeups.beat_now.set()  # the heartbeat returns the jobs to stop
            except psycopg.OperationalError as exc:
                self._listening(False)
                if listened:  # not a failed connect (a wrong listen_dsn would say so every few s)
                    self._lost()
                log.warning("LISTEN connection lost (%s); reconnecting in %.1f s", str(exc).strip(), delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _configure_listen(self, conn: psycopg.AsyncConnection[Any], told: bool) -> bool:
        """Turn off, for the LISTEN session, the timeouts a role or database default may set
        (LISTEN_ZERO). Where the server does not allow it (a pooler, a managed service's
        restrictions), say so once: the connection is then closed now and again and
        NOTIFYs sent meanwhile are lost (claims still poll). Returns whether it was told."""
        try:
            await conn.execute(LISTEN_SETTINGS, (LISTEN_ZERO,))
        except psycopg.OperationalError:
            raise
        except psycopg.Error as exc:
            if not told:
                log.warning(
                    "LISTEN session: could not turn off %s (%s); a timeout set for the role may"
                    " close it while it waits, and notifications are then late by up to %.2f s",
                    ", ".join(LISTEN_ZERO),
                    str(exc).strip(),
                    self._protocol.pace.poll,
                )
            return True
        return told

    async def _notifications_arrive(self, conn: psycopg.AsyncConnection[Any]) -> bool:
        """Send ourselves a NOTIFY through the pool and wait for it on the LISTEN connection.

        Behind PgBouncer in transaction mode the LISTEN lands on a pooled server connection
        and notifications never come back, which would silently cost the poll interval on
        every job; a direct connection gets the probe within milliseconds.
        """
        token = f"probe:{uuid.uuid4()}"
        await self._protocol.notify(token)
        probe = conn.notifies(timeout=10)
        try:
            async for notify in probe:
                if notify.payload == token:
                    return True
            return False
        finally:
            # Close it now: the generator holds the connection's lock until it is closed.
            await probe.aclose()
