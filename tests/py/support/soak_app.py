"""Handlers of the chaos soak (tests/py/support/soak.py), run in real `pgq worker` processes.

Every run is written to the process's ledger file, outside the queue:
LEDGER_DIR/<pid>.log, lines "job_id deliveries entrypoint event unix_time key", where event
is start, end (the handler returned) or stop (it raised: a timeout, a cancel, an error).
The end or stop is written in a `finally`, so every run that was not SIGKILLed has one.
The writes are line-buffered, so a SIGKILL loses no line already written.

soak_sql: async; a job whose key is slow (soak_audit.is_slow, about 1 in 25) sleeps past
its entrypoint's 1-second timeout on its first delivery. soak_trigger: transactional; it
inserts its effect (key, job_id, deliveries) into soak_effects in the transaction that
completes the job, and stops (JobCancelled) when cancellation is requested. soak_batch:
async, on an entrypoint limited to a few concurrent jobs across all workers.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from typing import Any

import pgq
from support.soak_audit import is_slow

worker = pgq.Worker(
    concurrency=int(os.environ.get("SOAK_CONCURRENCY", "16")),
    poll_interval=float(os.environ.get("SOAK_POLL", "0.2")),
    grace_period=float(os.environ.get("SOAK_GRACE", "5")),
)
_max_sleep = float(os.environ.get("SOAK_MAX_SLEEP", "0.2"))
_slow_sleep = float(os.environ.get("SOAK_SLOW_SLEEP", "3"))

_ledger = open(  # noqa: SIM115 - one line-buffered file for the life of the process
    os.path.join(os.environ.get("LEDGER_DIR", "."), f"{os.getpid()}.log"), "a", buffering=1
)
_lock = threading.Lock()  # transactional handlers write from the worker's threads


def _key(job: pgq.Job) -> str:
    return str((job.payload or {}).get("key", "-"))


def _record(job: pgq.Job, event: str) -> None:
    line = f"{job.id} {job.deliveries} {job.entrypoint} {event} {time.time():.6f} {_key(job)}\n"
    with _lock:
        _ledger.write(line)


@worker.entrypoint("soak_sql")
async def soak_sql(job: pgq.Job) -> None:
    # Idempotent by construction: it only appends to the ledger. The sleep keeps jobs in
    # flight, so that faults catch some of them mid-run.
    _record(job, "start")
    event = "stop"
    try:
        slow = job.deliveries == 1 and is_slow(_key(job))
        await asyncio.sleep(_slow_sleep if slow else random.uniform(0, _max_sleep))
        event = "end"
    finally:
        _record(job, event)


@worker.entrypoint("soak_batch")
async def soak_batch(job: pgq.Job) -> None:
    _record(job, "start")
    event = "stop"
    try:
        await asyncio.sleep(random.uniform(0, _max_sleep))
        event = "end"
    finally:
        _record(job, event)


@worker.entrypoint("soak_trigger", transactional=True)
def soak_trigger(job: pgq.Job, conn: Any) -> None:
    # Its effect commits if and only if the job completes: exactly one row per succeeded job.
    _record(job, "start")
    event = "stop"
    try:
        until = time.monotonic() + random.uniform(0, _max_sleep)
        while time.monotonic() < until:
            if job.cancelled:
                raise pgq.JobCancelled()
            time.sleep(0.01)
        conn.execute(
            "INSERT INTO soak_effects (key, job_id, deliveries) VALUES (%s, %s, %s)",
            (_key(job), job.id, job.deliveries),
        )
        event = "end"
    finally:
        _record(job, event)
