"""The worker's protocol: every statement the worker sends, its retries and error mapping.

What it is for: the one module that sends the worker's SQL (claim, complete, fail, snooze,
heartbeat, register, settings, unregister, sweep, the NOTIFY probe; their text is
statements.py's), the pool and the heartbeat's connection they go through, running a
statement until it succeeds (`persist`), and translating PQ errors into pgq's exceptions.
A lost connection marks the ledger unsure: a failover may have lost what we committed.
What it must never do: decide a job's fate (that is pgq's SQL), or hold any job.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import PoolTimeout

from .. import pools
from .._deadline import Call, DeadlineExceeded, bounded
from .._wire import JsonbLoader
from ..dsn import tcp_defaults
from ..errors import InvalidArgument, PgqError, SchemaError, UnknownWorker, WorkerGone, translate
from .connection import LeaseConnection
from .ledger import Ledger
from .statements import (
    CLAIM,
    COMPLETE,
    CONFIRM_CANCEL,
    FAIL,
    HEARTBEAT,
    REGISTER,
    SETTINGS,
    SNOOZE,
    UNREGISTER,
)
from .wakeups import Wakeups

log = logging.getLogger("pgq.worker")

# A lost connection, and the read-only window of a failover: both pass.
TRANSIENT = (psycopg.OperationalError, PoolTimeout, psycopg.errors.ReadOnlySqlTransaction)
# The longest a claim waits for a pooled connection (the loop then checks for SIGTERM).
CLAIM_WAIT = 2.0
# Connections of a worker's pool: claims, heartbeats, settlements, sweeps.
POOL_SIZE = 4


class Stopping(Exception):
    """The worker was asked to stop while it waited for the database."""


def reason(exc: BaseException) -> str:
    """Why a call failed, in one line, never empty (a timeout's own text is)."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _array(numbers: list[int]) -> str:
    """A PostgreSQL array literal of integers: for batches of ids, several times cheaper
    than letting psycopg adapt a list element by element (the server casts it)."""
    return "{" + ",".join(map(str, numbers)) + "}"


async def _configure(conn: psycopg.AsyncConnection[Any]) -> None:
    conn.adapters.register_loader("jsonb", JsonbLoader)


class Pace:
    """The settings the worker paces itself by (pgq.settings of its entrypoints)."""

    def __init__(self, poll_interval: float) -> None:
        self.poll_interval = poll_interval
        self.lease = 30.0
        self.poll = poll_interval
        # Whether an entrypoint has a concurrency limit (its own or per key): a job that
        # ends may free a slot there. Until the settings are read, assume so.
        self.limited = True

    def apply(self, rows: list[dict[str, Any]]) -> None:
        self.lease = rows[0]["lease"]
        self.limited = bool(rows[0]["limited"])
        # A rate-limited entrypoint earns a token every 1/rate seconds and no NOTIFY says so:
        # poll about that often (each claim then takes what the bucket holds).
        rate = rows[0]["rate"]
        self.poll = min(self.poll_interval, max(1 / rate, 0.01)) if rate else self.poll_interval


class Protocol:
    """The statements of one run of a worker, on its pool and its heartbeat's connection."""

    def __init__(self, name: str, dsn: str, ledger: Ledger, wakeups: Wakeups, pace: Pace) -> None:
        self._ledger = ledger
        self._wakeups = wakeups
        self.pace = pace
        # No server-side prepared statements: they break behind PgBouncer in transaction
        # mode, and every statement here is a call of a function whose plans are cached.
        # UTF-8 whatever the role, database or PGCLIENTENCODING say: jsonb arrives in the
        # client encoding, and Python's JSON decoding (psycopg's, and _wire's) reads UTF-8.
        conn_kwargs = {
            "autocommit": True,
            "prepare_threshold": None,
            "client_encoding": "utf8",
            **tcp_defaults(dsn),
        }
        # pgq.pools: after an outage the pool connects again within half a second of the
        # server accepting, logs the server's reason once per change, and lends no connection
        # that died while idle (a restart would otherwise fail a claim, a heartbeat or a
        # completion per pooled connection). Connections found dead so mark the ledger
        # unsure, as a failed call does: a failover may have lost what we committed.
        self._link = pools.Link(f"worker {name}", log)
        self._pool = pools.AsyncPool(
            dsn,
            link=self._link,
            lost=ledger.unsure,
            min_size=2,
            max_size=POOL_SIZE,
            open=False,
            kwargs=conn_kwargs,
            configure=_configure,
        )
        self._lease_conn = LeaseConnection(dsn)  # the heartbeat's own
        # Failures and snoozes may take two of the connections, completions (one batch at a
        # time) a third: a settlement can wait for a row lock for as long as another
        # transaction holds the job (an application's pgq.cancel left open), and the claims
        # must still get through (the heartbeat has a connection of its own: pgq.worker.lease);
        # nor may failures stuck so hold up the completions.
        self._settling = asyncio.Semaphore(POOL_SIZE - 2)

    async def open(self) -> None:
        await self._pool.open(wait=False)

    async def close(self) -> None:
        await self._lease_conn.close()
        await self._pool.close(timeout=1.0)

    def refused(self, exc: BaseException) -> bool:
        """Whether a call failed for want of a connection while the database refuses them:
        the pool has said why (each reason once per outage), so the call's own line would
        only repeat it every few seconds."""
        return isinstance(exc, PoolTimeout) and self._link.reason is not None

    async def sql(
        self,
        query: str,
        params: tuple[Any, ...] = (),
        *,
        wait: float | None = None,
        tuples: bool = False,
    ) -> list[Any]:
        """One statement on a pooled connection; `wait` bounds the wait for a connection.
        Rows are dicts, or plain tuples in binary format (cheaper: claims) when `tuples`.
        When the caller is cancelled (shutdown), the statement is abandoned at once
        (pgq._deadline), not waited for as psycopg would (up to 10 s more)."""

        async def work(call: Call) -> list[Any]:
            async with self._pool.connection(timeout=wait) as conn:
                call.conn = conn
                try:
                    cur = conn.cursor(binary=True) if tuples else conn.cursor(row_factory=dict_row)
                    await cur.execute(query, params)
                    return await cur.fetchall() if cur.description else []
                finally:
                    call.conn = None

        try:
            return await bounded(work, None, query.split("(", 1)[0])
        except psycopg.Error as exc:
            if isinstance(exc, TRANSIENT):
                self._ledger.unsure()  # a failover may have lost what we committed
            err = translate(exc)
            if err is exc:
                raise
            raise err from exc

    async def persist(
        self, what: str, query: str, params: tuple[Any, ...] = (), *, startup: bool = False
    ) -> list[dict[str, Any]]:
        """Run a statement until it succeeds: through a lost connection, a failover's
        read-only window or any other error but a data error (its arguments), backing off and
        saying so. Gives up (raises Stopping) on SIGTERM while registering (startup), or
        after the final flush; while registering, an error other than a lost connection is
        raised at once."""
        delay = 0.1
        while True:
            try:
                # While registering, a database that is away must not hide SIGTERM for long.
                return await self.sql(query, params, wait=CLAIM_WAIT if startup else None)
            except (InvalidArgument, UnknownWorker, WorkerGone, psycopg.DataError):
                raise  # the same statement would fail the same way: retrying would jam
            except (PgqError, psycopg.Error, PoolTimeout) as exc:
                transient = isinstance(exc, TRANSIENT)
                if startup and not transient:  # not a passing fault: say so at once
                    if isinstance(exc, (psycopg.errors.UndefinedFunction, psycopg.errors.InvalidSchemaName)):
                        raise SchemaError("pgq is not installed in this database; run `pgq install`") from exc
                    raise
                log.log(
                    logging.WARNING if transient else logging.ERROR,
                    "%s failed (%s); retrying in %.1f s",
                    what,
                    str(exc).strip(),
                    delay,
                )
            if self._wakeups.abandon or (startup and self._wakeups.stopping.is_set()):
                raise Stopping()
            if startup:
                await self._wakeups.sleep(delay)  # SIGTERM ends the wait at once
            else:
                await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    # --- the statements -----------------------------------------------------------------

    async def register(self, name: str, entrypoints: list[str]) -> UUID:
        rows = await self.persist("register", REGISTER, (name, entrypoints), startup=True)
        return rows[0]["id"]  # type: ignore[no-any-return]

    async def read_settings(self, entrypoints: list[str], startup: bool = False) -> None:
        """Read the settings the worker paces itself by. While registering (startup) through
        a lost connection too: a worker that just registered again must not die of it."""
        if startup:
            rows = await self.persist("read settings", SETTINGS, (entrypoints,), startup=True)
        else:
            rows = await self.sql(SETTINGS, (entrypoints,))
        self.pace.apply(rows)

    async def claim(self, worker_id: UUID | None, entrypoints: list[str], wanted: int) -> list[Any]:
        """Claim rows (tuples in CLAIM_FIELDS' order). While the database is away, waiting
        for a connection must not keep SIGTERM from being noticed for long."""
        return await self.sql(CLAIM, (worker_id, entrypoints, wanted), wait=CLAIM_WAIT, tuples=True)

    async def complete(
        self, worker_id: UUID, ids: list[int], results: list[Any] | None, deliveries: list[int]
    ) -> list[int]:
        """Complete a batch (until it succeeds); returns the ids completed."""
        if results is not None:
            results = [None if result is None else Jsonb(result) for result in results]
        rows = await self.persist("complete", COMPLETE, (worker_id, _array(ids), results, _array(deliveries)))
        return rows[0]["ids"]  # type: ignore[no-any-return]

    async def fail(self, worker_id: UUID, job_id: int, error: str, delivery: int) -> str | None:
        """pgq.fail of one delivery (until it succeeds); returns the job's status."""
        async with self._settling:
            rows = await self.persist(f"fail job {job_id}", FAIL, (worker_id, job_id, error, delivery))
        return rows[0]["status"]  # type: ignore[no-any-return]

    async def confirm_cancel(self, worker_id: UUID, job_id: int, delivery: int) -> str | None:
        """pgq.confirm_cancel of one delivery whose cancellation was requested (until it
        succeeds); returns 'canceled', or None when the delivery is no longer held."""
        async with self._settling:
            rows = await self.persist(f"cancel job {job_id}", CONFIRM_CANCEL, (worker_id, job_id, delivery))
        return rows[0]["status"]  # type: ignore[no-any-return]

    async def snooze(self, worker_id: UUID, job_id: int, seconds: float, delivery: int) -> str | None:
        async with self._settling:
            rows = await self.persist(f"snooze job {job_id}", SNOOZE, (worker_id, job_id, seconds, delivery))
        return rows[0]["status"]  # type: ignore[no-any-return]

    async def sweep(self) -> None:
        """Maintenance when pg_cron is absent (pruning), in its own transaction: it can
        neither slow nor fail a heartbeat."""
        try:
            await self.sql("SELECT pgq.sweep()")
        except (PgqError, psycopg.Error, PoolTimeout) as exc:
            log.warning("sweep failed: %s", exc)

    async def notify(self, payload: str) -> None:
        await self.persist("notify probe", "SELECT pg_notify('pgq', %s)", (payload,))

    async def heartbeat(
        self, worker_id: UUID | None, running: list[int] | None, entrypoints: list[str], seconds: float
    ) -> list[dict[str, Any]]:
        """One heartbeat, then the settings, on the heartbeat's own connection within
        `seconds`; returns the rows of the jobs to cancel."""
        rows, current = await self._lease_conn.execute(
            [(HEARTBEAT, (worker_id, running)), (SETTINGS, (entrypoints,))], seconds, "heartbeat"
        )
        self.pace.apply(current)
        return rows

    async def unregister(self, worker_id: UUID, seconds: float) -> int:
        """pgq.unregister_worker within `seconds`; returns the jobs it released. Once more
        on a fresh connection when the heartbeat's was found lost (ended while idle between
        beats: a restart, idle_session_timeout): the call is idempotent."""
        end = asyncio.get_running_loop().time() + seconds
        call = [(UNREGISTER, (worker_id,))]
        try:
            rows = await self._lease_conn.execute(call, seconds, "unregister")
        except DeadlineExceeded:
            raise
        except psycopg.OperationalError:
            left = end - asyncio.get_running_loop().time()
            if left <= 0:
                raise
            rows = await self._lease_conn.execute(call, left, "unregister")
        return rows[0][0]["released"] if rows and rows[0] else 0
