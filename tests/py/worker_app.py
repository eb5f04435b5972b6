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
    if job.attempt < int((job.payload or {}).get("fail_times", 1)):
        raise RuntimeError(f"flaky failure on attempt {job.attempt + 1}")


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
