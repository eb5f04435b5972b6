"""The worker's lease: the heartbeat's pace, its deadline, and its connection of its own.

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

import random
from typing import Any

import psycopg
from psycopg.rows import dict_row

from ._deadline import Call, bounded
from .dsn import tcp_defaults
from .errors import translate


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

        async def work(call: Call) -> list[list[dict[str, Any]]]:
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
