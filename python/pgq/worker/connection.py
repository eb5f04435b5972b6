"""The heartbeat's connection of its own (pgq.worker.lease says why it needs one).

What it is for: one autocommit connection, made when needed, on which statements run within
a deadline (pgq._deadline); one that failed or was abandoned is dropped, and the next call
connects afresh.
What it must never do: share itself with claims or settlements, or wait past its deadline.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
from psycopg.rows import dict_row

from .._deadline import Call, bounded
from ..dsn import tcp_defaults
from ..errors import translate


class LeaseConnection:
    """The heartbeat's own autocommit connection, made when needed; one that failed or was
    abandoned is dropped, and the next call connects afresh."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        # As the pool's: no prepared statements (PgBouncer in transaction mode), UTF-8,
        # and TCP probes of a silent peer.
        self._kwargs: dict[str, Any] = {
            "autocommit": True,
            "prepare_threshold": None,
            "client_encoding": "utf8",
            **tcp_defaults(dsn),
        }
        self._conn: psycopg.AsyncConnection[Any] | None = None

    async def execute(
        self, statements: list[tuple[str, tuple[Any, ...]]], seconds: float, what: str
    ) -> list[list[dict[str, Any]]]:
        """Run the statements one after the other, their rows as dicts, all within
        `seconds` (connecting included). PQ errors are raised as pgq's exceptions."""

        calls: list[Call] = []

        async def work(call: Call) -> list[list[dict[str, Any]]]:
            calls.append(call)
            conn = self._conn
            if conn is None:
                conn = self._conn = await psycopg.AsyncConnection.connect(self._dsn, **self._kwargs)
            call.conn = conn
            try:
                results = []
                for query, params in statements:
                    cur = conn.cursor(row_factory=dict_row)
                    await cur.execute(query, params)
                    results.append(await cur.fetchall() if cur.description else [])
                return results
            except BaseException as exc:
                if not isinstance(exc, psycopg.DatabaseError) or isinstance(exc, psycopg.OperationalError):
                    self._drop(conn)
                raise
            finally:
                call.conn = None

        try:
            return await bounded(work, seconds, what)
        except psycopg.OperationalError:
            self._conn = None  # abandoned or lost: the next call connects afresh
            raise
        except asyncio.CancelledError:
            # Given up with a statement on it, the connection was abandoned: forget it now,
            # not when the work given up notices (it closes it then). A call made in between
            # (the stop unregisters right after cancelling a beat) would run on it and fail.
            on_wire = calls[0].conn if calls else None
            if on_wire is not None and on_wire is self._conn:
                self._conn = None
            raise
        except psycopg.Error as exc:
            err = translate(exc)
            if err is exc:
                raise
            raise err from exc

    def _drop(self, conn: psycopg.AsyncConnection[Any]) -> None:
        if self._conn is conn:
            self._conn = None
        if not conn.closed:
            conn.pgconn.finish()  # no round trip: the connection is already given up

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()
