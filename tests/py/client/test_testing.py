"""pgq.testing: drain(), the assertions, and the pytest plugin's fixtures (run in inner
pytest sessions through pytester, and used directly here: this suite loads the plugin too).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

import pgq
from conftest import ADMIN_DSN
from pgq.testing import (
    DrainError,
    assert_enqueued,
    assert_not_enqueued,
    drain,
    drain_async,
    enqueued,
)

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[3]


# --- drain ------------------------------------------------------------------------------


def test_drain_runs_sync_and_async_handlers_and_follows_the_jobs_they_enqueue(
    pgq_dsn: str, pgq_client: pgq.Client
) -> None:
    worker = pgq.Worker(pgq_dsn)
    seen: list[tuple[str, object]] = []

    @worker.entrypoint("signup")
    async def signup(job: pgq.Job) -> dict[str, str]:
        seen.append(("signup", job.payload))
        pgq_client.enqueue("welcome", {"to": job.payload["email"]})
        return {"user": job.payload["email"]}

    @worker.entrypoint("welcome")
    def welcome(job: pgq.Job) -> None:
        seen.append(("welcome", job.payload))

    job_id = pgq_client.enqueue("signup", {"email": "a@example.com"})
    result = drain(worker)

    assert seen == [("signup", {"email": "a@example.com"}), ("welcome", {"to": "a@example.com"})]
    assert result.counts == {"succeeded": 2}
    assert (result.succeeded, result.failed, result.queued, result.dead) == (2, 0, 0, [])
    assert pgq_client.result(job_id).result == {"user": "a@example.com"}
    assert pgq_client.workers()[0].state != "alive", "drain unregisters its worker"


def test_drain_with_nothing_queued_runs_nothing(pgq_dsn: str) -> None:
    worker = pgq.Worker(pgq_dsn)
    worker.entrypoint("noop")(lambda job: None)
    assert drain(worker).runs == []


def test_drain_runs_only_the_workers_entrypoints(pgq_dsn: str, pgq_client: pgq.Client) -> None:
    worker = pgq.Worker(pgq_dsn)
    worker.entrypoint("mine")(lambda job: None)
    pgq_client.enqueue("mine")
    pgq_client.enqueue("theirs")
    assert drain(worker).succeeded == 1
    assert_enqueued(pgq_client, "theirs")


def test_drain_takes_the_database_from_its_dsn_argument(pgq_dsn: str, pgq_client: pgq.Client) -> None:
    worker = pgq.Worker()  # as in an application module: the DSN comes from elsewhere
    worker.entrypoint("noop")(lambda job: None)
    pgq_client.enqueue("noop")
    assert drain(worker, dsn=pgq_dsn).succeeded == 1


def test_a_failing_handler_raises_with_its_exception_as_cause(pgq_dsn: str, pgq_client: pgq.Client) -> None:
    worker = pgq.Worker(pgq_dsn)

    @worker.entrypoint("charge")
    def charge(job: pgq.Job) -> None:
        raise ValueError(f"card declined for order {job.payload['order']}")

    job_id = pgq_client.enqueue("charge", {"order": 7})
    with pytest.raises(DrainError) as raised:
        drain(worker)
    message = str(raised.value)
    assert f"job {job_id} (charge) attempt 1: ValueError: card declined for order 7" in message
    assert isinstance(raised.value.__cause__, ValueError)
    assert raised.value.result.failed == 1
    # The real pgq.fail ran: the job waits for its retry, with the error recorded.
    [row] = pgq_client.jobs("charge")
    assert (row.status, row.attempt) == ("queued", 2)  # its next run is attempt 2
    assert "card declined" in (row.last_error or "")


def test_without_run_future_a_retry_waits_for_its_backoff(pgq_dsn: str, pgq_client: pgq.Client) -> None:
    worker = pgq.Worker(pgq_dsn)

    @worker.entrypoint("flaky")
    async def flaky(job: pgq.Job) -> None:
        raise RuntimeError("boom")

    pgq_client.enqueue("flaky")
    result = drain(worker, raise_errors=False)
    assert result.counts == {"failed": 1}
    assert (result.queued, result.dead) == (1, [])
    [run] = result.failures
    assert isinstance(run.exception, RuntimeError)
    assert run.error is not None and "RuntimeError: boom" in run.error


def test_run_future_runs_every_attempt_until_the_job_succeeds_or_is_dead(
    pgq_dsn: str, pgq_client: pgq.Client
) -> None:
    worker = pgq.Worker(pgq_dsn)
    attempts: list[int] = []

    @worker.entrypoint("third_time")
    def third_time(job: pgq.Job) -> None:
        attempts.append(job.attempt)
        if job.attempt < 3:
            raise RuntimeError("not yet")

    @worker.entrypoint("never")
    def never(job: pgq.Job) -> None:
        raise RuntimeError("never")

    pgq_client.enqueue("third_time")
    dead_id = pgq_client.enqueue("never", max_attempts=3)
    result = drain(worker, run_future=True, raise_errors=False)
    assert attempts == [1, 2, 3]
    assert result.counts == {"failed": 5, "succeeded": 1}
    assert result.dead == [dead_id]
    assert pgq_client.job_status(dead_id) == "dead"


def test_run_future_runs_jobs_enqueued_for_later(pgq_dsn: str, pgq_client: pgq.Client) -> None:
    worker = pgq.Worker(pgq_dsn)
    worker.entrypoint("later")(lambda job: None)
    pgq_client.enqueue("later", run_at=timedelta(days=1))
    assert drain(worker).queued == 1
    assert drain(worker, run_future=True).succeeded == 1


def test_a_snoozed_job_stays_queued(pgq_dsn: str, pgq_client: pgq.Client) -> None:
    worker = pgq.Worker(pgq_dsn)

    @worker.entrypoint("poll")
    def poll(job: pgq.Job) -> None:
        raise pgq.Snooze(3600)

    pgq_client.enqueue("poll")
    result = drain(worker)
    assert (result.counts, result.queued) == ({"snoozed": 1}, 1)


def test_drain_releases_jobs_that_depend_on_those_it_ran(pgq_dsn: str, pgq_client: pgq.Client) -> None:
    worker = pgq.Worker(pgq_dsn)
    order: list[str] = []
    worker.entrypoint("step")(lambda job: order.append(job.payload))
    first = pgq_client.enqueue("step", "first")
    pgq_client.enqueue("step", "second", depends_on=[first])
    result = drain(worker)
    assert order == ["first", "second"]
    assert (result.succeeded, result.waiting) == (2, 0)


def test_transactional_handlers_commit_with_their_job(pgq_dsn: str, pgq_client: pgq.Client) -> None:
    with psycopg.connect(pgq_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE sent (email text)")
    worker = pgq.Worker(pgq_dsn)

    @worker.entrypoint("send", transactional=True)
    def send(job: pgq.Job, conn: psycopg.Connection) -> None:
        conn.execute("INSERT INTO sent VALUES (%s)", (job.payload,))
        if job.payload == "bad":
            raise ValueError("bad address")

    pgq_client.enqueue("send", "ok")
    pgq_client.enqueue("send", "bad")
    result = drain(worker, raise_errors=False)
    assert result.counts == {"succeeded": 1, "failed": 1}
    with psycopg.connect(pgq_dsn) as conn:
        assert conn.execute("SELECT email FROM sent").fetchall() == [("ok",)]


def test_max_jobs_stops_a_job_that_keeps_enqueuing_itself(pgq_dsn: str, pgq_client: pgq.Client) -> None:
    worker = pgq.Worker(pgq_dsn)

    @worker.entrypoint("forever")
    def forever(job: pgq.Job) -> None:
        pgq_client.enqueue("forever", job.payload + 1)

    pgq_client.enqueue("forever", 0)
    with pytest.raises(DrainError, match="max_jobs=5 deliveries ran and jobs are still due") as raised:
        drain(worker, max_jobs=5)
    assert raised.value.result.succeeded == 5
    assert_enqueued(pgq_client, "forever", payload=5, count=1)


def test_exactly_max_jobs_due_is_not_an_error(pgq_dsn: str, pgq_client: pgq.Client) -> None:
    worker = pgq.Worker(pgq_dsn)
    worker.entrypoint("noop")(lambda job: None)
    pgq_client.enqueue_batch("noop", [1, 2, 3])
    assert drain(worker, max_jobs=3, concurrency=2).succeeded == 3


def test_the_timeout_stops_a_handler_that_does_not_return(pgq_dsn: str, pgq_client: pgq.Client) -> None:
    worker = pgq.Worker(pgq_dsn)
    never = asyncio.Event()

    @worker.entrypoint("stuck")
    async def stuck(job: pgq.Job) -> None:
        await never.wait()

    job_id = pgq_client.enqueue("stuck")
    with pytest.raises(DrainError, match=r"still running after 0\.5 s"):
        drain(worker, timeout=0.5)
    # Unregistering gave the job back, unharmed: no attempt spent.
    [row] = pgq_client.jobs("stuck")
    assert (row.id, row.status, row.attempt) == (job_id, "queued", 1)


def test_drain_async_in_a_running_loop_and_drain_refuses_one(pgq_dsn: str, pgq_client: pgq.Client) -> None:
    worker = pgq.Worker(pgq_dsn)
    worker.entrypoint("noop")(lambda job: None)
    pgq_client.enqueue("noop")

    async def main() -> int:
        with pytest.raises(RuntimeError, match="drain_async"):
            drain(worker)
        return (await drain_async(worker)).succeeded

    assert asyncio.run(main()) == 1


def test_a_drained_worker_is_left_as_it_was(pgq_dsn: str, pgq_client: pgq.Client) -> None:
    worker = pgq.Worker(pgq_dsn)

    @worker.entrypoint("fail")
    def fail(job: pgq.Job) -> None:
        raise ValueError("x")

    handlers = dict(worker._handlers)
    pgq_client.enqueue("fail")
    drain(worker, raise_errors=False)
    assert worker._handlers == handlers
    assert worker.observers == []


def test_the_worker_runs_after_a_drain(pgq_dsn: str, pgq_client: pgq.Client) -> None:
    worker = pgq.Worker(pgq_dsn, poll_interval=0.05)
    done = threading.Event()
    worker.entrypoint("noop")(lambda job: done.set() if job.payload == 2 else None)
    pgq_client.enqueue("noop", 1)
    drain(worker)
    pgq_client.enqueue("noop", 2)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        assert done.wait(30)
    finally:
        worker.stop()
        thread.join(30)


# --- assertions -------------------------------------------------------------------------


def test_assert_enqueued_matches_payloads_by_containment(pgq_dsn: str, pgq_client: pgq.Client) -> None:
    pgq_client.enqueue("email", {"to": "a@example.com", "template": "welcome", "vars": {"n": 1, "m": 2}})
    pgq_client.enqueue("email", {"to": "b@example.com", "template": "welcome"}, priority=5)
    assert len(assert_enqueued(pgq_dsn, "email")) == 2
    assert_enqueued(pgq_dsn, "email", count=2)
    assert_enqueued(pgq_client, "email", payload={"template": "welcome"}, count=2)
    assert_enqueued(pgq_client, "email", payload={"vars": {"n": 1}}, count=1)
    assert_enqueued(pgq_client, "email", payload={"to": "b@example.com"}, priority=5)
    assert_not_enqueued(pgq_client, "email", payload={"to": "c@example.com"})
    assert_not_enqueued(pgq_client, "sms")
    assert_not_enqueued(pgq_client, "email", payload={"template": "welcome"}, exact=True)
    assert_enqueued(pgq_client, "email", payload={"to": "b@example.com", "template": "welcome"}, exact=True)


def test_assert_enqueued_lists_what_is_queued_when_it_fails(pgq_dsn: str, pgq_client: pgq.Client) -> None:
    first = pgq_client.enqueue("email", {"to": "a@example.com"})
    second = pgq_client.enqueue("sms", {"to": "+1"}, priority=3)
    with pytest.raises(AssertionError) as raised:
        assert_enqueued(pgq_client, "email", payload={"to": "z@example.com"})
    assert str(raised.value) == (
        "expected a job 'email' (queued or waiting)"
        " with payload containing {'to': 'z@example.com'}, found 0\n"
        "queued or waiting (2):\n"
        f"  job {first} 'email' [queued] payload={{'to': 'a@example.com'}}\n"
        f"  job {second} 'sms' [queued] priority=3 payload={{'to': '+1'}}"
    )
    with pytest.raises(AssertionError, match=r"expected 2 jobs 'email' .*found 1"):
        assert_enqueued(pgq_client, "email", count=2)
    with pytest.raises(AssertionError, match=r"expected no job 'sms' \(queued or waiting\), found 1"):
        assert_not_enqueued(pgq_client, "sms")


def test_assert_enqueued_on_an_empty_queue_says_so(pgq_dsn: str) -> None:
    with pytest.raises(AssertionError, match="nothing is queued or waiting"):
        assert_enqueued(pgq_dsn, "email")


def test_a_connection_sees_the_jobs_of_its_own_transaction(pgq_dsn: str, pgq_client: pgq.Client) -> None:
    with psycopg.connect(pgq_dsn) as conn:
        pgq_client.enqueue("email", {"to": "a@example.com"}, conn=conn)
        assert_enqueued(conn, "email", payload={"to": "a@example.com"})
        assert_not_enqueued(pgq_dsn, "email")
        conn.rollback()
        assert_not_enqueued(conn, "email")


def test_statuses_and_columns_filter_and_unknown_columns_are_refused(
    pgq_dsn: str, pgq_client: pgq.Client
) -> None:
    first = pgq_client.enqueue("a", dedupe_key="k1")
    pgq_client.enqueue("a", depends_on=[first])
    assert_enqueued(pgq_client, "a", dedupe_key="k1", count=1)
    assert_enqueued(pgq_client, "a", statuses=("waiting",), count=1)
    assert_enqueued(pgq_client, "a", concurrency_key=None, count=2)
    assert [job["id"] for job in enqueued(pgq_client, "a", statuses=("queued",))] == [first]
    with pytest.raises(TypeError, match=r"not a column of pgq\.jobs: colour"):
        assert_enqueued(pgq_client, "a", colour="red")


# --- the plugin -------------------------------------------------------------------------


def _prefix() -> str:
    return "pgqt" + uuid.uuid4().hex[:8]


def _databases(prefix: str) -> list[str]:
    with psycopg.connect(ADMIN_DSN, autocommit=True) as conn:
        rows = conn.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", (prefix + "%",))
        return sorted(row[0] for row in rows)


INNER_TESTS = """
import pgq
from pgq.testing import assert_enqueued, assert_not_enqueued

