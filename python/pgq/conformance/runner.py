"""Running the scenarios against a worker command, concurrently, and cleaning up."""

from __future__ import annotations

import contextlib
import shutil
import signal
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import psycopg

from .harness import Harness, ScenarioFailed, WorkerProcess
from .scenarios import Scenario, by_name

# How often the suite runs pgq.reap itself, so that re-deliveries do not wait for pg_cron's
# minute (a worker's own heartbeats sweep too, but the worker under test may be broken).
SWEEP_EVERY = 0.5


def run_suite(
    dsn: str,
    cmd: str,
    names: list[str] | None = None,
    lease: float = 2.0,
    echo: Callable[[str], None] = print,
) -> int:
    """Run the scenarios against workers started as `cmd`; 0 when all pass, 1 otherwise."""
    scenarios = by_name(names or [])
    run_id = uuid.uuid4().hex[:8]
    workdir = Path(tempfile.mkdtemp(prefix=f"pgq-conformance-{run_id}-"))
    h = Harness(dsn=dsn, cmd=cmd, run_id=run_id, workdir=workdir, lease=lease)
    entrypoints = {s.name: h.entrypoint(s.name) for s in scenarios}
    echo(f"conformance run {run_id}: {len(scenarios)} scenarios against `{cmd}` (lease {lease:g} s)")
    stop = threading.Event()
    sweeper = threading.Thread(target=_sweep, args=(h, stop), daemon=True)
    failed: list[str] = []
    started = time.monotonic()
    try:
        for s in scenarios:
            if s.prepare is not None:
                s.prepare(h, entrypoints[s.name])
        sweeper.start()
        shared = [entrypoints[s.name] for s in scenarios if s.shared]
        common = [h.start_worker("shared", shared)] if shared else []
        with ThreadPoolExecutor(max_workers=len(scenarios)) as pool:
            futures = {
                pool.submit(_one, h, s, entrypoints[s.name], common if s.shared else []): s for s in scenarios
            }
            for future in as_completed(futures):
                s = futures[future]
                ok, line = future.result()
                echo(line)
                if not ok:
                    failed.append(s.name)
    finally:
        stop.set()
        h.stop_all()
        try:
            _cleanup(h, list(entrypoints.values()))
        except psycopg.Error as exc:  # pgq not installed, the database gone: say so, keep the first error
            echo(f"cleanup failed: {str(exc).strip().splitlines()[0]}")
    took = time.monotonic() - started
    if failed:
        echo(f"FAILED {len(failed)} of {len(scenarios)} in {took:.1f} s: {', '.join(sorted(failed))}")
        echo(f"worker logs: {workdir}")
        return 1
    echo(f"passed {len(scenarios)} of {len(scenarios)} in {took:.1f} s")
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


def _one(h: Harness, s: Scenario, entrypoint: str, watched: list[WorkerProcess]) -> tuple[bool, str]:
    began = time.monotonic()
    h.watch(watched)
    try:
        note = s.run(h, entrypoint)
    except ScenarioFailed as exc:
        return False, f"FAIL  {s.name:<9} {time.monotonic() - began:5.1f} s  {s.title}: {exc}"
    except Exception as exc:  # the suite's own trouble (the database went away): still a failure
        detail = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return False, f"FAIL  {s.name:<9} {time.monotonic() - began:5.1f} s  {s.title}: {detail}"
    suffix = f" ({note})" if note else ""
    return True, f"ok    {s.name:<9} {time.monotonic() - began:5.1f} s  {s.title}{suffix}"


def _sweep(h: Harness, stop: threading.Event) -> None:
    while not stop.wait(SWEEP_EVERY):
        # A failed one is followed by the next; a scenario that depended on it says so.
        with contextlib.suppress(psycopg.Error):
            h.one("SELECT pgq.reap()")


def _cleanup(h: Harness, entrypoints: list[str]) -> None:
    """Workers and jobs of this run: gone. The log and the settings of its entrypoints are
    removed where the role may (an owner's or superuser's DSN); otherwise they age out."""
    for worker in h.workers:
        if worker.proc.poll() is None:
            worker.signal(signal.SIGKILL)
    with h.connect() as conn:
        conn.execute(
            "SELECT pgq.cancel(ARRAY(SELECT j.id FROM pgq.jobs AS j WHERE j.entrypoint = ANY(%s)))",
            (entrypoints,),
        )
        conn.execute(
            "SELECT pgq.unregister_worker(w.id) FROM pgq.workers AS w"
            " WHERE w.state = 'alive' AND w.entrypoints && %s::text[]",
            (entrypoints,),
        )
        # Jobs a killed worker held were re-queued by its unregistration: cancel them too.
        conn.execute(
            "SELECT pgq.cancel(ARRAY(SELECT j.id FROM pgq.jobs AS j WHERE j.entrypoint = ANY(%s)))",
            (entrypoints,),
        )
        for table in ("_outcomes", "_queues", "_marks"):
            try:
                with conn.transaction():
                    conn.execute(f"DELETE FROM pgq.{table} WHERE entrypoint = ANY(%s)", (entrypoints,))
            except psycopg.Error:
                pass
