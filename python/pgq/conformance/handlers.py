"""The conformance suite's handlers for the Python worker, one handler for every entrypoint
named in PGQ_ENTRYPOINTS (comma-separated):

    PGQ_ENTRYPOINTS=a,b pgq worker pgq.conformance.handlers:worker
    pgq conformance --worker "pgq worker pgq.conformance.handlers:worker"

The ops are those of pgq.conformance.ops (docs/protocol.md, "The conformance suite").
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pgq

# A short poll and grace: the suite's jobs are short, and it waits for the worker's exit.
worker = pgq.Worker(poll_interval=0.5, grace_period=10.0, summary_interval=None)


async def handle(job: pgq.Job) -> Any:
    payload = job.payload if isinstance(job.payload, dict) else {}
    op = payload.get("op")
    if op == "result":
        return payload.get("value")
    if op == "fail":
        if job.deliveries <= payload.get("times", 1):
            raise RuntimeError(f"conformance: failing delivery {job.deliveries} as asked")
        return payload.get("value")
    if op == "sleep":
        await asyncio.sleep(payload["seconds"])  # cancelled by a cancel or the timeout
        return payload.get("value")
    if op == "snooze":
        if job.deliveries <= payload.get("times", 1):
            raise pgq.Snooze(payload["seconds"])
        return payload.get("value")
    raise ValueError(f"conformance: unknown op {op!r}")


for _name in filter(None, (n.strip() for n in os.environ.get("PGQ_ENTRYPOINTS", "").split(","))):
    worker.entrypoint(_name)(handle)
