"""Data a worker cannot settle as it is, and settlements that wait: none may stop a worker.

A handler's result or error that PostgreSQL refuses, a payload that Python cannot decode,
settlements stuck behind another transaction's row locks. Each once jammed a real `pgq
worker` process (a completer retrying one statement for ever, a slot never given back, the
process ending, the leases of healthy jobs lost); each now costs only its own job.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg
import pytest

from support.workers import WorkerProcess, execute, scalar, wait_until

KINDS = ["nan", "nul", "surrogate"]


def _enqueue(dsn: str, entrypoint: str, payloads: list[str]) -> list[int]:
    rows = execute(
        dsn,
        "SELECT pgq.enqueue(%s, p::jsonb, max_attempts => 1) FROM unnest(%s::text[]) AS p",
        (entrypoint, payloads),
    )
    return [r[0] for r in rows]


def _statuses(dsn: str, ids: list[int]) -> dict[int, str | None]:
    return {i: scalar(dsn, "SELECT pgq.job_status(%s)", (i,)) for i in ids}


def _last_errors(dsn: str, ids: list[int]) -> list[str]:
    rows = execute(dsn, "SELECT last_error FROM pgq._jobs WHERE id = ANY(%s) ORDER BY id", (ids,))
    return [r[0] for r in rows]


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    return tmp_path


def _settled_all(dsn: str, bad: list[int], good: list[int]) -> bool:
    statuses = _statuses(dsn, bad + good)
    return all(statuses[i] == "dead" for i in bad) and all(statuses[i] == "succeeded" for i in good)


def _settle(dsn: str, ledger: Path, bad: list[int], good: list[int], **env: str) -> tuple[list[str], str]:
    """Run a worker until the bad jobs are dead and the good ones succeeded; it must still be
    running then and stop cleanly. Returns the bad jobs' last errors and the worker's log."""
    proc = WorkerProcess(dsn, ledger, **env)
    try:
        wait_until(lambda: _settled_all(dsn, bad, good), 30, "the jobs to settle")
        assert proc.proc.poll() is None, proc.log()
    finally:
        assert proc.terminate() == 0, proc.log()
    return _last_errors(dsn, bad), proc.log()


def test_results_that_postgresql_refuses_fail_their_own_jobs_only(dsn: str, ledger: Path) -> None:
    """NaN, a NUL, a lone surrogate: json.dumps writes them, jsonb refuses them. The
    completion of the whole batch failed, and was retried for ever: every job after it ran
    but stayed running."""
    bad = _enqueue(dsn, "bad_result", [f'{{"kind": "{k}"}}' for k in KINDS])
    good = _enqueue(dsn, "noop", ["{}"] * 5)
    errors, log = _settle(dsn, ledger, bad, good)
    for error in errors:
        assert "not JSON that PostgreSQL accepts" in error
    assert "complete failed" not in log


def test_error_texts_that_postgresql_refuses_are_recorded(dsn: str, ledger: Path) -> None:
    """A NUL or a lone surrogate in an exception's message: the failure could not be
    recorded, and with two slots the worker, retrying it for ever, ran nothing else."""
    bad = _enqueue(dsn, "bad_error", ['{"kind": "nul"}', '{"kind": "surrogate"}'])
    good = _enqueue(dsn, "noop", ["{}"] * 3)
    (nul, surrogate), _ = _settle(dsn, ledger, bad, good, APP_CONCURRENCY="2")
    assert "cannot open a\\x00b" in nul
    assert "cannot open caf\\udce9.txt" in surrogate


def test_a_payload_python_cannot_decode_fails_its_job_and_not_the_worker(dsn: str, ledger: Path) -> None:
    """jsonb that Python's decoder refuses (an integer of 5000 digits) failed the whole
    claim, and the worker process with it, on every delivery: its batch's other jobs went
    dead as 'lost their worker'."""
    huge = "9" * 5000
    bad = _enqueue(dsn, "noop", [f'{{"n": {huge}}}', '{"a": ' * 3000 + "1" + "}" * 3000])
    good = _enqueue(dsn, "noop", ["{}"] * 3)
    errors, _ = _settle(dsn, ledger, bad, good)
    for error in errors:
        assert "payload is JSON that Python cannot decode" in error


def test_settlements_waiting_for_row_locks_leave_the_heartbeat_a_connection(dsn: str, ledger: Path) -> None:
    """Four failures waited for rows another transaction held (an application's pgq.cancel
    left open) and took all four connections of the worker's pool: its heartbeats found
    none, the sweep found it dead, and a healthy job was taken from it and run again. Nor
    may the stuck failures hold up the completion of a healthy job."""
    execute(dsn, "SELECT pgq.configure('fail_after', lease => '2 seconds')")
    healthy = _enqueue(dsn, "slow", ['{"sleep": 3}'])[0]
    failing = _enqueue(dsn, "fail_after", ['{"sleep": 1}'] * 4)
    proc = WorkerProcess(dsn, ledger, APP_CONCURRENCY="10")
    stop = threading.Event()

    def sweep() -> None:  # pg_cron's sweep, once a second instead of once a minute
        while not stop.wait(0.5):
            execute(dsn, "SELECT pgq.reap()")

    sweeper = threading.Thread(target=sweep)
    try:
        running = "SELECT count(*) FROM pgq._jobs WHERE status = 'running'"
        wait_until(lambda: scalar(dsn, running) == 5, 30, "the five jobs to run")
        with psycopg.connect(dsn) as holder:
            holder.execute("SELECT id FROM pgq._jobs WHERE id = ANY(%s) FOR UPDATE", (failing,))
            sweeper.start()
            # The failures wait; the healthy job ends meanwhile; two leases and a half pass.
            time.sleep(5)
            assert _statuses(dsn, [healthy])[healthy] == "succeeded", proc.log()
            assert scalar(dsn, "SELECT state FROM pgq.workers") == "alive", proc.log()
        deliveries = scalar(dsn, "SELECT deliveries FROM pgq.outcomes WHERE job_id = %s", (healthy,))
        assert deliveries == 1
    finally:
        stop.set()
        if sweeper.is_alive():
            sweeper.join()
        assert proc.terminate() == 0, proc.log()


def test_a_completion_the_database_refuses_fails_only_that_job(dsn: str, monkeypatch) -> None:
    """The last line of defence behind check_result: a batch whose completion PostgreSQL
    refuses for one job's data is completed job by job, and that job fails (it is retried,
    then dead) instead of being delivered again and again."""
    import pgq
    from pgq.testing import drain
    from pgq.worker import executor as worker_module

    monkeypatch.setattr(worker_module, "check_result", lambda value: value)  # let NaN through
    app = pgq.Worker(batch_size=10, concurrency=10)

    @app.entrypoint("results")
    async def results(job: pgq.Job) -> object:
        return {"v": float("nan")} if job.payload["bad"] else {"v": 1}

    ids = _enqueue(dsn, "results", ['{"bad": false}', '{"bad": true}', '{"bad": false}'])
    drain(app, dsn=dsn, raise_errors=False, concurrency=10)
    assert _statuses(dsn, ids) == {ids[0]: "succeeded", ids[1]: "dead", ids[2]: "succeeded"}
    [error] = _last_errors(dsn, [ids[1]])
    assert error.startswith("its result could not be stored:")
