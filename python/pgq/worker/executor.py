"""The executor: runs one delivery's handler and says how to settle it.

What it is for: running a handler (async on the loop, `def` in a thread, transactional in
its own transaction, which also completes the job), within the job's timeout and, when
OpenTelemetry is installed, in a consumer span; what it returns or raises becomes a
Settlement (complete, fail, snooze, cancelled, ...) that the settler carries out.
What it must never do: settle a job itself (a transactional handler's job excepted: it is
completed in the handler's transaction), or claim.

A delivery (a job id and the `deliveries` value its claim returned) is the unit: the same
job can be claimed again by this very process (re-queued after a timeout, or after a
re-registration) while its first run still executes, so nothing is keyed by job id alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import re
import sys
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from uuid import UUID

from psycopg.types.json import Jsonb

from .. import pools, steps, tracing
from .._wire import Undecodable
from ..job import Job, JobCancelled, Snooze, request_cancel

Key = tuple[int, int]


@dataclass(frozen=True)
class Handler:
    fn: Callable[..., Any]
    is_async: bool
    transactional: bool


@dataclass(eq=False)
class Run:
    """One delivery being handled. It holds a slot from claim until its handler really
    stops: a sync handler that overran its timeout keeps its thread, so it keeps its slot."""

    job: Job
    handler: Handler
    task: asyncio.Task[None] | None = None
    # A sync handler's thread, and whether it has started: the run keeps its slot until
    # the thread is done, and its timeout counts from the start.
    thread: asyncio.Future[Any] | None = None
    started: asyncio.Event | None = None
    t0: float = 0.0  # time.monotonic() when the run began
    error: str | None = None  # what pgq.fail recorded, when the run failed
    # pgq.heartbeat named it as to be canceled: it is settled with pgq.confirm_cancel (no
    # attempt spent) instead of pgq.fail.
    cancel_requested: bool = False
    exception: BaseException | None = None  # what the handler raised, if it raised

    key: Key = field(init=False)  # (job id, delivery): read several times per job

    def __post_init__(self) -> None:
        self.key = (self.job.id, self.job.deliveries)


class Settlement(NamedTuple):
    """How to settle a delivery, as the executor found it:

    complete (value: the result), completed (in the handler's transaction: nothing left to
    do), fail (error: what pgq.fail records), timeout (fail, then the slot stays taken
    while a thread goes on), snooze (value: seconds), cancelled (the run's task was
    cancelled: a shutdown's, or pgq.cancel's), fenced (a transactional handler's delivery
    was no longer ours: its writes were rolled back). A tuple: one is made per job."""

    kind: str
    value: Any = None
    error: str = ""
    seconds: float = 0.0  # how long the handler ran


class Fenced(Exception):
    """pgq.complete did not complete the job: another delivery owns it now."""


class Timeout(Exception):
    """The handler ran past its timeout."""


class NotJson(Exception):
    """The handler returned a value that cannot be stored as the job's result."""


async def within(run: Run, coro: Any, seconds: float) -> Any:
    """Await the handler's coroutine in the run's task; raise Timeout once it ran `seconds`.

    One timer per job, which cancels the task (asyncio.timeout does the same with more
    bookkeeping, a measurable share of a no-op job's cost). As there, a cancellation from
    elsewhere (shutdown, pgq.cancel) that meets the timer stays a cancellation."""
    # The task that awaits this, as Claimer._start recorded it; not yet under an eager task
    # factory (Python 3.12), whose tasks take their first step inside create_task.
    task = run.task or asyncio.current_task()
    assert task is not None
    counts = sys.version_info >= (3, 11)  # Task.cancelling()/uncancel()
    base = task.cancelling() if counts else 0
    expired = settled = False

    def expire() -> None:
        nonlocal expired
        expired = True
        task.cancel()

    timer = asyncio.get_running_loop().call_later(seconds, expire)
    try:
        return await coro
    except asyncio.CancelledError:
        if not expired:
            raise
        settled = True
        if counts and task.uncancel() > base:
            raise  # cancelled from elsewhere too
        raise Timeout() from None
    finally:
        timer.cancel()
        if expired and not settled and counts:
            task.uncancel()  # the handler swallowed the timer's cancellation


def check_result(value: Any) -> Any:
    """The handler's return value, if it can be stored as jsonb (None stores nothing).
    PostgreSQL refuses what Python's json writes for NaN and the infinities, a NUL in a
    string and a lone surrogate (a file name decoded with surrogateescape); such a result
    would fail the completion of every job in its batch, again and again."""
    if value is None:
        return None
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
        text.encode("utf-8")
    except (TypeError, ValueError) as exc:  # UnicodeEncodeError is a ValueError
        raise NotJson(f"the handler's return value is not JSON that PostgreSQL accepts: {exc}") from None
    if "\\u0000" in text and _NUL.search(text):
        raise NotJson("the handler's return value is not JSON that PostgreSQL accepts: a string holds a NUL")
    return value


