"""drain(worker): run a worker's queued jobs in this process until none is due.

The jobs run through the worker's own parts (pgq.worker.session): it registers, claims
with pgq.claim (the claimer's one-shot claim), runs its handlers through the executor
(async on the loop, `def` in threads, transactional ones in their transaction), settles
through the settler (completes, fails and snoozes with pgq's SQL; successes flushed after
each round instead of by the settler's loop) and unregisters at the end. So retries,
backoff, dead jobs, dependencies and limits behave as in production; only the loop that
waits for NOTIFY is replaced by "claim again until the claim comes back empty".
It uses only the parts' public names: a change inside the worker does not break it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from dataclasses import dataclass, field

from ..dsn import resolve_dsn
from ..job import Job
from ..worker import Worker, run_on
from ..worker.session import Session

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
    async with worker.session(database) as session:
        # Every settled delivery, with what its handler raised (the executor keeps it).
        session.settler.watch(
            lambda run, outcome, seconds: result.runs.append(
                DrainedRun(run.job, outcome, seconds, run.error, run.exception)
            )
        )
        await session.register()
        heartbeat = asyncio.create_task(session.supervised("heartbeat", session.heartbeat.run))
        try:
            await asyncio.wait_for(
                _run_until_empty(session, worker, result, max_jobs, run_future, concurrency), timeout
            )
        except asyncio.TimeoutError:
            await _stop(session)
            raise DrainError(f"drain: still running after {timeout} s; {result}", result) from None
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
            await session.shutdown()
        await _look_back(session, worker, result)
    if raise_errors and result.failures:
        first = next((run.exception for run in result.failures if run.exception is not None), None)
        raise DrainError(_failures(result), result) from first
    return result


async def _run_until_empty(
    session: Session, worker: Worker, result: DrainResult, max_jobs: int, run_future: bool, concurrency: int
) -> None:
    started = 0
    sql = session.protocol.sql
    while True:
        if run_future:
            await sql(_MAKE_DUE, (worker.entrypoints,))
        if started >= max_jobs:
            # One more claim would tell whether something is left: look without claiming.
            left = await sql(_LEFT, (worker.entrypoints,))
            if left[0]["due"]:
                raise DrainError(
                    f"drain: max_jobs={max_jobs} deliveries ran and jobs are still due"
                    f" (a job that enqueues itself, or one that keeps failing?); {result}",
                    result,
                )
            return
        runs = await session.claimer.claim_once(min(concurrency, max_jobs - started))
        if not runs:
            return
        started += len(runs)
        # asyncio.wait, not gather: the timeout must not cancel the handlers (that fails
        # their jobs); _stop stops them as a shutdown does, which gives the jobs back.
        await asyncio.wait([run.task for run in runs if run.task is not None])
        # Successes are completed in batches, as in production: complete them now, before
        # the next claim, so jobs that depend on them are released.
        await session.settler.flush()


async def _stop(session: Session) -> None:
    """The timeout passed: stop the handlers; unregistering gives their jobs back."""
    session.stop()
    tasks = [run.task for run in session.claimer.running.values() if run.task is not None]
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=1.0)


async def _look_back(session: Session, worker: Worker, result: DrainResult) -> None:
    ran = sorted({run.job.id for run in result.runs})
    rows = await session.protocol.sql(
        "SELECT id FROM pgq._jobs WHERE id = ANY(%s::bigint[]) AND status = 'dead' ORDER BY id", (ran,)
    )
    result.dead = [row["id"] for row in rows]
    left = (await session.protocol.sql(_LEFT, (worker.entrypoints,)))[0]
    result.queued, result.waiting = left["queued"], left["waiting"]


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
