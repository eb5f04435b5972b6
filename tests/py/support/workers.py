"""Helpers for tests that run real `pgq worker` processes (handlers in worker_app.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

# tests/py, the directory that holds the package `support`: on a worker's PYTHONPATH, so that
# its handlers are found as support.worker_app, as the tests import them.
TESTS_PY = Path(__file__).resolve().parents[1]
APP_SPEC = "support.worker_app:worker"


class WorkerProcess:
    """One `python -m pgq worker support.worker_app:worker [args]` process; its log goes to a file."""

    def __init__(self, dsn: str, ledger: Path, *args: str, wrap: tuple[str, ...] = (), **env: str) -> None:
        """wrap: a command that runs the worker (`ip netns exec NS`: in a network namespace)."""
        self.log_path = ledger / f"worker-{time.monotonic_ns()}.out"
        full_env = {
            **os.environ,
            "PYTHONPATH": str(TESTS_PY),
            "LEDGER_DIR": str(ledger),
            "PYTHONUNBUFFERED": "1",
            **env,
        }
        with open(self.log_path, "w") as out:
            self.proc = subprocess.Popen(
                [*wrap, sys.executable, "-m", "pgq", "worker", APP_SPEC, "--dsn", dsn, *args],
                env=full_env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text()

    def terminate(self, timeout: float = 30) -> int:
        """SIGTERM, then the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def ledger_lines(ledger: Path) -> list[tuple[int, int, str, str, float]]:
    """Every handler run the worker processes recorded: (job_id, deliveries, entrypoint, event, t)."""
    rows = []
    for path in ledger.glob("*.log"):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 5:
                rows.append((int(parts[0]), int(parts[1]), parts[2], parts[3], float(parts[4])))
    return rows


def scalar(dsn: str, query: str, params: tuple[Any, ...] = ()) -> Any:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(query, params).fetchone()[0]


def execute(dsn: str, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else []


def listeners(dsn: str) -> int:
    """Sessions of this database that LISTEN for pgq's notifications: one per worker."""
    return scalar(
        dsn,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN pgq'",
    )


def outcome_count(dsn: str, outcome: str = "succeeded", entrypoint: str | None = None) -> int:
    return scalar(
        dsn,
        "SELECT count(*) FROM pgq.outcomes WHERE outcome = %s AND (%s::text IS NULL OR entrypoint = %s)",
        (outcome, entrypoint, entrypoint),
    )


def wait_until_waiting_on_lock(conn: psycopg.Connection, pid: int, seconds: float = 10) -> bool:
    """Whether the backend `pid` is (or comes to be, within `seconds`) waiting for a lock."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        row = conn.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
        if row and row[0] == "Lock":
            return True
        time.sleep(0.01)
    return False
