"""`pgq bench`'s latency: commit -> handler start with one idle `pgq worker`, jobs enqueued
one per transaction at a steady rate; and its summary, shared with PgQueuer's run.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from ...client import Client
from ..app import ENTRYPOINT
from ..db import BenchError, Processes, Server, progress, wait_for
from ..drain import sampled_cpu
from .common import ready, worker_argv

# --- 4. latency ---------------------------------------------------------------------------


def latency(server: Server, *, seconds: int, rate: float) -> dict[str, Any]:
    """One idle worker; jobs enqueued one per transaction at `rate`/s; commit -> handler start.
    Also the CPU per job at this trickle (claims of one job, polls that find nothing): the
    worker process and every backend of the database, the producer's included."""
    ledger = server.log_dir / "latency-ledger.txt"
    ledger.parent.mkdir(parents=True, exist_ok=True)
    ledger.write_text("")
    committed: dict[int, float] = {}
    with server.database("latency") as dsn, Processes(server.log_dir, "latency") as procs:
        procs.start(worker_argv(dsn, 200, 100), env={"PGQ_BENCH_LEDGER": str(ledger)})
        wait_for("the pgq worker", ready(dsn, procs, 1), timeout=60)
        time.sleep(0.5)  # idle: past its first empty claim
        total = max(1, int(seconds * rate))
        with (
            Client(dsn, min_size=1, max_size=1) as client,
            sampled_cpu(dsn, lambda: [p.pid for p in procs.procs]) as cpu,
            progress(total, "latency: enqueuing") as bar,
        ):
            client.job_status(0)  # connect before the clock starts
            start = time.monotonic()
            for i in range(total):
                pause = start + i / rate - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                job_id = client.enqueue(ENTRYPOINT, {"n": i})
                committed[job_id] = time.time()
                bar.update(1)
            wait_for("the handlers", lambda: len(_read_ledger(ledger)) >= total, timeout=30, interval=0.1)
            cpu_use = cpu.result(total)
    return {**latency_summary(committed, _read_ledger(ledger), rate), "cpu": cpu_use}


def _read_ledger(path: Path) -> dict[int, float]:
    started: dict[int, float] = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:
            started.setdefault(int(parts[0]), float(parts[1]))
    return started


def latency_summary(committed: dict[int, float], started: dict[int, float], rate: float) -> dict[str, Any]:
    """p50/p99/max of handler start minus commit, in ms (shared by pgq and the peer)."""
    samples = sorted((started[i] - t) * 1000 for i, t in committed.items() if i in started)
    if not samples:
        raise BenchError("latency: no handler ran")
    cuts = statistics.quantiles(samples, n=100, method="inclusive") if len(samples) > 1 else samples * 99
    return {
        "samples": len(samples),
        "rate": rate,
        "p50_ms": round(cuts[49], 2),
        "p99_ms": round(cuts[98], 2),
        "max_ms": round(samples[-1], 2),
    }
