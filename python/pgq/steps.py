"""Durable steps: the handler's side of pgq.step_result and pgq.record_step (docs/steps.md);
and progress reports (pgq.progress), which go through the same runner.

The state and the rules live in SQL: a step's result is stored by the delivery that holds
the job, and read back by any later delivery, fenced per delivery like pgq.complete. This
module only calls them: `job.step(name, fn, *args)` reads the step; if it was done, returns
its stored result without calling fn; else calls fn, records its result, returns it.

Where the calls run: in a transactional handler on the handler's own connection, inside its
transaction (the step's writes and its record commit together); otherwise on the worker's
pool, each call its own transaction (the record is durable as soon as the step returns).
Jobs whose handlers take no step never reach this module.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .job import Job

_READ = (
    "SELECT pgq.step_result(worker_id => %s::uuid, job_id => %s::bigint, delivery => %s::int,"
    " name => %s::text)::text AS r"
)
_RECORD = (
    "SELECT pgq.record_step(worker_id => %s::uuid, job_id => %s::bigint, delivery => %s::int,"
    " name => %s::text, result => %s::text::jsonb) AS r"
)

_PROGRESS = (
    "SELECT pgq.progress(worker_id => %s::uuid, job_id => %s::bigint, delivery => %s::int,"
    " value => %s::numeric, note => %s::text) AS r"
)

_DEPENDENCIES = "SELECT d.id, d.result::text AS result FROM pgq.dependency_results(job_id => %s::bigint) AS d"

# The worker's statement runner (Worker._sql: one statement on a pooled connection, rows as
# dicts).
Sql = Callable[..., Awaitable[list[dict[str, Any]]]]


class DeliveryLost(Exception):
    """This delivery no longer holds its job (its worker was presumed dead, or the job ran
    past its timeout, and the job was delivered again): its steps can be neither read nor
    recorded. The handler stops here; the worker's settlement of the delivery is fenced too,
    so the delivery that holds the job now decides its fate."""


class StepRunner:
    """The worker's calls of the step functions, from its event loop or a handler thread."""

    def __init__(self, sql: Sql, loop: asyncio.AbstractEventLoop) -> None:
        self._sql = sql
        self._loop = loop

    async def read(self, job: Job, name: str) -> Any:
        rows = await self._sql(_READ, (job.worker_id, job.id, job.deliveries, name))
        return _read_answer(job, name, rows[0]["r"])

    async def record(self, job: Job, name: str, text: str) -> None:
        rows = await self._sql(_RECORD, (job.worker_id, job.id, job.deliveries, name, text))
        _record_answer(job, name, rows[0]["r"])

    async def progress(self, job: Job, value: float, note: str | None) -> None:
        rows = await self._sql(_PROGRESS, (job.worker_id, job.id, job.deliveries, value, note))
        if rows[0]["r"] is None:
            raise DeliveryLost(f"job {job.id}: delivery {job.deliveries} no longer holds the job (progress)")

    async def dependency_results(self, job: Job) -> dict[int, Any]:
        rows = await self._sql(_DEPENDENCIES, (job.id,))
        return {r["id"]: None if r["result"] is None else json.loads(r["result"]) for r in rows}

    def read_sync(self, job: Job, name: str) -> Any:
        return asyncio.run_coroutine_threadsafe(self.read(job, name), self._loop).result()

    def record_sync(self, job: Job, name: str, text: str) -> None:
        asyncio.run_coroutine_threadsafe(self.record(job, name, text), self._loop).result()


_NOT_DONE = object()


def _read_answer(job: Job, name: str, answer: str | None) -> Any:
    if answer is None:
        raise DeliveryLost(f"job {job.id}: delivery {job.deliveries} no longer holds the job (step {name!r})")
    doc = json.loads(answer)
    return doc["result"] if doc["done"] else _NOT_DONE


