"""`pgq bench` drains with real `pgq worker` processes: the drain itself (tuned, with the
Worker's defaults, keyed, under a held snapshot), the bystander beside one, and the
backlog's fill. Each runs in a throwaway database of its own and checks that every job was
completed.
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

from ..app import ENTRYPOINT
from ..db import BenchError, Processes, Server, execute, settle, wait_for
from ..drain import measure_drain
from .common import PAYLOAD, PGQ_PROBES, enqueue_jobs, fill_in_chunks, ready, worker_argv

# --- 2, 5, 6. drains ----------------------------------------------------------------------


def drain(
    server: Server,
    name: str,
    *,
    fill: Callable[[str], None],
    jobs: int,
    workers: int,
    concurrency: int,
    batch_size: int,
    timeout: float,
    hold_xmin: bool = False,
    defaults: bool = False,
    bystander: bool = False,
) -> dict[str, Any]:
    """Drain `jobs` jobs of the bench entrypoint with `workers` pgq worker processes (run
    with no flags at all when `defaults`).

    The entrypoint is paused while the workers start and resumed when all of them listen,
    so the clock starts with every worker ready. With hold_xmin, a REPEATABLE READ
    transaction holds its snapshot from before the first claim until the end.
    """
    with server.database(name) as dsn:
        fill(dsn)
        settle(dsn, "pgq._jobs")
        execute(dsn, f"SELECT pgq.pause('{ENTRYPOINT}')")
        holder = None
        if hold_xmin:
            holder = psycopg.connect(dsn)
            holder.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            holder.execute("SELECT 1")
        try:
            with Processes(server.log_dir, name) as procs:
                procs.start(worker_argv(dsn, concurrency, batch_size, defaults), count=workers)
                wait_for(f"{workers} pgq workers", ready(dsn, procs, workers), timeout=60)
                with contextlib.ExitStack() as stack:
                    other = stack.enter_context(Bystander(dsn)) if bystander else None
                    if other is not None:
                        time.sleep(3.0)  # its latency with the queue idle

                    def release() -> None:
                        if other is not None:
                            other.phase = "drain"
                        execute(dsn, f"SELECT pgq.resume('{ENTRYPOINT}')")

                    result = measure_drain(
                        dsn,
                        jobs,
                        PGQ_PROBES,
                        procs,
                        release=release,
                        timeout=timeout,
                        label=f"{name}: draining",
                    )
                if other is not None:
                    result["bystander"] = other.summary()
                if not result["timed_out"]:
                    left = execute(
                        dsn,
                        "SELECT coalesce(sum(queued + running), 0) FROM pgq.queues WHERE entrypoint = %s",
                        params=(ENTRYPOINT,),
                    )[0][0]
                    if left:
                        raise BenchError(f"{name}: pgq.queues still shows {left} jobs queued or running")
        finally:
            if holder is not None:
                holder.close()
    if result["jobs"] < jobs and not result["timed_out"]:
        raise BenchError(f"{name}: {result['jobs']} of {jobs} jobs completed")
    if defaults:  # the Worker's own: 500 slots for async handlers, batches of up to 500
        return {**result, "workers": workers, "concurrency": "default", "batch_size": "default"}
    return {**result, "workers": workers, "concurrency": concurrency, "batch_size": batch_size}


class Bystander:
    """Another application on the same server: one connection updating a row of a small
    table of its own, `rate` times a second, each statement its own transaction; its
    latencies (ms) are kept per phase ("idle", "drain")."""

    def __init__(self, dsn: str, rate: float = 200.0) -> None:
        self.dsn, self.rate = dsn, rate
        self.phase = "idle"
        self.latencies: dict[str, list[float]] = {"idle": [], "drain": []}
        self._stop = threading.Event()
        execute(
            dsn,
            "CREATE TABLE IF NOT EXISTS bystander (id integer PRIMARY KEY, n bigint NOT NULL DEFAULT 0)",
            "INSERT INTO bystander (id) SELECT g FROM generate_series(1, 1000) AS g ON CONFLICT DO NOTHING",
        )
        self._thread = threading.Thread(target=self._run, name="bystander", daemon=True)

    def __enter__(self) -> Bystander:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            n, next_at = 0, time.perf_counter()
            while not self._stop.is_set():
                n += 1
                t0 = time.perf_counter()
                conn.execute("UPDATE bystander SET n = n + 1 WHERE id = %s", (n % 1000 + 1,))
                self.latencies[self.phase].append((time.perf_counter() - t0) * 1000)
                next_at += 1 / self.rate
                self._stop.wait(max(0.0, next_at - time.perf_counter()))

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rate": self.rate}
        for phase, values in self.latencies.items():
            if len(values) >= 2:
                q = statistics.quantiles(values, n=100)
                out[phase] = {"samples": len(values), "p50_ms": round(q[49], 2), "p99_ms": round(q[98], 2)}
        return out


def bystander(server: Server, *, jobs: int, **drain_args: Any) -> dict[str, Any]:
    """A bystander's latency with the queue idle (workers started, nothing queued for them
    yet), then while N jobs drain (tuned workers)."""
    return drain(
        server,
        "bystander",
        fill=lambda d: enqueue_jobs(d, jobs, "bystander: enqueuing"),
        jobs=jobs,
        bystander=True,
        **drain_args,
    )


def backlog_fill(size: int, sample: int, isolated: bool = False) -> Callable[[str], None]:
    """`size` queued jobs spread over size/sample entrypoints, interleaved in the heap;
    `sample` of them belong to the bench entrypoint. One INSERT ... SELECT per 100k rows.
    isolated: the bench entrypoint has a partition of its own first (pgq.isolate)."""
    spread = max(1, size // sample)

    def fill(dsn: str) -> None:
        if isolated:
            execute(dsn, f"SELECT pgq.isolate('{ENTRYPOINT}')")
        fill_in_chunks(
            dsn,
            size,
            "INSERT INTO pgq._jobs (entrypoint, payload)"
            f" SELECT CASE WHEN i %% {spread} = 0 THEN '{ENTRYPOINT}'"
            f" ELSE '{ENTRYPOINT}_' || (i %% {spread}) END,"
            f" '{PAYLOAD}'::jsonb FROM generate_series(%s::bigint, %s::bigint) AS i",
            f"backlog {size}: loading",
        )

    return fill
