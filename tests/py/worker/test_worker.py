"""The worker end to end: real `pgq worker` processes against the real PostgreSQL."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

import pgq
from pgq.worker import run_on
from support.workers import (
    APP_SPEC,
    TESTS_PY,
    WorkerProcess,
    execute,
    ledger_lines,
    listeners,
    outcome_count,
    scalar,
    wait_until,
)


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def spawn(dsn: str, ledger: Path) -> Iterator:
    started: list[WorkerProcess] = []

    def start(*args: str, **env: str) -> WorkerProcess:
        proc = WorkerProcess(dsn, ledger, *args, **env)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.proc.poll() is None:
            proc.kill()


def enqueue_batch(dsn: str, entrypoint: str, payloads: list[str]) -> list[int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT * FROM pgq.enqueue_batch(%s, %s::jsonb[])", (entrypoint, payloads)
        ).fetchall()
    return [r[0] for r in rows]


def test_end_to_end_10k_jobs_three_workers(dsn: str, ledger: Path, spawn) -> None:
    # Paused until all three listen, so that the first to start cannot drain it alone.
    scalar(dsn, "SELECT pgq.pause('noop')")
    ids = enqueue_batch(dsn, "noop", ["{}"] * 10_000)
    workers = [spawn() for _ in range(3)]
    wait_until(lambda: listeners(dsn) == 3, 30, "three workers to listen")
    scalar(dsn, "SELECT pgq.resume('noop')")
    wait_until(lambda: outcome_count(dsn) == 10_000, 90, "10000 jobs to succeed")
    assert [w.terminate() for w in workers] == [0, 0, 0]
    runs = Counter(job_id for job_id, *_ in ledger_lines(ledger))
    assert set(runs) == set(ids)
    assert max(runs.values()) == 1, "a job ran twice without a fault"
    assert scalar(dsn, "SELECT count(*) FROM pgq.jobs") == 0
    assert scalar(dsn, "SELECT count(*) FROM pgq.workers WHERE state = 'alive'") == 0
    # Every worker took a share (each process opens its ledger file when it starts).
    assert len([p for p in ledger.glob("*.log") if p.read_text()]) == 3


def test_sigkill_redelivers_after_lease_and_fences_the_dead_worker(dsn: str, ledger: Path, spawn) -> None:
    scalar(dsn, "SELECT pgq.configure('slow', lease => '2 seconds')")
    ids = enqueue_batch(dsn, "slow", ['{"sleep": 3}'] * 10)
    victim = spawn()
    wait_until(lambda: len(ledger_lines(ledger)) >= 10, 20, "the victim to start all jobs")
    victim_id = scalar(dsn, "SELECT id FROM pgq.workers WHERE state = 'alive'")
    victim.kill()
    survivor = spawn()
    wait_until(lambda: outcome_count(dsn, entrypoint="slow") == 10, 40, "re-delivered jobs to succeed")
    assert survivor.terminate() == 0

    ends = [r for r in ledger_lines(ledger) if r[3] == "end"]
    assert sorted(r[0] for r in ends) == sorted(ids), "every job finished exactly once"
    assert {r[1] for r in ends} == {2}, "the re-delivery is visible to the handler"
    assert scalar(dsn, "SELECT state FROM pgq.workers WHERE id = %s", (victim_id,)) == "dead"
    with psycopg.connect(dsn, autocommit=True) as conn:
        late = conn.execute("SELECT * FROM pgq.complete(%s, %s)", (victim_id, ids)).fetchall()
        assert late == [], "the dead worker's late complete is fenced out"
        assert conn.execute("SELECT pgq.fail(%s, %s, 'late')", (victim_id, ids[0])).fetchone()[0] is None
    assert outcome_count(dsn, entrypoint="slow") == 10


# The worker runs on uvloop unless told otherwise; shutdown also on asyncio's own loop.
EVENT_LOOPS = pytest.mark.parametrize("loop", ["auto", "asyncio"])


@EVENT_LOOPS
def test_sigterm_lets_running_jobs_finish_and_exits_zero(dsn: str, ledger: Path, spawn, loop: str) -> None:
    enqueue_batch(dsn, "slow", ['{"sleep": 1}'] * 3)
    enqueue_batch(dsn, "slow_sync", ['{"sleep": 1}'] * 2)
    worker = spawn(f"--event-loop={loop}")
    wait_until(lambda: len(ledger_lines(ledger)) >= 5, 20, "jobs to start")
    assert worker.terminate() == 0
    assert outcome_count(dsn, entrypoint="slow") + outcome_count(dsn, entrypoint="slow_sync") == 5
    assert scalar(dsn, "SELECT count(*) FROM pgq.jobs") == 0
    assert scalar(dsn, "SELECT state FROM pgq.workers") == "stopped"


@EVENT_LOOPS
def test_sigterm_past_grace_releases_unfinished_jobs(dsn: str, ledger: Path, spawn, loop: str) -> None:
    (job_id,) = enqueue_batch(dsn, "slow", ['{"sleep": 30}'])
    worker = spawn(f"--event-loop={loop}", APP_GRACE="0.5")
    wait_until(lambda: ledger_lines(ledger), 20, "the job to start")
    started = time.monotonic()
    assert worker.terminate() == 0
    assert time.monotonic() - started < 10
    assert scalar(dsn, "SELECT status FROM pgq.jobs WHERE id = %s", (job_id,)) == "queued"
    assert scalar(dsn, "SELECT deliveries FROM pgq.jobs WHERE id = %s", (job_id,)) == 1


def test_failing_handler_retries_then_dies(dsn: str, ledger: Path, spawn) -> None:
    scalar(dsn, "SELECT pgq.configure('flaky', max_attempts => 3, backoff_base => '100 milliseconds')")
    (once,) = enqueue_batch(dsn, "flaky", ['{"fail_times": 1}'])
    (always,) = enqueue_batch(dsn, "flaky", ['{"fail_times": 100}'])
    worker = spawn(APP_POLL="0.1")
    wait_until(lambda: scalar(dsn, "SELECT pgq.job_status(%s)", (always,)) == "dead", 30, "a dead job")
    wait_until(
        lambda: scalar(dsn, "SELECT pgq.job_status(%s)", (once,)) == "succeeded",
        30,
        "a retried job",
    )
    assert worker.terminate() == 0
    runs = Counter(job_id for job_id, *_ in ledger_lines(ledger))
    assert runs[once] == 2
    assert runs[always] == 3
    error = scalar(dsn, "SELECT last_error FROM pgq.jobs WHERE id = %s", (always,))
    assert "RuntimeError: flaky failure on attempt 3" in error
    assert "failed" in worker.log() and str(always) in worker.log()


@pytest.mark.parametrize("entrypoint", ["slow", "slow_sync"])
def test_cancel_running_job(dsn: str, ledger: Path, spawn, entrypoint: str) -> None:
    scalar(dsn, "SELECT pgq.configure(%s, lease => '2 seconds')", (entrypoint,))
    (job_id,) = enqueue_batch(dsn, entrypoint, ['{"sleep": 60}'])
    worker = spawn()
    wait_until(lambda: ledger_lines(ledger), 20, "the job to start")
    assert scalar(dsn, "SELECT pgq.cancel(ARRAY[%s]::bigint[])", (job_id,)) == 1
    wait_until(
        lambda: scalar(dsn, "SELECT pgq.job_status(%s)", (job_id,)) == "canceled",
        15,
        "cancellation",
    )
    # Settled with pgq.confirm_cancel: one canceled outcome, no attempt spent on it.
    outcomes = "SELECT outcome, attempt FROM pgq.outcomes WHERE job_id = %s ORDER BY finished_at"
    with psycopg.connect(dsn) as c:
        assert c.execute(outcomes, (job_id,)).fetchall() == [("canceled", 0)]
    assert worker.terminate() == 0


def test_timeout_fails_the_job(dsn: str, ledger: Path, spawn) -> None:
    scalar(dsn, "SELECT pgq.configure('slow', timeout => '1 second', max_attempts => 1)")
    (job_id,) = enqueue_batch(dsn, "slow", ['{"sleep": 30}'])
    worker = spawn()
    wait_until(lambda: scalar(dsn, "SELECT pgq.job_status(%s)", (job_id,)) == "dead", 15, "the timeout")
    assert "timeout" in scalar(dsn, "SELECT last_error FROM pgq.jobs WHERE id = %s", (job_id,))
    assert worker.terminate() == 0


def test_idle_worker_wakes_on_notify(dsn: str, ledger: Path, spawn) -> None:
    # A poll interval far above the bound, so only the NOTIFY can explain a fast pickup.
    worker = spawn(APP_POLL="10")
    wait_until(
        lambda: scalar(dsn, "SELECT count(*) FROM pgq.workers WHERE state = 'alive'"),
        20,
        "registration",
    )
    time.sleep(1)  # let it finish its first empty claim and go idle
    latencies = []
    for _ in range(3):
        count = len(ledger_lines(ledger))  # before the enqueue: the job may run at once
        committed = time.time()
        enqueue_batch(dsn, "noop", ["{}"])
        wait_until(lambda c=count: len(ledger_lines(ledger)) > c, 5, "the job to run", interval=0.005)
        latencies.append(max(r[4] for r in ledger_lines(ledger)) - committed)
    assert worker.terminate() == 0
    assert max(latencies) < 1.0, latencies


def test_a_trickle_of_jobs_costs_one_claim_per_job(dsn: str, ledger: Path, spawn) -> None:
    """Jobs enqueued one at a time, each after the last one finished: the NOTIFY of each
    wakes one claim, which takes it. The job's end and its completion must not send the
    worker to claim again: the queue was drained, and each empty claim costs a round trip
    and a statement of server time (it made three claims per job, two of them empty)."""
    name = scalar(dsn, "SELECT current_database()")
    # Counted by the worker's own backends, which report when they end.
    execute(dsn, f"ALTER DATABASE \"{name}\" SET track_functions = 'pl'")
    worker = spawn(APP_POLL="60")  # no poll within the test: only NOTIFYs wake it
    alive = "SELECT count(*) FROM pgq.workers WHERE state = 'alive'"
    wait_until(lambda: scalar(dsn, alive), 20, "registration")
    time.sleep(1)  # past its first claims
    jobs = 20
    for n in range(1, jobs + 1):
        enqueue_batch(dsn, "noop", ["{}"])
        wait_until(lambda n=n: outcome_count(dsn, entrypoint="noop") == n, 5, f"job {n} to complete")
        time.sleep(0.05)
    assert worker.terminate() == 0

    def claims() -> int:
        return scalar(
            dsn,
            "SELECT coalesce(sum(calls), 0)::int FROM pg_stat_user_functions"
            " WHERE schemaname = 'pgq' AND funcname = 'claim_v3'",
        )

    wait_until(lambda: claims() >= jobs, 10, "the worker's backends to report")
    # One claim per job, and a few while it started (the first poll, LISTEN established).
    assert claims() <= jobs + 3, claims()


@pytest.mark.parametrize("flag", [None, "--no-gc-tuning"])
def test_pgq_worker_tunes_the_garbage_collector(dsn: str, ledger: Path, spawn, flag: str | None) -> None:
    # Loaded code frozen out of the collector's scans, young collections every 10k; or, with
    # --no-gc-tuning, Python's defaults.
    worker = spawn(*([flag] if flag else []))
    enqueue_batch(dsn, "gc_state", ["{}"])
    wait_until(lambda: ledger_lines(ledger), 20, "the job to run")
    assert worker.terminate() == 0
    [(_, _, _, event, _)] = ledger_lines(ledger)
    _, young, frozen = event.split(":")
    if flag:
        assert (int(young), int(frozen)) == (gc.get_threshold()[0], 0)
    else:
        assert int(young) == 10_000
        assert int(frozen) > 10_000, "the modules loaded at start are frozen"


@pytest.mark.parametrize(
    ("flag", "module"), [(None, "uvloop"), ("--event-loop=asyncio", "asyncio.unix_events")]
)
def test_pgq_worker_runs_on_uvloop_unless_told_otherwise(
    dsn: str, ledger: Path, spawn, flag: str | None, module: str
) -> None:
    # uvloop is a dependency, so `auto` picks it; asyncio's loop stays one flag away. Both
    # also run a timeout (a timer that cancels the handler's task) and a SIGTERM.
    scalar(dsn, "SELECT pgq.configure('slow', timeout => '1 second', max_attempts => 1)")
    (timed,) = enqueue_batch(dsn, "slow", ['{"sleep": 30}'])
    enqueue_batch(dsn, "event_loop", ["{}"])
    worker = spawn(*([flag] if flag else []))
    wait_until(lambda: scalar(dsn, "SELECT pgq.job_status(%s)", (timed,)) == "dead", 15, "the timeout")
    assert "timeout" in scalar(dsn, "SELECT last_error FROM pgq.jobs WHERE id = %s", (timed,))
    assert worker.terminate() == 0
    assert [e for *_, e, _ in ledger_lines(ledger) if e.startswith("loop:")] == [f"loop:{module}"]


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_event_loop_choices_and_bad_names(monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_on("auto", _loop_module) == "uvloop"
    assert run_on("uvloop", _loop_module) == "uvloop"
    assert run_on("asyncio", _loop_module) == "asyncio.unix_events"
    # A bad name is refused before anything runs (a Worker would not register).
    started: list[str] = []

    async def main() -> None:
        started.append("ran")

    with pytest.raises(ValueError, match="event_loop must be one of auto, uvloop, asyncio, not 'trio'"):
        run_on("trio", main)
    with pytest.raises(ValueError, match="event_loop must be one of"):
        pgq.Worker().run(event_loop="trio")
    assert started == []
    # Without uvloop (Windows): auto falls back to asyncio's loop; asking for uvloop says why.
    monkeypatch.setitem(sys.modules, "uvloop", None)
    assert run_on("auto", _loop_module) == "asyncio.unix_events"
    with pytest.raises(ImportError, match="needs uvloop"):
        run_on("uvloop", main)
    assert started == []


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        ("gc.disable()", (700, 0, False)),
        ("gc.set_threshold(0)", (0, 0, True)),
        ("gc.set_threshold(123456)", (123456, 1, True)),
    ],
)
def test_gc_tuning_leaves_a_collector_the_application_configured(setup: str, expected: tuple) -> None:
    code = (
        "import gc; from pgq.cli.worker import tune_gc; gc.set_threshold(700); "
        f"{setup}; tune_gc(); print(gc.get_threshold()[0], int(gc.get_freeze_count() > 0), gc.isenabled())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert (int(out[0]), int(out[1]), out[2] == "True") == expected


def test_gc_tuning_collects_what_loading_left_before_freezing() -> None:
    # A cycle that was garbage at freeze time would otherwise be kept for the process's life.
    code = (
        "import gc, weakref; from pgq.cli.worker import tune_gc\n"
        "gc.disable()  # no automatic collection frees the cycle first\n"
        "class Node: pass\n"
        "a = Node(); a.me = a; alive = weakref.ref(a); del a\n"
        "gc.enable(); tune_gc(); print(alive() is None)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True"]


def test_transactional_handler_commits_with_the_completion(dsn: str, ledger: Path, spawn) -> None:
    execute(dsn, "CREATE TABLE IF NOT EXISTS tx_effects (job_id bigint)")
    scalar(dsn, "SELECT pgq.configure('tx', max_attempts => 2, backoff_base => '100 milliseconds')")
    (ok,) = enqueue_batch(dsn, "tx", ["{}"])
    (bad,) = enqueue_batch(dsn, "tx", ['{"fail": true}'])
    worker = spawn(APP_POLL="0.1")
    wait_until(lambda: scalar(dsn, "SELECT pgq.job_status(%s)", (bad,)) == "dead", 20, "the failing job")
    wait_until(lambda: scalar(dsn, "SELECT pgq.job_status(%s)", (ok,)) == "succeeded", 20, "the good job")
    assert worker.terminate() == 0
    effects = Counter(r[0] for r in execute(dsn, "SELECT job_id FROM tx_effects"))
    assert effects == {ok: 1}, "writes of the failed runs were rolled back with them"


def test_worker_logs_every_outcome_as_json_lines(dsn: str, ledger: Path) -> None:
    ok_id = enqueue_batch(dsn, "noop", ["{}"])[0]
    bad_id = scalar(dsn, "SELECT pgq.enqueue('flaky', '{\"fail_times\": 9}', max_attempts => 1)")
    log_path = ledger / "worker.json"
    env = {**os.environ, "PYTHONPATH": str(TESTS_PY), "LEDGER_DIR": str(ledger)}
    with open(log_path, "w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pgq",
                "worker",
                APP_SPEC,
                "--dsn",
                dsn,
                "--log-format",
                "json",
                "--log-jobs",
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: outcome_count(dsn) == 1 and outcome_count(dsn, "failed") == 1, 30, "both jobs")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    lines = [json.loads(line) for line in log_path.read_text().splitlines()]
    jobs = {line["job_id"]: line for line in lines if "job_id" in line}
    assert jobs[ok_id]["outcome"] == "succeeded" and jobs[ok_id]["level"] == "INFO"
    assert (
        jobs[ok_id]["entrypoint"] == "noop" and jobs[ok_id]["attempt"] == 1 and jobs[ok_id]["duration"] >= 0
    )
    assert jobs[bad_id]["outcome"] == "failed" and jobs[bad_id]["level"] == "WARNING"
    assert "dead" in jobs[bad_id]["message"]


def test_worker_logs_failures_and_a_summary_but_no_line_per_success_by_default(
    dsn: str, ledger: Path, spawn
) -> None:
    """Without --log-jobs a busy worker's log is not a line per job: failed jobs still get
    theirs (WARNING), successes are summed up at INFO every summary_interval seconds."""
    ok_ids = enqueue_batch(dsn, "noop", ["{}"] * 3)
    bad_id = scalar(dsn, "SELECT pgq.enqueue('flaky', '{\"fail_times\": 9}', max_attempts => 1)")
    worker = spawn("--log-format", "json", APP_SUMMARY="0.3")

    def summaries() -> list[dict]:
        lines = [json.loads(line) for line in worker.log().splitlines() if line.startswith("{")]
        return [line for line in lines if "succeeded" in line]

    def summed() -> tuple[int, int]:
        return sum(s["succeeded"] for s in summaries()), sum(s["failed"] for s in summaries())

    wait_until(lambda: outcome_count(dsn) == 3 and outcome_count(dsn, "failed") == 1, 30, "the jobs")
    wait_until(lambda: summed() == (3, 1), 10, "summaries of the three successes and the failure")
    assert worker.terminate() == 0
    lines = [json.loads(line) for line in worker.log().splitlines()]
    per_job = {line["job_id"]: line for line in lines if "job_id" in line}
    assert set(per_job) == {bad_id} and per_job[bad_id]["level"] == "WARNING", per_job
    assert not set(ok_ids) & set(per_job)
    assert summed() == (3, 1)
    assert all(s["level"] == "INFO" and s["logger"] == "pgq.worker" for s in summaries())
    assert all(s["seconds"] > 0 and s["running"] >= 0 for s in summaries())
    # An idle worker says nothing more: no line for intervals with no job settled or running.
    assert all(s["succeeded"] + s["failed"] + s["running"] > 0 for s in summaries())


def test_summary_interval_is_checked() -> None:
    with pytest.raises(ValueError, match="summary_interval"):
        pgq.Worker(summary_interval=-1)
    assert pgq.Worker(summary_interval=0).summary_interval == 0  # no summaries
    assert pgq.Worker().summary_interval == 10.0


def test_defaults_run_500_async_handlers_and_claim_no_more_than_that(dsn: str, tmp_path: Path) -> None:
    """A Worker whose handlers are all `async def`, with no settings: 500 run at once,
    claimed in one round trip (they share the claim's started_at), and the jobs beyond stay
    queued for other workers (a claim never takes more than the free slots); with a thread
    handler among them, 20."""
    (tmp_path / "defaults_app.py").write_text(
        "import asyncio, time, pgq\n"
        "worker = pgq.Worker()\n"
        "threads = pgq.Worker()\n"
        "@worker.entrypoint('wait')\n"
        "@threads.entrypoint('wait')\n"
        "async def wait(job):\n"
        "    await asyncio.sleep(60)\n"
        "@threads.entrypoint('sync')\n"
        "def sync(job):\n"
        "    time.sleep(60)\n"
    )
    enqueue_batch(dsn, "wait", ["{}"] * 700)

    def running() -> int:
        return scalar(dsn, "SELECT count(*) FROM pgq._jobs WHERE entrypoint = 'wait' AND status = 'running'")

    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    for attr, slots in (("worker", 500), ("threads", 20)):
        argv = [sys.executable, "-m", "pgq", "worker", f"defaults_app:{attr}", "--dsn", dsn]
        with open(tmp_path / f"{attr}.log", "w") as out:
            proc = subprocess.Popen(
                [*argv, "--grace-period", "0"], env=env, stdout=out, stderr=subprocess.STDOUT
            )
        try:
            wait_until(lambda: running() == slots, 30, f"{slots} running jobs")  # noqa: B023
            time.sleep(1.0)  # a claim for more would have run by now: the worker idles
            assert running() == slots
            claims = scalar(
                dsn,
                "SELECT count(DISTINCT started_at) FROM pgq._jobs"
                " WHERE entrypoint = 'wait' AND status = 'running'",
            )
            assert claims == 1, "claimed in more than one round trip"
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0, (tmp_path / f"{attr}.log").read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        wait_until(lambda: running() == 0, 10, "the jobs released")


def test_worker_serves_its_own_prometheus_metrics(dsn: str, ledger: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    enqueue_batch(dsn, "noop", ["{}"] * 5)
    scalar(dsn, "SELECT pgq.enqueue('flaky', '{\"fail_times\": 9}', max_attempts => 1)")
    env = {**os.environ, "PYTHONPATH": str(TESTS_PY), "LEDGER_DIR": str(ledger)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pgq",
            "worker",
            APP_SPEC,
            "--dsn",
            dsn,
            "--metrics-port",
            str(port),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: outcome_count(dsn) == 5 and outcome_count(dsn, "failed") == 1, 30, "the jobs")

        def samples() -> dict[tuple[str, tuple], float]:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                text = resp.read().decode()
            return {
                (s.name, tuple(sorted(s.labels.items()))): s.value
                for family in text_string_to_metric_families(text)
                for s in family.samples
            }

        got = wait_until(
            lambda: (
                (s := samples()).get(
                    ("pgq_worker_jobs_total", (("entrypoint", "noop"), ("outcome", "succeeded")))
                )
                == 5
                and s
            ),
            10,
            "the counters",
        )
        assert got[("pgq_worker_jobs_total", (("entrypoint", "flaky"), ("outcome", "failed")))] == 1
        assert got[("pgq_worker_handler_seconds_count", (("entrypoint", "noop"),))] == 5
        assert got[("pgq_worker_slots", ())] == 20
        assert got[("pgq_worker_busy_slots", ())] == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