def _record_answer(job: Job, name: str, recorded: bool | None) -> None:
    # FALSE (a record of the name existed) cannot happen after a read that found none, but
    # by a second step of the same name running concurrently in this handler: the first
    # record stands, as the docs say.
    if recorded is None:
        raise DeliveryLost(f"job {job.id}: delivery {job.deliveries} no longer holds the job (step {name!r})")


def _encode(name: str, value: Any) -> tuple[str, Any]:
    """The JSON text to store and the value every delivery returns: the result as JSON gives
    it back (a tuple comes back a list), so the first run and a resumed one see the same."""
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"step {name!r}: its result must be JSON-serializable: {exc}") from exc
    return text, json.loads(text)


def _check(name: Any, fn: Any) -> None:
    if not isinstance(name, str) or not 1 <= len(name) <= 200:
        raise ValueError(f"job.step: name must be a string of 1 to 200 characters, not {name!r}")
    if not callable(fn):
        raise TypeError(f"job.step: fn must be callable, not {fn!r}")


def step(job: Job, name: str, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """Job.step: in a sync handler (a thread without an event loop) the step's result; in an
    async one, an awaitable of it."""
    _check(name, fn)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _step_sync(job, name, fn, args)
    return _step_async(job, name, fn, args)


def attach(job: Job, runner: StepRunner) -> None:
    """Give a delivered job the worker's step runner (the worker does, as each run starts)."""
    job.__dict__["_steps"] = runner


def in_transaction(job: Job, conn: Any) -> None:
    """A transactional handler's steps read and record in its transaction (`conn`)."""
    job.__dict__["_conn"] = conn


def _runner(job: Job) -> StepRunner:
    runner: StepRunner | None = job.__dict__.get("_steps")
    if runner is None:
        raise RuntimeError("job.step needs a job delivered by a pgq worker (pgq.Worker or pgq.testing)")
    return runner


def _step_sync(job: Job, name: str, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    conn = job.__dict__.get("_conn")  # a transactional handler's connection, in its transaction
    if conn is not None:
        answer = conn.execute(_READ, (job.worker_id, job.id, job.deliveries, name)).fetchone()[0]
        stored = _read_answer(job, name, answer)
    else:
        stored = _runner(job).read_sync(job, name)
    if stored is not _NOT_DONE:
        return stored
    value = fn(*args)
    if inspect.isawaitable(value):
        value = asyncio.run(_awaited(value))
    text, value = _encode(name, value)
    if conn is not None:
        params = (job.worker_id, job.id, job.deliveries, name, text)
        _record_answer(job, name, conn.execute(_RECORD, params).fetchone()[0])
    else:
        _runner(job).record_sync(job, name, text)
    return value


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


async def _step_async(job: Job, name: str, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    runner = _runner(job)
    stored = await runner.read(job, name)
    if stored is not _NOT_DONE:
        return stored
    value = fn(*args)
    if inspect.isawaitable(value):
        value = await value
    text, value = _encode(name, value)
    await runner.record(job, name, text)
    return value


def progress(job: Job, value: float, note: str | None) -> Any:
    """Job.progress: in a sync handler, reported when it returns; in an async one, an
    awaitable. Always on the worker's pool, never in a transactional handler's transaction
    (its report would be seen only at commit)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not 0 <= value <= 1e15 or value != value:
        raise ValueError(f"job.progress: value must be a fraction 0-1 or a count >= 0, not {value!r}")
    if note is not None and (not isinstance(note, str) or len(note) > 1000):
        raise ValueError("job.progress: note must be a string of at most 1000 characters")
    runner = _runner(job)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run_coroutine_threadsafe(runner.progress(job, value, note), runner._loop).result()
        return None
    return runner.progress(job, value, note)


def dependency_results(job: Job) -> Any:
    """Job.dependency_results: {id: result} of the jobs it depends on; awaitable in an
    async handler."""
    runner = _runner(job)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run_coroutine_threadsafe(runner.dependency_results(job), runner._loop).result()
    return runner.dependency_results(job)
