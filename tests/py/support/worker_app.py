"""Handlers the worker tests run in real `pgq worker` processes.

Every run is written to a ledger file of the process (LEDGER_DIR/<pid>.log, one line
"job_id deliveries entrypoint event"), outside the queue, so tests can count runs.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time

import pgq

worker = pgq.Worker(
    concurrency=int(os.environ.get("APP_CONCURRENCY", "20")),
    poll_interval=float(os.environ.get("APP_POLL", "0.5")),
    grace_period=float(os.environ.get("APP_GRACE", "10")),
    summary_interval=float(os.environ.get("APP_SUMMARY", "10")),
)

_ledger = open(  # noqa: SIM115 - one line-buffered file for the life of the process
    os.path.join(os.environ.get("LEDGER_DIR", "."), f"{os.getpid()}.log"), "a", buffering=1
)


def record(job: pgq.Job, event: str = "run") -> None:
    _ledger.write(f"{job.id} {job.deliveries} {job.entrypoint} {event} {time.time():.6f}\n")


@worker.entrypoint("noop")
async def noop(job: pgq.Job) -> None:
    record(job)


@worker.entrypoint("gc_state")
async def gc_state(job: pgq.Job) -> None:
    """How `pgq worker` left the garbage collector: young threshold, objects frozen."""
    record(job, f"gc:{gc.get_threshold()[0]}:{gc.get_freeze_count()}")


@worker.entrypoint("event_loop")
async def event_loop(job: pgq.Job) -> None:
    """Which event loop the worker runs on: its class's module."""
    record(job, f"loop:{type(asyncio.get_running_loop()).__module__}")


@worker.entrypoint("slow")
async def slow(job: pgq.Job) -> None:
    record(job, "start")
    await asyncio.sleep(float((job.payload or {}).get("sleep", 1.0)))
    record(job, "end")


@worker.entrypoint("slow_sync")
def slow_sync(job: pgq.Job) -> None:
    record(job, "start")
    deadline = time.monotonic() + float((job.payload or {}).get("sleep", 1.0))
    while time.monotonic() < deadline:
        if job.cancelled:
            record(job, "cancelled")
            raise pgq.JobCancelled()
        time.sleep(0.02)
    record(job, "end")


@worker.entrypoint("flaky")
def flaky(job: pgq.Job) -> None:
    record(job)
    if job.attempt <= int((job.payload or {}).get("fail_times", 1)):
        raise RuntimeError(f"flaky failure on attempt {job.attempt}")


@worker.entrypoint("tx", transactional=True)
def tx(job: pgq.Job, conn) -> None:
    record(job)
    conn.execute("INSERT INTO tx_effects (job_id) VALUES (%s)", (job.id,))
    if (job.payload or {}).get("fail"):
        raise RuntimeError("fail after writing")


# --- flow control (test_schedules.py, test_dependencies.py) ---------------------------------


@worker.entrypoint("tick")
async def tick(job: pgq.Job) -> None:
    """A schedule's job: the event names the schedule's fire time (from the headers)."""
    record(job, f"fire:{(job.headers or {}).get('fire_time', '-')}")


async def _step(job: pgq.Job) -> None:
    record(job, "start")
    await asyncio.sleep(float((job.payload or {}).get("sleep", 0.05)))
    record(job, "end")


@worker.entrypoint("split")
async def split(job: pgq.Job) -> None:
    await _step(job)


@worker.entrypoint("part")
async def part(job: pgq.Job) -> None:
    await _step(job)


@worker.entrypoint("merge")
async def merge(job: pgq.Job) -> None:
    await _step(job)


# --- faults (test_worker_faults.py) ---------------------------------------------------------


def _sleep_first(job: pgq.Job) -> float:
    """The payload's sleep, on the first delivery only: the re-delivery is quick."""
    payload = job.payload or {}
    return float(payload.get("sleep", 0)) if job.deliveries == 1 else 0.0


@worker.entrypoint("slow_first")
async def slow_first(job: pgq.Job) -> None:
    """Sleeps the payload's seconds on its first delivery; a re-delivery ends at once."""
    record(job, "start")
    await asyncio.sleep(_sleep_first(job))
    record(job, "end")


@worker.entrypoint("tx_slow", transactional=True)
def tx_slow(job: pgq.Job, conn) -> None:
    record(job, "start")
    time.sleep(_sleep_first(job))
    conn.execute("INSERT INTO tx_effects (job_id) VALUES (%s)", (job.id,))
    record(job, "end")


@worker.entrypoint("stubborn")
def stubborn(job: pgq.Job) -> None:
    """A sync handler that ignores cancellation and timeouts (it cannot be interrupted)."""
    record(job, "start")
    time.sleep(float((job.payload or {}).get("sleep", 0)) if job.deliveries == 1 else 0.0)
    record(job, "end")


@worker.entrypoint("two_lives")
def two_lives(job: pgq.Job) -> None:
    """The first delivery cannot be interrupted; a later one stops when cancelled."""
    record(job, "start")
    if job.deliveries == 1:
        time.sleep(float((job.payload or {}).get("sleep", 0)))
    else:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if job.cancelled:
                record(job, "cancelled")
                raise pgq.JobCancelled()
            time.sleep(0.02)
    record(job, "end")


@worker.entrypoint("limited")
async def limited(job: pgq.Job) -> None:
    record(job, "start")
    await asyncio.sleep(0.01)
    record(job, "end")


@worker.entrypoint("returns")
async def returns(job: pgq.Job) -> object:
    record(job)
    payload = job.payload or {}
    if payload.get("not_json"):
        return {1, 2}
    return {"double": payload.get("n", 0) * 2}


