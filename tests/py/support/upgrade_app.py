"""The handler of the rolling-upgrade test (test_rolling_upgrade.py), run by `pgq worker` of
any release: it uses only what 0.1.0's Worker and Job have.

Each process writes, in LEDGER_DIR, <pid>.release (the pgq it imported: version and file,
so the test knows which code ran) and <pid>.log (one line per run: "job_id deliveries
entrypoint a<attempt> time").
"""

from __future__ import annotations

import asyncio
import os
import time

import pgq

worker = pgq.Worker(concurrency=4, poll_interval=0.2, grace_period=10)

_ledger_dir = os.environ.get("LEDGER_DIR", ".")
with open(os.path.join(_ledger_dir, f"{os.getpid()}.release"), "w") as _release:
    _release.write(f"{pgq.__version__} {pgq.__file__}\n")
_ledger = open(  # noqa: SIM115 - one line-buffered file for the life of the process
    os.path.join(_ledger_dir, f"{os.getpid()}.log"), "a", buffering=1
)


@worker.entrypoint("roll")
async def roll(job: pgq.Job) -> None:
    payload = job.payload or {}
    # A gated job runs until the test creates its file (a job held across the upgrade).
    while "gate" in payload and not os.path.exists(payload["gate"]):
        await asyncio.sleep(0.05)
    await asyncio.sleep(float(payload.get("sleep", 0.02)))
    # The attempt as this release's Job counts it (0.1.0 and 0.2.0: failures so far, from 0;
    # 0.3.0 on: the run, from 1).
    _ledger.write(f"{job.id} {job.deliveries} {job.entrypoint} a{job.attempt} {time.time():.6f}\n")