def test_one(pgq_client):
    pgq_client.enqueue("email", {"to": "a@example.com"})
    assert_enqueued(pgq_client, "email", payload={"to": "a@example.com"})

def test_two_starts_empty(pgq_dsn):
    assert_not_enqueued(pgq_dsn, "email")

def test_without_fixtures():
    pass
"""


def test_each_test_gets_a_database_of_its_own_and_nothing_is_left(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PGQ_TEST_DSN", raising=False)
    prefix = _prefix()
    pytester.makepyfile(INNER_TESTS)
    result = pytester.runpytest("--pgq-dsn", ADMIN_DSN, "--pgq-db-prefix", prefix, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    assert _databases(prefix) == []


def test_the_dsn_may_come_from_the_environment_or_the_ini_file(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = _prefix()
    pytester.makepyfile(INNER_TESTS)
    monkeypatch.setenv("PGQ_TEST_DSN", ADMIN_DSN)
    pytester.runpytest("--pgq-db-prefix", prefix).assert_outcomes(passed=3)
    monkeypatch.delenv("PGQ_TEST_DSN")
    pytester.makeini(f"[pytest]\npgq_dsn = {ADMIN_DSN}\npgq_db_prefix = {prefix}\n")
    pytester.runpytest().assert_outcomes(passed=3)
    assert _databases(prefix) == []


def test_without_a_dsn_only_the_tests_using_the_fixtures_fail_and_say_why(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PGQ_TEST_DSN", raising=False)
    pytester.makepyfile(INNER_TESTS)
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(["*the pgq fixtures need a PostgreSQL server*--pgq-dsn*PGQ_TEST_DSN*"])


def test_a_suite_without_pgq_fixtures_opens_no_connection(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An unreachable server: any connection attempt would fail the run.
    monkeypatch.setenv("PGQ_TEST_DSN", "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1")
    pytester.makepyfile("def test_plain():\n    assert True\n")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    assert pytester.parseconfig().pluginmanager.hasplugin("pgq"), "the plugin was loaded"


def test_leftovers_of_dead_runs_are_dropped_and_live_runs_are_left_alone(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PGQ_TEST_DSN", raising=False)
    prefix = _prefix()
    dead, alive = "0123456789", "abcdefabcd"
    others = [f"{prefix}_{dead}_1x", f"{prefix}_not_a_run_1"]  # not names the plugin makes
    names = [f"{prefix}_{dead}_tpl", f"{prefix}_{dead}_3", f"{prefix}_{alive}_1", *others]
    with psycopg.connect(ADMIN_DSN, autocommit=True) as conn:
        for name in names:
            conn.execute(f'CREATE DATABASE "{name}"')
        # The run `alive` is in progress: it holds its lock.
        conn.execute("SELECT pg_advisory_lock(hashtextextended('pgq.testing:' || %s, 0))", (alive,))
        try:
            pytester.makepyfile(INNER_TESTS)
            pytester.runpytest("--pgq-dsn", ADMIN_DSN, "--pgq-db-prefix", prefix).assert_outcomes(passed=3)
            assert _databases(prefix) == sorted([f"{prefix}_{alive}_1", *others])
        finally:
            for name in names:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}"')


def test_parallel_test_processes_use_databases_of_their_own(pytester: pytest.Pytester) -> None:
    # Two sessions at once, as two pytest-xdist workers or two CI jobs on one server: each
    # builds its own template; neither drops the other's databases as leftovers.
    prefix = _prefix()
    pytester.makepyfile(
        test_a="""
