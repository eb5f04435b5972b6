"""Waiting on the database with a deadline, and the one way the worker gives such a wait up.

A statement waiting for a reply that does not come (a network that drops packets, a table
locked by ALTER TABLE, a paused pooler) cannot be given up by cancelling the task that
awaits it: psycopg then sends the server a cancel request and waits for the answer, up to
10 s more, which is the same wait again. Here the work runs in a task of its own, and at
the deadline (or when the caller itself is cancelled) its connection is abandoned:

- the server is sent a cancel request in the background, so that a backend waiting for a
  lock stops waiting (it would not notice that its client went away);
- the socket is shut down, so the task fails at once with a lost connection, and the
  connection is thrown away (a pool discards a broken one); with SO_LINGER 0, what the
  kernel still holds unsent is discarded when libpq closes it, so a request held back by a
  partition cannot reach the server later, after the worker stopped counting on it.

Work that had no connection yet (waiting for one from a pool, connecting) is cancelled:
nothing was sent, and cancelling it costs no wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
from psycopg import generators, waiting

T = TypeVar("T")

# How long a cancel request may take: it runs in the background, nobody waits for it.
_CANCEL_TIMEOUT = 5.0


class DeadlineExceeded(psycopg.OperationalError):
    """No reply within the deadline: the connection was abandoned. An OperationalError, so
    that whoever handles a lost connection handles this one the same way."""


class Call:
    """The connection that a bounded piece of work is using now, if any: what to abandon.
    The work sets `conn` while a statement is on the wire and clears it after."""

    conn: psycopg.AsyncConnection[Any] | None = None


async def bounded(work: Callable[[Call], Awaitable[T]], seconds: float | None, what: str) -> T:
    """Await work(call); past `seconds` (None: no deadline), or when the caller is
    cancelled, abandon it (see the module) and raise DeadlineExceeded (or the
    cancellation) at once."""
    call = Call()
    task = asyncio.ensure_future(work(call))
    try:
        done, _ = await asyncio.wait({task}, timeout=seconds)
    except asyncio.CancelledError:
        abandon(call, task)
        raise
    if not done:
        abandon(call, task)
        raise DeadlineExceeded(f"{what}: no reply within {seconds:.1f} s")
    return task.result()


def abandon(call: Call, task: asyncio.Future[Any]) -> None:
    """Give up the work in `task` without waiting for it: what it raises later is dropped."""
    task.add_done_callback(_drop)
    conn = call.conn
    if conn is None or conn.closed:
        task.cancel()
        return
    cancel_request(conn)
    shut(conn)


def shut(conn: psycopg.AsyncConnection[Any]) -> None:
    """Shut down the connection's socket: whatever waits on it fails now, and what was not
    sent yet is dropped with it (SO_LINGER 0: libpq's close sends a reset)."""
    with contextlib.suppress(psycopg.Error, OSError, ValueError):
        fd = conn.pgconn.socket
        sock = socket.socket(fileno=socket.dup(fd))  # shutdown acts on the socket, not the fd
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()


_cancels: set[asyncio.Task[None]] = set()  # keeps the background requests referenced


def cancel_request(conn: psycopg.AsyncConnection[Any]) -> None:
    """Ask the server, over a connection of its own and without waiting, to cancel what
    `conn` runs. Needs libpq 17's non-blocking cancel; with an older libpq nothing is sent
    (its PQcancel blocks), and a backend waiting for a lock waits until the lock is
    granted, then finds its client gone."""
    if not psycopg.capabilities.has_cancel_safe():
        return
    try:
        cancel_conn = conn.pgconn.cancel_conn()  # now, while the connection is still whole
        cancel_conn.start()
    except psycopg.Error:
        return

    async def send() -> None:
        with contextlib.suppress(Exception):
            await waiting.wait_conn_async(generators.cancel(cancel_conn), timeout=_CANCEL_TIMEOUT)
        cancel_conn.finish()

    task = asyncio.ensure_future(send())
    _cancels.add(task)
    task.add_done_callback(_cancels.discard)


def _drop(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: asyncio does not log it as never retrieved
