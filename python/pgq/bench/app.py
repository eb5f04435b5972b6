"""The application `pgq bench` runs in its worker processes: `pgq worker pgq.bench.app:worker`.

One entrypoint, `bench`, with a no-op async handler (`worker`: tuned; `default_worker`: no
settings). When $PGQ_BENCH_LEDGER names a file,
the handler first appends "job_id unix_time" to it (line-buffered), so the latency
scenario can compare the time a handler started with the time its job was committed.
"""

from __future__ import annotations

import os
import time

from ..job import Job
from ..worker import Worker

ENTRYPOINT = "bench"

worker = Worker(concurrency=200, batch_size=100)
# The same handler on a Worker with every setting at its default: `pgq bench`'s defaults
# scenario runs `pgq worker pgq.bench.app:default_worker` with no flags at all.
default_worker = Worker()

_path = os.environ.get("PGQ_BENCH_LEDGER")
_ledger = open(_path, "a", buffering=1) if _path else None  # noqa: SIM115 - open for the process's life

if _ledger is None:

    @worker.entrypoint(ENTRYPOINT)
    @default_worker.entrypoint(ENTRYPOINT)
    async def noop(job: Job) -> None:
        return None

else:
    _write = _ledger.write

    @worker.entrypoint(ENTRYPOINT)
    async def noop_timed(job: Job) -> None:
        _write(f"{job.id} {time.time():.6f}\n")
