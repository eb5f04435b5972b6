"""`pgq bench`'s clock: timing a drain from the database's own timestamps, and the CPU
time each side spent (client processes, PostgreSQL backends, everything else)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from .db import BenchError, Processes, pgbench_path, progress

# --- CPU accounting ---------------------------------------------------------------------


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process on this machine, None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _machine_ticks() -> tuple[int, int]:
    """(total, idle) CPU ticks of the machine, all cores."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    return sum(values), values[3] + values[4]


def wal_position(conn: psycopg.Connection[Any]) -> int:
    """The server's WAL insert position, in bytes."""
    return int(conn.execute("SELECT pg_current_wal_lsn() - '0/0'").fetchone()[0])


class CpuMeter:
    """CPU seconds spent by our client processes (workers, pgbench) and by the database's
    backends (the measuring connection excluded) between two snapshots, how much of the
    machine other processes used meanwhile, and the WAL the server wrote (the whole
    server's: a bench runs alone; from `wal_from` when given). The CPU figures need the
    server on this machine; without them there is the WAL alone."""

    def __init__(
        self, conn: psycopg.Connection[Any], clients: Callable[[], list[int]], wal_from: int | None = None
    ) -> None:
        self.conn = conn
        self.clients = clients
        self.seen: dict[str, dict[int, float]] = {"clients": {}, "postgres": {}}
        self.wal = wal_position(conn) if wal_from is None else wal_from
        self.start = self.sample()
        self.machine = _machine_ticks()
        self.t0 = time.monotonic()

    def sample(self) -> dict[str, dict[int, float]]:
        """Read every process's CPU time now; also remembers it for processes that exit."""
        backends = self.conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
        snap: dict[str, dict[int, float]] = {"clients": {}, "postgres": {}}
        for kind, pids in (("clients", self.clients()), ("postgres", [r[0] for r in backends])):
            for pid in pids:
                t = _cpu_seconds(pid)
                if t is not None:
                    snap[kind][pid] = t
                    self.seen[kind][pid] = t
        return snap

    def result(self, jobs: int) -> dict[str, float] | None:
        self.sample()
        wal = wal_position(self.conn) - self.wal
        elapsed = time.monotonic() - self.t0
        total, idle = _machine_ticks()
        if not jobs or elapsed <= 0:
            return None
        # A claim that locks a row on a page unchanged since the last checkpoint logs the
        # whole page (full_page_writes): where each job has a page of its own, ~8 kB a job.
        out: dict[str, float] = {"wal_bytes_per_job": round(wal / jobs)}
        if not self.seen["clients"] or not self.seen["postgres"]:
            return out
        ours = 0.0
        for kind in ("clients", "postgres"):
            spent = sum(t - self.start[kind].get(pid, 0.0) for pid, t in self.seen[kind].items())
            ours += spent
            out[f"{kind}_us_per_job"] = round(spent / jobs * 1e6, 1)
        busy = (total - self.machine[0] - (idle - self.machine[1])) / os.sysconf("SC_CLK_TCK")
        out["others_cores"] = round(max(0.0, busy - ours) / elapsed, 2)
        return out


class SampledCpu:
    """A CpuMeter sampled every `interval` s by a thread until result(), so that a backend
    that comes and goes in between (a producer's) is counted too."""

    def __init__(
        self, conn: psycopg.Connection[Any], clients: Callable[[], list[int]], interval: float
    ) -> None:
        self.meter = CpuMeter(conn, clients)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, args=(interval,), name="cpu-sampler", daemon=True)
        self.thread.start()

    def _sample(self, interval: float) -> None:
        while not self.done.wait(interval):
            self.meter.sample()

    def stop(self) -> None:
        self.done.set()
        self.thread.join()

    def result(self, jobs: int) -> dict[str, float] | None:
        self.stop()
        return self.meter.result(jobs)


