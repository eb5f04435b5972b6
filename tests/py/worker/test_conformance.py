"""`pgq conformance`: the worker-protocol scenarios pass against `pgq worker` (the handlers
of pgq.conformance.handlers) and against the Node.js example written from docs/protocol.md;
a worker that never heartbeats, or that settles a stale delivery, fails, and the suite
names the scenario. Each run is a real `pgq conformance` process starting real workers.
The runs of a test go concurrently: each takes about 10 s."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from pgq.conformance.scenarios import describe

REPO = Path(__file__).resolve().parents[3]
PGQ = str(Path(sys.executable).with_name("pgq"))
BROKEN = f"{sys.executable} {REPO / 'tests' / 'py' / 'support' / 'conformance_broken.py'}"
NODE_DIR = REPO / "examples" / "node"
SCENARIOS = [name for name, _ in describe()]


def start(dsn: str, worker: str, *args: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [PGQ, "conformance", "--dsn", dsn, "--worker", worker, *args],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(run: subprocess.Popen[str]) -> tuple[int, str]:
    out, _ = run.communicate(timeout=180)
    print(out)
    return run.returncode, out


def assert_all_pass(code: int, out: str) -> None:
    assert code == 0, out
    for name in SCENARIOS:
        assert any(line.startswith(f"ok    {name} ") for line in out.splitlines()), f"{name}: {out}"
    assert "passed 10 of 10" in out


def assert_left_nothing(dsn: str) -> None:
    """The suite cleaned up: no job, live worker or settings of its entrypoints."""
    ours = "LIKE 'conformance\\_%'"
    with psycopg.connect(dsn) as c:
        for query in (
            f"SELECT count(*) FROM pgq.jobs WHERE entrypoint {ours}",
            f"SELECT count(*) FROM pgq.workers WHERE state = 'alive' AND entrypoints[1] {ours}",
            f"SELECT count(*) FROM pgq._queues WHERE entrypoint {ours}",
        ):
            assert c.execute(query).fetchone()[0] == 0, query


def test_pgq_worker_passes_and_broken_workers_fail_naming_the_scenario(dsn: str) -> None:
    good = start(dsn, f"{PGQ} worker pgq.conformance.handlers:worker", "--lease", "3")
    silent = start(dsn, BROKEN, "--scenario", "long_job", "--scenario", "result", BROKEN="no-heartbeat")
    stale = start(dsn, BROKEN, "--scenario", "timeout", BROKEN="stale-settle")
    # The same fault in a worker that claims the next delivery 0.8 s after a timeout: the
    # scenario's window (the late end falls while the next delivery is held) must hold it.
    slow = start(dsn, BROKEN, "--scenario", "timeout", BROKEN="stale-settle-slow")
    # Claiming later than the late end, it settles nothing stale here: the scenario must say
    # that it could not test the fencing, not pass it.
    slower = start(dsn, BROKEN, "--scenario", "timeout", BROKEN="stale-settle-slow", CLAIM_DELAY="1.8")
    deaf = start(dsn, BROKEN, "--scenario", "cancel", "--scenario", "timeout", BROKEN="no-stop")

    assert_all_pass(*finish(good))

    code, out = finish(silent)
    assert code == 1
    assert "FAIL  long_job" in out and "the worker did not keep its lease" in out
    assert "ok    result" in out and out.rstrip().splitlines()[-2].endswith(": long_job")

    for run in (stale, slow):
        code, out = finish(run)
        assert code == 1
        assert "FAIL  timeout" in out and "is succeeded, expected dead" in out
    code, out = finish(slower)
    assert code == 1
    assert "FAIL  timeout" in out and "the fencing of a late end was not tested" in out
    code, out = finish(deaf)
    assert code == 1
    assert "FAIL  cancel" in out and "canceled: not seen" in out
    assert "FAIL  timeout" in out and "is succeeded, expected dead" in out
    assert_left_nothing(dsn)


@pytest.fixture(scope="module")
def node_worker() -> str:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed for the Node.js example worker (examples/node)")
    if not (NODE_DIR / "node_modules" / "pg").is_dir():
        subprocess.run(["make", "-s", "node-example"], cwd=REPO, check=True, timeout=300)
    return f"node {NODE_DIR / 'worker.js'}"


def test_node_example_worker_passes(dsn: str, node_worker: str) -> None:
    assert_all_pass(*finish(start(dsn, node_worker, "--lease", "3")))
    assert_left_nothing(dsn)
