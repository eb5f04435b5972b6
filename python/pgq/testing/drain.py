"""drain(worker): run a worker's queued jobs in this process until none is due.

The jobs run through the worker's own code: it registers, claims with pgq.claim, runs its
handlers (async on the loop, `def` in threads, transactional ones in their transaction),
completes, fails and snoozes through pgq's SQL and unregisters at the end. So retries,
backoff, dead jobs, dependencies and limits behave as in production; only the loop that
waits for NOTIFY is replaced by "claim again until the claim comes back empty".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .._runs import Handler, Key
from ..dsn import resolve_dsn
from ..job import Job, Snooze
from ..worker import Worker, run_on

# Makes every queued job of the entrypoints due now (run_future=True): retries waiting for
# their backoff, snoozed jobs and jobs enqueued with a later run_at.
_MAKE_DUE = (
    "UPDATE pgq._jobs SET run_at = now()"
    " WHERE entrypoint = ANY(%s::text[]) AND status = 'queued' AND run_at > now()"
)
_LEFT = (
    "SELECT count(*) FILTER (WHERE status = 'queued') AS queued,"
    " count(*) FILTER (WHERE status = 'queued' AND run_at <= now()) AS due,"
    " count(*) FILTER (WHERE status = 'waiting') AS waiting"
    " FROM pgq._jobs WHERE entrypoint = ANY(%s::text[])"
)


@dataclass(frozen=True)
class DrainedRun:
    """One delivery that drain ran.

    outcome: succeeded, failed, snoozed or canceled. error: what pgq.fail recorded (the
    traceback); exception: what the handler raised, if it raised.
    """

    job: Job
    outcome: str
    seconds: float
    error: str | None = None
    exception: BaseException | None = None


@dataclass
class DrainResult:
    """What drain did. runs: every delivery it ran, in the order they finished settling;
    dead: ids of the jobs that ran and were dead at the end; queued, waiting: jobs of the
    worker's entrypoints still queued (not due, paused or held back by a limit) or waiting
    on a dependency when drain stopped."""

    runs: list[DrainedRun] = field(default_factory=list)
    dead: list[int] = field(default_factory=list)
    queued: int = 0
    waiting: int = 0

    @property
    def counts(self) -> dict[str, int]:
        """Runs per outcome, e.g. {"succeeded": 3, "failed": 1}."""
        return dict(Counter(run.outcome for run in self.runs))

    @property
    def succeeded(self) -> int:
        return self.counts.get("succeeded", 0)

    @property
    def failed(self) -> int:
        return self.counts.get("failed", 0)

    @property
    def snoozed(self) -> int:
        return self.counts.get("snoozed", 0)

    @property
    def failures(self) -> list[DrainedRun]:
        return [run for run in self.runs if run.outcome == "failed"]

    def __str__(self) -> str:
        counts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(self.counts.items())) or "no jobs"
        return f"drained {len(self.runs)} runs: {counts}; {len(self.dead)} dead, {self.queued} still queued"


class DrainError(AssertionError):
    """drain stopped on something a test should hear about: a handler failed (with
    raise_errors=True), max_jobs was reached, or the timeout passed. `result` says what ran."""

    def __init__(self, message: str, result: DrainResult) -> None:
        super().__init__(message)
        self.result = result


def drain(
    worker: Worker,
    *,
    dsn: str | None = None,
    max_jobs: int = 1000,
    timeout: float = 60.0,
    run_future: bool = False,
    raise_errors: bool = True,
    concurrency: int = 1,
    event_loop: str = "auto",
) -> DrainResult:
    """Run the queued, due jobs of the worker's entrypoints until none is left, jobs their
    handlers enqueue included; return what ran (a DrainResult).

    dsn: the database (default: the worker's own DSN, then $PGQ_DSN), as a role that may
    read pgq's tables (drain looks at what is left) and, for run_future, write them.
    max_jobs: the most deliveries to run; more than that raises DrainError (a job that
    keeps enqueuing itself).
    timeout: seconds for the whole drain; past it, running handlers are stopped and
    DrainError is raised. run_future: also run jobs not due yet (a later run_at, a retry
    waiting for its backoff, a snoozed job) by making them due, so a failing job runs
    through all its attempts; without it they stay queued (`result.queued`).
    raise_errors: raise DrainError after draining if a handler failed (its exception is the
    cause). concurrency: handlers run at once (1: one by one, in claim order). event_loop:
    as Worker.run's, uvloop by default (the loop `pgq worker` runs handlers on).

    From async code (a running event loop), use `await drain_async(...)`.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            "drain() cannot run inside an event loop: use `await pgq.testing.drain_async(...)`"
        )
    return run_on(
        event_loop,
        lambda: drain_async(
            worker,
            dsn=dsn,
            max_jobs=max_jobs,
            timeout=timeout,
            run_future=run_future,
            raise_errors=raise_errors,
            concurrency=concurrency,
        ),
    )


