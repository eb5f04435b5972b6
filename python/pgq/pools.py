"""How pgq connects: one policy for the pools of pgq.Client, pgq.AsyncClient and the worker.

- Connect again quickly. psycopg_pool retries a failed connection after 1, 2, 4 ... 128 s,
  so after an outage the queue stayed stopped for about as long as the server was down.
  Here a pool's connections come from a connection class whose connect() tries again every
  RETRY_MAX seconds at most while the server refuses for a passing reason (down, starting
  up, in recovery, out of connection slots): the first connection is made within that
  long of the server accepting again. The attempts of one pool share one schedule, so an
  outage costs the server one attempt per pool and interval, not one per connection.
  A failure that does not pass by itself (a wrong password, a missing database) is
  raised, and the pool's own, slower schedule applies.
- Say why, once. The server's own reason (`sorry, too many clients already`, `the
  database system is starting up`) is logged when it changes, and again when connecting
  works; a PoolTimeout raised meanwhile carries it.
- Never lend a connection that died while idle (a restart, a terminated backend,
  idle_session_timeout). The server says so before it closes one, so such a connection has
  something to read while it sits in the pool: the check costs a poll of its socket, no
  round trip, and the rare readable connection gets a real round trip. One dead connection
  found means the others died too: the pool checks all of its idle ones at once, so the
  call gets a live or a new connection instead of waiting out the pool's backoff between
  failed checks.
- Retry once what cannot have committed: a call that failed with a lost connection before
  its statement was sent (Progress.sent) runs again once, on a fresh connection. Anything
  that failed after sending may have committed and is raised (commit unknown).
"""

from __future__ import annotations

import asyncio
import logging
import re
import select
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.pq import ConnStatus
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolClosed, PoolTimeout, TooManyRequests

# While the server refuses for a passing reason: the first retry after RETRY_FIRST, then
# doubling, at most RETRY_MAX apart (one attempt per pool and interval).
RETRY_FIRST = 0.05
RETRY_MAX = 0.5
# Any other refusal (a wrong password, a missing database, an unknown host): at most this
# often, so that a misconfiguration does not flood the server's log.
RETRY_MAX_OTHER = 10.0
# What the server (or the network) says while it is away or full and will be back.
_PASSING = (
    "connection refused",
    "starting up",
    "shutting down",
    "in recovery mode",
    "not yet accepting connections",
    "not currently accepting connections",
    "too many clients",
    "too many connections",
    "remaining connection slots are reserved",
    "no such file or directory",  # the socket file of a stopped server
    "server closed the connection unexpectedly",
    "connection reset",
    "could not receive data",
    "could not send data",
    "timeout expired",
    "administrator command",
    "crash of another server process",
    "no route to host",
    "network is unreachable",
)
# Errors of getting a connection that are no connection failure: never retried.
_NO_CONNECTION = (PoolTimeout, PoolClosed, TooManyRequests)


def server_reason(exc: BaseException) -> str:
    """The server's own words for a failed connection attempt (libpq's when there are none):
    `sorry, too many clients already`, not libpq's whole preamble."""
    text = str(exc).strip()
    fatal = re.findall(r"FATAL:\s+([^\n]*)", text)
    if fatal:
        return fatal[-1].strip()
    return text.rsplit("failed: ", 1)[-1].strip().splitlines()[0].strip() if text else type(exc).__name__


def passing(reason: str) -> bool:
    """Whether a refusal is one that passes by itself (the server down or full)."""
    lowered = reason.lower()
    return any(words in lowered for words in _PASSING)


class Link:
    """The connection state of one pool (or of one dedicated connection): why connecting
    fails now, since when, and when the next attempt may go. Shared by the pool's connection
    attempts (threads of a sync pool, tasks of an async one)."""

    def __init__(self, name: str, logger: logging.Logger) -> None:
        self.name = name
        self.log = logger
        self.reason: str | None = None  # why the last attempt failed; None: connected
        # The reasons said since connecting last failed: each once per outage. They may
        # alternate (refused, then a connection opened before a stop found broken, then
        # refused again), and a line at each turn would say nothing new.
        self._told: set[str] = set()
        self.closed = threading.Event()
        self._lock = threading.Lock()
        self._down_since = 0.0
        self._delay = 0.0
        self._next = 0.0  # monotonic time before which no attempt goes

    def wait(self) -> float:
        """Seconds until this attempt may go; 0: go now. While connecting fails, one attempt
        goes per interval (it takes the turn), the others wait for its outcome."""
        with self._lock:
            if self.reason is None:
                return 0.0
            now = time.monotonic()
            if now < self._next:
                return self._next - now
            self._next = now + max(self._delay, RETRY_FIRST)
            return 0.0

    def failed(self, exc: BaseException) -> bool:
        """Record a failed attempt (logged the first time its reason comes in this outage);
        whether it is one that passes by itself (then keep trying)."""
        reason = server_reason(exc)
        transient = passing(reason)
        ceiling = RETRY_MAX if transient else RETRY_MAX_OTHER
        with self._lock:
            now = time.monotonic()
            changed = reason not in self._told
            self._told.add(reason)
            if self.reason is None:
                self._down_since = now
                self._delay = RETRY_FIRST
            else:
                self._delay = min(max(self._delay * 2, RETRY_FIRST), ceiling)
            self._next = max(self._next, now + self._delay)
            self.reason = reason
        if changed and not self.closed.is_set():
            self.log.warning(
                "%s: cannot connect to the database: %s; %s",
                self.name,
                reason,
                f"trying again every {ceiling:g} s" if transient else f"trying again within {ceiling:g} s",
            )
        return transient

    def connected(self) -> None:
        with self._lock:
            if self.reason is None:
                return
            down = time.monotonic() - self._down_since
            self.reason = None
            self._told.clear()
            self._delay = self._next = 0.0
        self.log.info("%s: connected to the database again after %.1f s", self.name, down)

    def timeout(self, exc: PoolTimeout) -> PoolTimeout:
        """A PoolTimeout that says why the pool had no connection, when it was refused."""
        reason = self.reason
        if reason is None:
            return exc
        err = PoolTimeout(f"{exc} (the database refuses connections: {reason})")
        err.__cause__ = exc.__cause__
        return err


