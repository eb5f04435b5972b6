"""What the worker tracks per delivery, and how it runs one handler.

A delivery (a job id and the `deliveries` value its claim returned) is the unit: the same
job can be claimed again by this very process (re-queued after a timeout, or after a
re-registration) while its first run still executes, so nothing is keyed by job id alone.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import re
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from .job import Job

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

    @property
    def key(self) -> Key:
        return (self.job.id, self.job.deliveries)


class Timeout(Exception):
    """The handler ran past its timeout."""


class NotJson(Exception):
    """The handler returned a value that cannot be stored as the job's result."""


async def within(run: Run, coro: Any, seconds: float) -> Any:
    """Await the handler's coroutine in the run's task; raise Timeout once it ran `seconds`.

    One timer per job, which cancels the task (asyncio.timeout does the same with more
    bookkeeping, a measurable share of a no-op job's cost). As there, a cancellation from
    elsewhere (shutdown, pgq.cancel) that meets the timer stays a cancellation."""
    task = asyncio.current_task()
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