# A NUL in a JSON text from json.dumps: the escape \u0000 after an even number of backslashes
# (a string's own backslash is written doubled).
_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def printable(text: str) -> str:
    """Text that PostgreSQL can store: a NUL or a lone surrogate (in an exception's message,
    from a file name, say) made a failure impossible to record, and the worker retried it
    for ever."""
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


async def call_handler(
    run: Run,
    executor: ThreadPoolExecutor,
    in_thread: Callable[[Run], Any],
) -> Any:
    """Run the handler; return its result. Raises Timeout once the handler ran longer than
    the job's timeout (counted from the moment it started, never while it waited for a
    thread); the caller settles the job then, and waits for the thread separately."""
    job, handler = run.job, run.handler
    timeout = job.timeout.total_seconds()
    if handler.is_async:
        return await within(run, handler.fn(job), timeout)
    loop = asyncio.get_running_loop()
    run.started = started = asyncio.Event()
    # The thread runs in this task's context, so the job's span (pgq.tracing) is current there.
    future = loop.run_in_executor(executor, contextvars.copy_context().run, _started, run, loop, in_thread)
    run.thread = future
    await started.wait()
    try:
        return await asyncio.wait_for(asyncio.shield(future), timeout)
    except asyncio.TimeoutError:
        raise Timeout() from None


def _started(run: Run, loop: asyncio.AbstractEventLoop, in_thread: Callable[[Run], Any]) -> Any:
    assert run.started is not None
    loop.call_soon_threadsafe(run.started.set)
    return in_thread(run)


# A handler runs in a consumer span when OpenTelemetry is installed (pgq.tracing).
_NO_SPAN = contextlib.nullcontext()
log = logging.getLogger("pgq.worker")


class Executor:
    """Runs the handlers of one run of a worker."""

    def __init__(
        self,
        threads: ThreadPoolExecutor,
        sync_pool: pools.Pool | None,
        worker_id: Callable[[], UUID | None],
        complete_sql: str,
    ) -> None:
        self._threads = threads
        self._sync_pool = sync_pool  # transactional handlers' connections
        self._worker_id = worker_id
        self._complete_sql = complete_sql
        self.spans = False  # whether handlers run in OpenTelemetry spans (pgq.tracing)

    def check_spans(self) -> None:
        """Per claimed batch: it reads the environment."""
        self.spans = tracing.enabled()

    async def execute(self, run: Run) -> Settlement:
        job = run.job
        run.t0 = started = time.monotonic()
        try:
            if type(job.payload) is Undecodable or type(job.headers) is Undecodable:
                what = "payload" if type(job.payload) is Undecodable else "headers"
                error = getattr(job, what).error
                raise NotJson(f"the job's {what} is JSON that Python cannot decode: {error}")
            with tracing.job_span(job) if self.spans else _NO_SPAN:
                result = await call_handler(run, self._threads, self._in_thread)
            if run.handler.transactional:
                return Settlement("completed", seconds=time.monotonic() - started)
            if job.cancelled and self._worker_id() == job.worker_id:
                return Settlement(
                    "fail", error="canceled: the handler returned after cancellation was requested"
                )
            return Settlement("complete", check_result(result), seconds=time.monotonic() - started)
        except Timeout:
            request_cancel(job)
            return Settlement("timeout", error=f"timeout: ran longer than {job.timeout}")
        except asyncio.CancelledError:
            return Settlement("cancelled")
        except Fenced:
            return Settlement("fenced")
        except NotJson as exc:
            return Settlement("fail", error=str(exc))
        except Snooze as exc:
            return Settlement("snooze", exc.seconds)
        except Exception as exc:  # JobCancelled included: pgq.fail cancels a job whose cancel was requested
            run.exception = exc
            return Settlement("fail", error=traceback.format_exc())

    async def outlive(self, run: Run) -> None:
        """After a timeout's failure: a sync handler goes on in its thread, and its slot
        stays taken until it stops."""
        if run.thread is not None:
            log.warning("job %d (%s): the handler goes on past its timeout", run.job.id, run.job.entrypoint)
            with contextlib.suppress(BaseException):
                await asyncio.shield(run.thread)

    def _in_thread(self, run: Run) -> Any:
        # A delivery given up before its handler began (the worker was reaped and registered
        # again, or the job was canceled) is not started at all: another delivery may run.
        job = run.job
        if job.cancelled:
            raise JobCancelled()
        if not run.handler.transactional:
            return run.handler.fn(job)
        assert self._sync_pool is not None
        with self._sync_pool.connection() as conn, conn.transaction():
            if job.cancelled:  # it waited for a connection (a restart) meanwhile
                raise JobCancelled()
            steps.in_transaction(job, conn)  # Job.step records in this transaction
            result = check_result(run.handler.fn(job, conn))
            done = conn.execute(
                self._complete_sql,
                (job.worker_id, [job.id], [None if result is None else Jsonb(result)], [job.deliveries]),
            ).fetchall()
            if not done:
                raise Fenced()
        return result