def connection_class(link: Link) -> type[psycopg.Connection[Any]]:
    """A psycopg.Connection whose connect() keeps trying, on the link's schedule, while the
    server refuses for a passing reason (until the link is closed)."""

    class Connection(psycopg.Connection):  # type: ignore[type-arg]
        @classmethod
        def connect(cls, conninfo: str = "", **kwargs: Any) -> Any:
            while True:
                while (pause := link.wait()) > 0:
                    if link.closed.wait(pause):
                        raise PoolClosed(f"{link.name}: closed while connecting")
                try:
                    conn = super().connect(conninfo, **kwargs)
                except psycopg.OperationalError as exc:
                    if not link.failed(exc) or link.closed.is_set():
                        raise
                    continue
                link.connected()
                return conn

    Connection.__qualname__ = "Connection"  # as psycopg_pool's log lines show it
    return Connection


def async_connection_class(link: Link) -> type[psycopg.AsyncConnection[Any]]:
    """connection_class's asyncio twin."""

    class AsyncConnection(psycopg.AsyncConnection):  # type: ignore[type-arg]
        @classmethod
        async def connect(cls, conninfo: str = "", **kwargs: Any) -> Any:
            while True:
                pause = link.wait()
                while pause > 0 and not link.closed.is_set():
                    await asyncio.sleep(min(pause, 0.1))
                    pause = link.wait()
                if link.closed.is_set():
                    raise PoolClosed(f"{link.name}: closed while connecting")
                try:
                    conn = await super().connect(conninfo, **kwargs)
                except psycopg.OperationalError as exc:
                    if not link.failed(exc) or link.closed.is_set():
                        raise
                    continue
                link.connected()
                return conn

    AsyncConnection.__qualname__ = "AsyncConnection"
    return AsyncConnection


def _readable(conn: psycopg.BaseConnection[Any]) -> bool:
    """Whether an idle connection has something to read (or is closed): the server's
    FATAL before it closed the connection, or the end of the stream."""
    if conn.closed or conn.pgconn.status != ConnStatus.OK:
        return True
    fd = conn.pgconn.socket
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)
        return bool(poller.poll(0))
    return bool(select.select([fd], [], [], 0)[0])


class Pool(ConnectionPool):  # type: ignore[type-arg]
    """psycopg_pool.ConnectionPool with pgq's connection policy (see the module)."""

    def __init__(self, conninfo: str, *, link: Link, **kwargs: Any) -> None:
        self.link = link
        super().__init__(conninfo, connection_class=connection_class(link), check=self._check_idle, **kwargs)

    def _check_idle(self, conn: psycopg.Connection[Any]) -> None:
        if not _readable(conn):
            return
        try:
            ConnectionPool.check_connection(conn)
        except psycopg.Error:
            self.check()  # its idle siblings died with it: discard them all now
            raise

    def getconn(self, timeout: float | None = None) -> Any:
        try:
            return super().getconn(timeout)
        except PoolTimeout as exc:
            raise self.link.timeout(exc) from None

    def close(self, timeout: float = 5.0) -> None:
        self.link.closed.set()
        super().close(timeout)


class AsyncPool(AsyncConnectionPool):  # type: ignore[type-arg]
    """psycopg_pool.AsyncConnectionPool with pgq's connection policy (see the module).
    `lost` is called when a connection is found dead while idle."""

    def __init__(
        self, conninfo: str, *, link: Link, lost: Callable[[], None] | None = None, **kwargs: Any
    ) -> None:
        self.link = link
        self._lost = lost
        super().__init__(
            conninfo, connection_class=async_connection_class(link), check=self._check_idle, **kwargs
        )

    async def _check_idle(self, conn: psycopg.AsyncConnection[Any]) -> None:
        if not _readable(conn):
            return
        try:
            await AsyncConnectionPool.check_connection(conn)
        except psycopg.Error:
            if self._lost is not None:
                self._lost()
            await self.check()  # its idle siblings died with it: discard them all now
            raise

    async def getconn(self, timeout: float | None = None) -> Any:
        try:
            return await super().getconn(timeout)
        except PoolTimeout as exc:
            raise self.link.timeout(exc) from None

    async def close(self, timeout: float = 5.0) -> None:
        self.link.closed.set()
        await super().close(timeout)


class Progress:
    """How far a call got: `sent` once its statement went to the server. Until then, a
    lost connection cannot have committed anything of it."""

    __slots__ = ("sent",)

    def __init__(self) -> None:
        self.sent = False


def retry_unsent(exc: BaseException, progress: Progress) -> bool:
    """Whether a failed call may run again (once) on a fresh connection: the connection was
    lost before its statement was sent. Not when no connection could be had at all (the
    pool already waited its timeout), nor for anything after sending (commit unknown)."""
    return (
        isinstance(exc, psycopg.OperationalError)
        and not isinstance(exc, _NO_CONNECTION)
        and not progress.sent
    )