import psycopg

def test_a(pgq_dsn, pgq_databases):
    # Wait here, holding a database, until the outer test lets both sessions go on.
    with psycopg.connect(pgq_databases.admin_dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(4242)")
        conn.execute("SELECT pg_advisory_unlock(4242)")
"""
    )
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    command += ["--pgq-dsn", ADMIN_DSN, "--pgq-db-prefix", prefix]
    with psycopg.connect(ADMIN_DSN, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(4242)")
        sessions = [
            subprocess.Popen(
                command, cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            for _ in "ab"
        ]
        try:
            # Both sessions are in their test, each holding a database of its own.
            deadline = time.monotonic() + 120
            while len([name for name in _databases(prefix) if not name.endswith("_tpl")]) < 2:
                assert time.monotonic() < deadline, "the sessions did not start"
                time.sleep(0.05)
        finally:
            conn.execute("SELECT pg_advisory_unlock(4242)")
        outputs = [session.communicate(timeout=120)[0] for session in sessions]
    assert [session.returncode for session in sessions] == [0, 0], outputs
    assert _databases(prefix) == []


# --- the example of docs/testing.md --------------------------------------------------------


def test_the_docs_example_is_the_test_file_the_suite_runs() -> None:
    example = (ROOT / "tests/py/client/test_example_handlers.py").read_text()
    page = (ROOT / "docs/testing.md").read_text()
    assert f"```python\n{example}```\n" in page
