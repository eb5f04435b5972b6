"""Handlers of the chaos soak (tests/py/soak.py), run in real `pgq worker` processes.

Every run is written to the process's ledger file, outside the queue:
LEDGER_DIR/<pid>.log, lines "job_id deliveries entrypoint start|end unix_time key".
The writes are line-buffered, so a SIGKILL loses no line already written.
"""

from __future__ import annotations

import asyncio
import os
import random
import time

import pgq

ENTRYPOINTS = ("soak_sql", "soak_trigger", "soak_batch")

worker = pgq.Worker(
    concurrency=int(os.environ.get("SOAK_CONCURRENCY", "16")),
    poll_interval=float(os.environ.get("SOAK_POLL", "0.2")),
    grace_period=float(os.environ.get("SOAK_GRACE", "5")),
)
_max_sleep = float(os.environ.get("SOAK_MAX_SLEEP", "0.2"))

_ledger = open(  # noqa: SIM115 - one line-buffered file for the life of the process
    os.path.join(os.environ.get("LEDGER_DIR", "."), f"{os.getpid()}.log"), "a", buffering=1
)


def _record(job: pgq.Job, event: str) -> None:
    key = (job.payload or {}).get("key", "-")
    _ledger.write(f"{job.id} {job.deliveries} {job.entrypoint} {event} {time.time():.6f} {key}\n")


async def _handle(job: pgq.Job) -> None:
    # Idempotent by construction: it only appends to the ledger. The sleep keeps jobs in
    # flight, so that faults catch some of them mid-run.
    _record(job, "start")
    await asyncio.sleep(random.uniform(0, _max_sleep))
    _record(job, "end")


for _name in ENTRYPOINTS:
    worker.entrypoint(_name)(_handle)