async def drain_async(
    worker: Worker,
    *,
    dsn: str | None = None,
    max_jobs: int = 1000,
    timeout: float = 60.0,
    run_future: bool = False,
    raise_errors: bool = True,
    concurrency: int = 1,
) -> DrainResult:
    """drain(), awaitable: for async tests. Same arguments."""
    if not worker.entrypoints:
        raise ValueError("the worker has no handlers: register one with @worker.entrypoint(name)")
    if max_jobs < 1 or concurrency < 1:
        raise ValueError("max_jobs and concurrency must be at least 1")
    database = resolve_dsn(dsn or worker.dsn)
    result = DrainResult()
    exceptions: dict[Key, BaseException] = {}
    with _instrumented(worker, result, exceptions):
        async with worker._session(database):
            await worker._register()
            heartbeat = asyncio.create_task(worker._supervised("heartbeat", worker._heartbeat_loop))
            try:
                await asyncio.wait_for(
                    _run_until_empty(worker, result, max_jobs, run_future, concurrency), timeout
                )
            except asyncio.TimeoutError:
                await _stop(worker)
                raise DrainError(f"drain: still running after {timeout} s; {result}", result) from None
            finally:
                heartbeat.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await heartbeat
                await worker._shutdown()
            await _look_back(worker, result)
    if raise_errors and result.failures:
        first = next((run.exception for run in result.failures if run.exception is not None), None)
        raise DrainError(_failures(result), result) from first
    return result


async def _run_until_empty(
    worker: Worker, result: DrainResult, max_jobs: int, run_future: bool, concurrency: int
) -> None:
    started = 0
    while True:
        if run_future:
            await worker._sql(_MAKE_DUE, (worker.entrypoints,))
        if started >= max_jobs:
            # One more claim would tell whether something is left: look without claiming.
            left = await worker._sql(_LEFT, (worker.entrypoints,))
            if left[0]["due"]:
                raise DrainError(
                    f"drain: max_jobs={max_jobs} deliveries ran and jobs are still due"
                    f" (a job that enqueues itself, or one that keeps failing?); {result}",
                    result,
                )
            return
        runs = await worker._claim(min(concurrency, max_jobs - started))
        if not runs:
            return
        started += len(runs)
        # asyncio.wait, not gather: the timeout must not cancel the handlers (that fails
        # their jobs); _stop stops them as a shutdown does, which gives the jobs back.
        await asyncio.wait([run.task for run in runs if run.task is not None])
        # Successes are completed in batches, as in production: complete them now, before
        # the next claim, so jobs that depend on them are released.
        await worker._complete_pending()


async def _stop(worker: Worker) -> None:
    """The timeout passed: stop the handlers; unregistering gives their jobs back."""
    worker._begin_stop()
    tasks = [run.task for run in worker._running.values() if run.task is not None]
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=1.0)


async def _look_back(worker: Worker, result: DrainResult) -> None:
    ran = sorted({run.job.id for run in result.runs})
    rows = await worker._sql(
        "SELECT id FROM pgq._jobs WHERE id = ANY(%s::bigint[]) AND status = 'dead' ORDER BY id", (ran,)
    )
    result.dead = [row["id"] for row in rows]
    left = (await worker._sql(_LEFT, (worker.entrypoints,)))[0]
    result.queued, result.waiting = left["queued"], left["waiting"]


@contextlib.contextmanager
def _instrumented(
    worker: Worker, result: DrainResult, exceptions: dict[Key, BaseException]
) -> Iterator[None]:
    """For the drain's length: handlers that remember what they raise, and an observer
    that records every settled delivery."""

    def observe(job: Job, outcome: str, seconds: float) -> None:
        key = (job.id, job.deliveries)
        run = worker._running.get(key)  # a failure is told while its run still holds its slot
        error = run.error if run is not None else None
        result.runs.append(DrainedRun(job, outcome, seconds, error, exceptions.get(key)))

    handlers = worker._handlers
    worker._handlers = {name: _remembering(h, exceptions) for name, h in handlers.items()}
    worker.observers.append(observe)
    try:
        yield
    finally:
        worker._handlers = handlers
        worker.observers.remove(observe)


def _remembering(handler: Handler, exceptions: dict[Key, BaseException]) -> Handler:
    fn = handler.fn

    def keep(job: Job, exc: BaseException) -> None:
        if not isinstance(exc, Snooze):
            exceptions[(job.id, job.deliveries)] = exc

    if handler.is_async:

        async def run_async(job: Job) -> Any:
            try:
                return await fn(job)
            except Exception as exc:
                keep(job, exc)
                raise

        return Handler(run_async, True, False)

    def run(job: Job, *args: Any) -> Any:
        try:
            return fn(job, *args)
        except Exception as exc:
            keep(job, exc)
            raise

    return Handler(run, False, handler.transactional)


def _failures(result: DrainResult) -> str:
    lines = [f"drain: {len(result.failures)} handler runs failed ({result}):"]
    for run in result.failures:
        job = run.job
        if run.exception is not None:
            what = f"{type(run.exception).__name__}: {run.exception}"
        else:
            what = (run.error or "").strip().splitlines()[-1:] or ["?"]
            what = what[0]
        lines.append(f"  job {job.id} ({job.entrypoint}) attempt {job.attempt}: {what}")
    lines.append("pass raise_errors=False to drain to expect failures")
    return "\n".join(lines)
