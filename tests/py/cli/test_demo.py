"""`make demo` (python -m pgq.cli.demo), the README's first command, run twice in a row: the
second run replaces the first one's database, whose own trigger depends on pgq."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from conftest import ADMIN_DSN


def run_demo() -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pgq.cli.demo"],
        env={**os.environ, "PGQ_DEMO_DSN": ADMIN_DSN},
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_the_demo_runs_and_runs_again() -> None:
    for _ in range(2):
        done = run_demo()
        assert done.returncode == 0, done.stdout + done.stderr
        assert "jobs succeeded in" in done.stdout, done.stdout
        # What it says it enqueued is what the SQL enqueued, by count and by kind (it once
        # summed pgq.queues, whose counts above its exact limit are estimates: 7619 of 7200).
        said = re.search(
            r"enqueued (\d+) jobs from SQL: (\d+) orders .*, (\d+) receipts .*, (\d+) reminders", done.stdout
        )
        assert said, done.stdout
        assert [int(n) for n in said.groups()] == [7200, 5000, 2000, 200], done.stdout
        assert "workers exited with [0, 0] after SIGTERM" in done.stdout, done.stdout