@contextmanager
def sampled_cpu(dsn: str, clients: Callable[[], list[int]], interval: float = 0.1) -> Iterator[SampledCpu]:
    """A SampledCpu on a connection of its own; call its result() inside the block."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        cpu = SampledCpu(conn, clients, interval)
        try:
            yield cpu
        finally:
            cpu.stop()


def pgbench_drain(
    dsn: str,
    script: Path,
    *,
    clients: int,
    seconds: int,
    empty: str,
    completed: str,
    defines: dict[str, Any] | None = None,
    log: Path | None = None,
) -> dict[str, Any]:
    """Run a pgbench script (-n, -M prepared, -T seconds) until the SQL `empty` returns
    true, then stop it. Returns whether it drained and the CPU use per completed job
    (`completed`: SQL counting them), read while pgbench's backends are still there."""
    threads = min(clients, os.cpu_count() or 1)
    argv = [pgbench_path(), "-n", "-M", "prepared", "-c", str(clients), "-j", str(threads)]
    argv += ["-T", str(max(1, seconds)), "-f", str(script)]
    for key, value in (defines or {}).items():
        argv += ["-D", f"{key}={value}"]
    argv.append(dsn)
    with (log or Path(os.devnull)).open("w") as out, psycopg.connect(dsn, autocommit=True) as conn:
        out.write(" ".join(argv) + "\n")
        out.flush()
        wal_from = wal_position(conn)  # pgbench's first transactions may come before the meter
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        try:
            cpu = CpuMeter(conn, lambda: [proc.pid], wal_from)
            deadline = time.monotonic() + seconds + 60
            drained = False
            while proc.poll() is None and time.monotonic() < deadline:
                cpu.sample()
                drained = bool(conn.execute(empty).fetchone()[0])
                if drained:
                    break
                time.sleep(0.05)
            cpu_use = cpu.result(int(conn.execute(completed).fetchone()[0]))
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
    if proc.returncode not in (0, -signal.SIGINT) and not drained:
        raise BenchError(f"pgbench failed (exit {proc.returncode}); see {log}")
    return {"drained": drained, "cpu": cpu_use}


# --- the drain timer --------------------------------------------------------------------


@dataclass(frozen=True)
class Probes:
    """SQL a drain is measured with; each returns one row.

    started: (bool) a job was taken. busy: (bool) anything queued or running is left.
    finished: (count, exact start or NULL, end) of the completed jobs.
    completed: an approximate completed count for the progress bar (cheap).
    """

    started: str
    busy: str
    finished: str
    completed: str


def measure_drain(
    dsn: str,
    jobs: int,
    probes: Probes,
    procs: Processes,
    *,
    release: Callable[[], None] | None,
    timeout: float,
    label: str,
) -> dict[str, Any]:
    """Release the workers, wait until nothing is queued or running, time it from the DB.

    CPU time of the workers and the backends is reported per job, with the cores that
    other processes of the machine used meanwhile (cpu).
    The start is the first claim (exact where the queue records it, else the last poll that
    saw nothing taken, at 10 ms intervals); the end is the last completion's timestamp.
    Past `timeout` the rate is computed over what completed so far (timed_out = true).
    """
    timed_out = False
    with psycopg.connect(dsn, autocommit=True) as conn:
        before = conn.execute("SELECT clock_timestamp()").fetchone()[0]
        cpu = CpuMeter(conn, lambda: [p.pid for p in procs.procs])
        if release is not None:
            release()
        deadline = time.monotonic() + timeout
        while True:
            now, started = conn.execute(f"SELECT clock_timestamp(), ({probes.started})").fetchone()
            if started:
                break
            before = now
            procs.check_alive()
            if time.monotonic() > deadline:
                raise BenchError(f"{label}: no job was taken within {timeout:.0f} s")
            time.sleep(0.01)
        with progress(jobs, label) as bar:
            shown = 0
            while conn.execute(probes.busy).fetchone()[0]:
                procs.check_alive()
                if time.monotonic() > deadline:
                    timed_out = True
                    break
                done = int(conn.execute(probes.completed).fetchone()[0] or 0)
                if done > shown:
                    bar.update(min(done, jobs) - shown)
                    shown = min(done, jobs)
                time.sleep(0.25)
            bar.update(jobs - shown)
        count, start, end = conn.execute(probes.finished).fetchone()
        cpu_use = cpu.result(int(count or 0))
    start = start or before
    if not count or end is None:
        raise BenchError(f"{label}: no job completed")
    seconds = (end - start).total_seconds()
    return {
        "jobs": int(count),
        "seconds": round(seconds, 3),
        "jobs_per_s": round(count / seconds, 1) if seconds > 0 else 0.0,
        "timed_out": timed_out,
        "cpu": cpu_use,
    }
