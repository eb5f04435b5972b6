"""pgq.AsyncClient: pgq.Client's methods, awaitable, on psycopg's async pool.

For asyncio code (FastAPI, aiohttp):

    async with pgq.AsyncClient(dsn) as client:
        job_id = await client.enqueue("send_email", {"to": "a@example.com"})
        outcome = await client.wait(job_id, timeout=30)

Every method sends the same SQL as its pgq.Client twin (pgq.queries) and has the same
arguments, errors and `conn=` (a psycopg AsyncConnection, to join your transaction).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from types import TracebackType
from typing import Any, TypeAlias

import psycopg
from psycopg import sql
from psycopg.rows import class_row

from . import batches, pools
from . import queries as q
from .client import RECHECK_SECONDS, Client
from .dsn import resolve_dsn
from .errors import PgqError, UnknownJob
from .queries import FINISHED_CHANNEL, FINISHED_STATUSES, Call
from .rows import (
    DependencyResult,
    Enqueued,
    JobResult,
    JobRow,
    OutcomeRow,
    QueueRow,
    Reason,
    Rerun,
    ScheduleRow,
    StatsRow,
    WorkerRow,
)

__all__ = ["AsyncClient"]

Conn: TypeAlias = "psycopg.AsyncConnection[Any] | None"
Interval: TypeAlias = "timedelta | str | None"
log = logging.getLogger("pgq.client")


class AsyncClient(batches.AsyncBatchMethods):
    """pgq.Client for asyncio. The pool opens on first use (or on `async with`); close()
    or leaving the `async with` block closes it."""

    def __init__(
        self,
        dsn: str | None = None,
        *,
        min_size: int = 1,
        max_size: int = 4,
        timeout: float = 30.0,
        prepare: bool = True,
    ) -> None:
        self.dsn = resolve_dsn(dsn)
        self._prepare = prepare
        # pgq.pools: connects again quickly, never lends a connection that died while idle.
        self._pool = pools.AsyncPool(
            self.dsn,
            link=pools.Link("pgq-async-client", log),
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            open=False,
            name="pgq-async-client",
            kwargs={"autocommit": True, "prepare_threshold": None},
            configure=self._configure,
        )
        self._lock = asyncio.Lock()
        self._state = "new"  # new -> open -> closed

    async def _open(self) -> pools.AsyncPool:
        if self._state == "open":
            return self._pool
        async with self._lock:
            if self._state == "closed":
                raise PgqError("this pgq.AsyncClient is closed")
            if self._state == "new":
                # A wrong DSN fails here with libpq's message, not as a pool timeout.
                await (await psycopg.AsyncConnection.connect(self.dsn)).close()
                await self._pool.open()
                self._state = "open"
        return self._pool

    async def _configure(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """A new pooled connection: prepared statements only straight to PostgreSQL."""
        server_pid = None
        if self._prepare:
            (server_pid,) = (await (await conn.execute(q.BACKEND_PID)).fetchall())[0]
        conn.prepare_threshold = q.pooled_threshold(self._prepare, conn.info.backend_pid, server_pid)

    async def close(self) -> None:
        """Close the pool. The client cannot be used afterwards."""
        async with self._lock:
            if self._state == "open":
                await self._pool.close()
            self._state = "closed"

    async def __aenter__(self) -> AsyncClient:
        await self._open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def _run(self, call: Call, conn: Conn = None) -> Any:
        try:
            if conn is not None:
                return await _run_on(conn, call, savepoint=True)
            progress = pools.Progress()
            try:
                return await self._run_pooled(call, progress)
            except psycopg.OperationalError as exc:
                if not pools.retry_unsent(exc, progress):
                    raise
                # Lost before the statement was sent: it cannot have committed. Once more.
                log.info("connection lost before the call was sent (%s); sending it once more", exc)
                return await self._run_pooled(call, pools.Progress())
        except psycopg.Error as exc:
            err = q.database_error(exc)
            if err is exc:
                raise
            raise err from exc

    async def _run_pooled(self, call: Call, progress: pools.Progress) -> Any:
        try:
            async with (await self._open()).connection() as pooled:
                prepare = q.pooled_prepare(call, self._prepare)
                return await _run_on(pooled, call, savepoint=False, prepare=prepare, progress=progress)
        except q.STATEMENT_LOST:
            # Not run: a pooler sits in between after all. Prepare nothing any more.
            self._prepare = False
            progress.sent = False  # that statement was not run
            async with (await self._open()).connection() as pooled:
                return await _run_on(pooled, call, savepoint=False, prepare=False, progress=progress)

    # --- producing and following jobs (see pgq.Client) -------------------------------

    async def enqueue(
        self,
        entrypoint: str,
        payload: Any = None,
        *,
        priority: int = 0,
        run_at: datetime | timedelta | None = None,
        dedupe_key: str | None = None,
        headers: dict[str, Any] | None = None,
        max_attempts: int | None = None,
        depends_on: Iterable[int] | None = None,
        concurrency_key: str | None = None,
        dedupe_scope: str | None = None,
        dedupe_window: Interval = None,
        dedupe_mode: str | None = None,
        conn: Conn = None,
    ) -> int:
        call = q.enqueue(
            entrypoint,
            payload,
            priority=priority,
            run_at=run_at,
            dedupe_key=dedupe_key,
            headers=headers,
            max_attempts=max_attempts,
            depends_on=depends_on,
            concurrency_key=concurrency_key,
            dedupe_scope=dedupe_scope,
            dedupe_window=dedupe_window,
            dedupe_mode=dedupe_mode,
        )
        return int(await self._run(call, conn))

    async def enqueue_job(
        self,
        entrypoint: str,
        payload: Any = None,
        *,
        priority: int = 0,
        run_at: datetime | timedelta | None = None,
        dedupe_key: str | None = None,
        headers: dict[str, Any] | None = None,
        max_attempts: int | None = None,
        depends_on: Iterable[int] | None = None,
        concurrency_key: str | None = None,
        dedupe_scope: str | None = None,
        dedupe_window: Interval = None,
        dedupe_mode: str | None = None,
        conn: Conn = None,
    ) -> Enqueued:
        call = q.enqueue_job(
            entrypoint,
            payload,
            priority=priority,
            run_at=run_at,
            dedupe_key=dedupe_key,
            headers=headers,
            max_attempts=max_attempts,
            depends_on=depends_on,
            concurrency_key=concurrency_key,
            dedupe_scope=dedupe_scope,
            dedupe_window=dedupe_window,
            dedupe_mode=dedupe_mode,
        )
        enqueued: Enqueued = await self._run(call, conn)
        return enqueued

    async def enqueue_batch(
        self,
        entrypoint: str,
        payloads: Iterable[Any],
        *,
        priority: int = 0,
        run_at: datetime | timedelta | None = None,
        concurrency_keys: Sequence[str | None] | None = None,
        dedupe_keys: Sequence[str | None] | None = None,
        dedupe_scope: str | None = None,
        dedupe_window: Interval = None,
        dedupe_mode: str | None = None,
        headers: dict[str, Any] | None = None,
        max_attempts: int | None = None,
        depends_on: Iterable[int] | None = None,
        conn: Conn = None,
    ) -> list[int]:
        call = q.enqueue_batch(
            entrypoint,
            payloads,
            priority=priority,
            run_at=run_at,
            concurrency_keys=concurrency_keys,
            dedupe_keys=dedupe_keys,
            dedupe_scope=dedupe_scope,
            dedupe_window=dedupe_window,
            dedupe_mode=dedupe_mode,
            headers=headers,
            max_attempts=max_attempts,
            depends_on=depends_on,
        )
        ids: list[int] = await self._run(call, conn)
        return ids

    async def job_status(self, job_id: int, *, conn: Conn = None) -> str | None:
        status: str | None = await self._run(q.job_status(job_id), conn)
        return status

    async def job(self, job_id: int, *, conn: Conn = None) -> dict[str, Any] | None:
        story: dict[str, Any] | None = await self._run(q.job(job_id), conn)
        return story

    async def explain(self, job_id: int, *, conn: Conn = None) -> list[Reason]:
        reasons: list[Reason] = await self._run(q.explain(job_id), conn)
        return reasons

    async def dependency_results(self, job_id: int, *, conn: Conn = None) -> list[DependencyResult]:
        rows: list[DependencyResult] = await self._run(q.dependency_results(job_id), conn)
        return rows

    async def result(self, job_id: int, *, conn: Conn = None) -> JobResult | None:
        return q.to_result(job_id, await self.job(job_id, conn=conn))

    async def wait(
        self,
        job_id: int,
        *,
        timeout: float | None = None,
        on_progress: Callable[[dict[str, Any]], Any] | None = None,
    ) -> JobResult:
        q.check_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True, prepare_threshold=None)
            async with conn:
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(FINISHED_CHANNEL)))
                if on_progress is not None:
                    await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(q.PROGRESS_CHANNEL)))
                status = await _run_on(conn, q.watch(job_id), savepoint=False)
                if on_progress is not None and status is not None:
                    report = q.stored_progress(await _run_on(conn, q.job(job_id), savepoint=False))
                    if report is not None:
                        await _maybe_await(on_progress(report))
                while status is not None and status not in FINISHED_STATUSES:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        raise TimeoutError(f"job {job_id} unfinished after {timeout} s (status {status})")
                    wait_for = RECHECK_SECONDS if remaining is None else min(remaining, RECHECK_SECONDS)
                    async for notify in conn.notifies(timeout=wait_for):
                        if notify.channel == q.PROGRESS_CHANNEL:
                            report = q.progress_of(job_id, notify.payload)
                            if report is not None and on_progress is not None:
                                await _maybe_await(on_progress(report))
                        elif notify.payload == str(job_id):
                            break
                    status = await _run_on(conn, q.job_status(job_id), savepoint=False)
                if status is None:
                    raise UnknownJob(f"pgq: job {job_id} is unknown (or its outcome was pruned)")
                result = q.to_result(job_id, await _run_on(conn, q.job(job_id), savepoint=False))
        except psycopg.Error as exc:
            err = q.database_error(exc)
            if err is exc:
                raise
            raise err from exc
        assert result is not None
        return result

    # --- worker protocol and administration ------------------------------------------

    async def complete(
        self,
        worker_id: Any,
        job_ids: Iterable[int],
        *,
        results: Sequence[Any] | None = None,
        deliveries: Sequence[int] | None = None,
        conn: Conn = None,
    ) -> list[int]:
        done: list[int] = await self._run(q.complete(worker_id, job_ids, results, deliveries), conn)
        return done

    async def fail(
        self,
        worker_id: Any,
        job_id: int,
        error: str,
        *,
        retry_in: timedelta | None = None,
        delivery: int | None = None,
        conn: Conn = None,
    ) -> str | None:
        outcome: str | None = await self._run(q.fail(worker_id, job_id, error, retry_in, delivery), conn)
        return outcome

    async def snooze(
        self,
        worker_id: Any,
        job_id: int,
        delay: timedelta,
        *,
        delivery: int | None = None,
        conn: Conn = None,
    ) -> str | None:
        outcome: str | None = await self._run(q.snooze(worker_id, job_id, delay, delivery), conn)
        return outcome

    async def confirm_cancel(
        self, worker_id: Any, job_id: int, *, delivery: int | None = None, conn: Conn = None
    ) -> str | None:
        outcome: str | None = await self._run(q.confirm_cancel(worker_id, job_id, delivery), conn)
        return outcome

    async def cancel(self, job_ids: int | Iterable[int], *, conn: Conn = None) -> int:
        return int(await self._run(q.cancel(job_ids), conn))

    async def retry(self, job_ids: int | Iterable[int], *, conn: Conn = None) -> int:
        return int(await self._run(q.retry(job_ids), conn))

    async def forget_steps(self, job_ids: int | Iterable[int], *, conn: Conn = None) -> int:
        return int(await self._run(q.forget_steps(job_ids), conn))

    async def rerun(self, job_ids: int | Iterable[int], *, conn: Conn = None) -> list[Rerun]:
        rows: list[Rerun] = await self._run(q.rerun(job_ids), conn)
        return rows

    async def pause(self, entrypoint: str, *, create_new: bool | None = None, conn: Conn = None) -> None:
        await self._run(q.pause(entrypoint, create_new), conn)

    async def resume(self, entrypoint: str, *, conn: Conn = None) -> None:
        await self._run(q.resume(entrypoint), conn)

    async def configure(
        self,
        entrypoint: str,
        *,
        max_attempts: int | None = None,
        backoff_base: Interval = None,
        backoff_max: Interval = None,
        lease: Interval = None,
        timeout: Interval = None,
        concurrency: int | None = None,
        rate: Decimal | float | None = None,
        retention: Interval = None,
        max_deliveries: int | None = None,
        key_concurrency: int | None = None,
        max_snoozes: int | None = None,
        create_new: bool | None = None,
        conn: Conn = None,
    ) -> None:
        call = q.configure(
            entrypoint,
            max_attempts=max_attempts,
            backoff_base=backoff_base,
            backoff_max=backoff_max,
            lease=lease,
            timeout=timeout,
            concurrency=concurrency,
            rate=rate,
            retention=retention,
            max_deliveries=max_deliveries,
            key_concurrency=key_concurrency,
            max_snoozes=max_snoozes,
            create_new=create_new,
        )
        await self._run(call, conn)

    async def reap(self, *, conn: Conn = None) -> int:
        return int(await self._run(q.reap(), conn))

    async def prune(self, *, conn: Conn = None) -> int:
        return int(await self._run(q.prune(), conn))

    async def schedule(
        self, name: str, cron: str, entrypoint: str, payload: Any = None, *, conn: Conn = None
    ) -> datetime:
        next_run: datetime = await self._run(q.schedule(name, cron, entrypoint, payload), conn)
        return next_run

    async def unschedule(self, name: str, *, conn: Conn = None) -> bool:
        return bool(await self._run(q.unschedule(name), conn))

    async def run_schedules(self, now: datetime | None = None, *, conn: Conn = None) -> int:
        return int(await self._run(q.run_schedules(now), conn))

    # --- views -----------------------------------------------------------------------

    async def schedules(self, *, conn: Conn = None) -> list[ScheduleRow]:
        rows: list[ScheduleRow] = await self._run(q.schedules(), conn)
        return rows

    async def stats(
        self, since: timedelta | str = timedelta(minutes=5), *, conn: Conn = None
    ) -> list[StatsRow]:
        rows: list[StatsRow] = await self._run(q.stats(since), conn)
        return rows

    async def queues(self, *, conn: Conn = None) -> list[QueueRow]:
        rows: list[QueueRow] = await self._run(q.queues(), conn)
        return rows

    async def workers(self, *, conn: Conn = None) -> list[WorkerRow]:
        rows: list[WorkerRow] = await self._run(q.workers(), conn)
        return rows

    async def jobs(
        self, entrypoint: str | None = None, status: str | None = None, limit: int = 100, *, conn: Conn = None
    ) -> list[JobRow]:
        rows: list[JobRow] = await self._run(q.jobs(entrypoint, status, limit), conn)
        return rows

    async def outcomes(
        self,
        entrypoint: str | None = None,
        outcome: str | None = None,
        limit: int = 100,
        *,
        conn: Conn = None,
    ) -> list[OutcomeRow]:
        rows: list[OutcomeRow] = await self._run(q.outcomes(entrypoint, outcome, limit), conn)
        return rows


# Each method's documentation is its pgq.Client twin's.
for _name, _method in list(vars(AsyncClient).items()):
    if callable(_method) and not _name.startswith("_") and _method.__doc__ is None:
        _method.__doc__ = getattr(Client, _name).__doc__


async def _run_on(
    conn: psycopg.AsyncConnection[Any],
    call: Call,
    *,
    savepoint: bool,
    prepare: bool | None = None,
    progress: pools.Progress | None = None,
) -> Any:
    for argument, text in call.intervals:
        try:
            if savepoint:
                async with conn.transaction():
                    await conn.execute(q.INTERVAL_CHECK, (text,), prepare=prepare)
            else:
                await conn.execute(q.INTERVAL_CHECK, (text,), prepare=prepare)
        except psycopg.DataError as exc:
            raise q.interval_error(argument, text, exc) from exc
    cursor = conn.cursor(row_factory=class_row(call.row_class)) if call.row_class else conn.cursor()
    async with cursor as cur:
        if progress is not None:
            progress.sent = True
        await cur.execute(call.query, call.params, prepare=prepare)
        return q.shape_rows(call, await cur.fetchall())


async def _maybe_await(value: Any) -> None:
    """on_progress may be a plain function or a coroutine function."""
    if inspect.isawaitable(value):
        await value