def _unstorable(kind: str) -> object:
    """Values Python's json writes and PostgreSQL refuses."""
    return {
        "nan": float("nan"),
        "nul": "a\x00b",
        "surrogate": b"caf\xe9.txt".decode("utf-8", "surrogateescape"),
    }[kind]


@worker.entrypoint("bad_result")
async def bad_result(job: pgq.Job) -> object:
    record(job)
    return {"value": _unstorable(job.payload["kind"])}


@worker.entrypoint("bad_error")
async def bad_error(job: pgq.Job) -> None:
    record(job)
    raise RuntimeError(f"cannot open {_unstorable(job.payload['kind'])}")


@worker.entrypoint("fail_after")
async def fail_after(job: pgq.Job) -> None:
    record(job, "start")
    await asyncio.sleep(float(job.payload.get("sleep", 1.0)))
    raise RuntimeError("failed after sleeping")


# --- attempts and delivery reasons (test_attempts.py) ----------------------------------------


@worker.entrypoint("attempts")
async def attempts(job: pgq.Job) -> None:
    """Records its attempt and the reason of its delivery ("a<attempt>:<reason>"), then does
    what the payload says: fail while attempt <= fail_times, snooze on the first delivery,
    hang on the first delivery (for a test that kills the worker)."""
    payload = job.payload or {}
    record(job, f"a{job.attempt}:{getattr(job, 'reason', '-')}")
    if payload.get("hang") and job.deliveries == 1:
        await asyncio.sleep(3600)
    if payload.get("snooze") and job.deliveries == 1:
        raise pgq.Snooze(0)
    if job.attempt <= int(payload.get("fail_times", 0)):
        raise RuntimeError(f"planned failure on attempt {job.attempt}")


# Durable steps (tests/py/worker/test_steps.py): each step writes its side effect, a row of
# step_effects (job, step, delivery); the first delivery stops between the two steps until
# the test kills its process.
def _effect(job_id: int, step: str, delivery: int) -> dict[str, object]:
    import psycopg

    with psycopg.connect(os.environ["APP_DSN"], autocommit=True) as c:
        c.execute("INSERT INTO step_effects VALUES (%s, %s, %s)", (job_id, step, delivery))
    return {"step": step, "delivery": delivery}


async def _effect_async(job_id: int, step: str, delivery: int) -> dict[str, object]:
    import psycopg

    async with await psycopg.AsyncConnection.connect(os.environ["APP_DSN"], autocommit=True) as c:
        await c.execute("INSERT INTO step_effects VALUES (%s, %s, %s)", (job_id, step, delivery))
    return {"step": step, "delivery": delivery}


def _effect_in(conn, job_id: int, step: str, delivery: int) -> dict[str, object]:
    conn.execute("INSERT INTO step_effects VALUES (%s, %s, %s)", (job_id, step, delivery))
    return {"step": step, "delivery": delivery}


@worker.entrypoint("steps_sync")
def steps_sync(job: pgq.Job) -> object:
    charged = job.step("charge", _effect, job.id, "charge", job.deliveries)
    record(job, "between")
    if job.deliveries == 1:
        time.sleep(120)  # killed here
    shipped = job.step("ship", _effect, job.id, "ship", job.deliveries)
    return {"charged": charged, "shipped": shipped}


@worker.entrypoint("steps_async")
async def steps_async(job: pgq.Job) -> object:
    charged = await job.step("charge", _effect_async, job.id, "charge", job.deliveries)
    record(job, "between")
    if job.deliveries == 1:
        await asyncio.sleep(120)  # killed here
    shipped = await job.step("ship", _effect, job.id, "ship", job.deliveries)  # a sync fn
    return {"charged": charged, "shipped": shipped}


@worker.entrypoint("steps_tx", transactional=True)
def steps_tx(job: pgq.Job, conn) -> object:
    charged = job.step("charge", _effect_in, conn, job.id, "charge", job.deliveries)
    record(job, "between")
    if job.deliveries == 1:
        time.sleep(120)  # killed here: the transaction, the step's row and its record roll back
    shipped = job.step("ship", _effect_in, conn, job.id, "ship", job.deliveries)
    return {"charged": charged, "shipped": shipped}


# Progress (tests/py/worker/test_steps.py): three reports, a pause after each.
@worker.entrypoint("progress_async")
async def progress_async(job: pgq.Job) -> None:
    for i in (1, 2, 3):
        await asyncio.sleep(0.3)
        await job.progress(i / 3 if i < 3 else 1, f"{i} of 3")


@worker.entrypoint("progress_sync")
def progress_sync(job: pgq.Job) -> None:
    for i in (1, 2, 3):
        time.sleep(0.3)
        job.progress(i, f"{i} of 3")


# Fan-in through dependency results (tests/py/worker/test_steps.py).
@worker.entrypoint("fan_part")
async def fan_part(job: pgq.Job) -> object:
    return {"n": job.payload["n"]}


@worker.entrypoint("fan_merge")
def fan_merge(job: pgq.Job) -> object:
    return {"sum": sum(r["n"] for r in job.dependency_results().values())}


@worker.entrypoint("fan_merge_async")
async def fan_merge_async(job: pgq.Job) -> object:
    results = await job.dependency_results()
    return {"ids": sorted(results), "sum": sum(r["n"] for r in results.values())}


def _price(row: dict) -> float:
    try:
        return float(row["price"])
    except ValueError:
        raise ValueError(f"row {row['n']}: column 'price' is not a number") from None


@worker.entrypoint("bad_row")
def bad_row(job: pgq.Job) -> None:
    """A sync handler that fails in a helper of its own: a traceback of the user's frames
    under the worker's, the thread pool's and asyncio's."""
    record(job)
    for row in job.payload["rows"]:
        _price(row)
