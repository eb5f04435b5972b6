"""The `pgq` queue commands: click's CliRunner for each, and the real console script."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner, Result

from pgq import Client
from pgq.cli import main


@pytest.fixture
def client(dsn: str) -> Iterator[Client]:
    with Client(dsn) as c:
        yield c


def run(dsn: str, *args: str, stdin: str | None = None) -> Result:
    """`pgq COMMAND --dsn DSN ARGS...` in-process."""
    command, *rest = args
    return CliRunner().invoke(main, [command, "--dsn", dsn, *rest], input=stdin)


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


def failed(result: Result) -> str:
    """A clean failure: exit 1, one line on stderr, no traceback. Returns that line."""
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


# --- status --------------------------------------------------------------------------------


def test_status_empty(dsn: str) -> None:
    out = ok(run(dsn, "status"))
    assert "queues: none" in out and "workers: none" in out


def test_status_prints_queues_and_workers(dsn: str, client: Client, conn: psycopg.Connection) -> None:
    client.enqueue_batch("email", [1, 2, 3])
    client.enqueue("email", run_at=timedelta(hours=1))
    client.pause("email")
    client.configure("sms", concurrency=7)
    conn.execute("SELECT pgq.register_worker(name => 'box-1', entrypoints => ARRAY['email'])")
    lines = ok(run(dsn, "status")).splitlines()
    header = next(line for line in lines if line.startswith("entrypoint"))
    for column in ["queued", "scheduled", "running", "dead", "oldest queued age", "paused"]:
        assert column in header
    assert "concurrency" in header
    email = next(line for line in lines if line.startswith("email")).split()
    assert email[1:6] == ["3", "1", "0", "0", "0"]  # queued, scheduled, waiting, running, dead
    assert email[-2:] == ["yes", "-"]  # paused, no concurrency limit
    sms = next(line for line in lines if line.startswith("sms")).split()
    assert sms[-2:] == ["no", "7"]
    worker = next(line for line in lines if line.startswith("box-1")).split()
    assert worker[1] == "alive" and worker[-1] == "0"
    assert all(line == line.rstrip() for line in lines)


# --- enqueue -------------------------------------------------------------------------------


def test_enqueue_prints_the_id(dsn: str, client: Client) -> None:
    out = ok(run(dsn, "enqueue", "email", '{"to": "a@b"}', "--priority", "5", "--max-attempts", "2"))
    job_id = int(out.strip())
    [job] = client.jobs()
    assert (job.id, job.payload, job.priority, job.max_attempts) == (job_id, {"to": "a@b"}, 5, 2)


def test_enqueue_without_payload_and_from_stdin(dsn: str, client: Client) -> None:
    first = int(ok(run(dsn, "enqueue", "ping")))
    second = int(ok(run(dsn, "enqueue", "ping", "-", stdin='{"from": "stdin"}\n')))
    payloads = {j.id: j.payload for j in client.jobs()}
    assert payloads == {first: None, second: {"from": "stdin"}}


def test_enqueue_dedupe_key(dsn: str) -> None:
    first = ok(run(dsn, "enqueue", "report", "--dedupe-key", "day-1"))
    assert ok(run(dsn, "enqueue", "report", "--dedupe-key", "day-1")) == first


def test_enqueue_run_at_and_delay(dsn: str, client: Client) -> None:
    when = datetime.now(timezone.utc) + timedelta(days=1)
    at_id = int(ok(run(dsn, "enqueue", "later", "--run-at", when.isoformat().replace("+00:00", "Z"))))
    delay_id = int(ok(run(dsn, "enqueue", "later", "--delay", "600")))
    jobs = {j.id: j for j in client.jobs()}
    assert abs(jobs[at_id].run_at - when) < timedelta(milliseconds=1)
    delay = jobs[delay_id].run_at - jobs[delay_id].enqueued_at
    assert timedelta(seconds=599) < delay <= timedelta(seconds=601)
    assert client.queues()[0].scheduled == 2


def test_enqueue_count_uses_batches(dsn: str, client: Client) -> None:
    result = run(dsn, "enqueue", "bulk", '{"n": 1}', "--count", "10005", "--priority", "3")
    assert ok(result).strip() == "enqueued 10005 jobs"
    [queue] = client.queues()
    assert queue.queued == 10005
    jobs = client.jobs(limit=10)
    assert {j.payload["n"] for j in jobs} == {1} and {j.priority for j in jobs} == {3}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["email", "{not json"], "PAYLOAD_JSON is not valid JSON"),
        (["email", "--run-at", "tomorrow"], "--run-at 'tomorrow' is not an ISO 8601 time"),
        (["email", "--run-at", "2030-01-01", "--delay", "5"], "exclude each other"),
        (["email", "--delay", "-1"], "--delay must not be negative"),
        (["email", "--count", "3", "--dedupe-key", "k"], "--count cannot be combined"),
        (["", "{}"], "invalid argument entrypoint"),
        (["email", "--max-attempts", "0"], "invalid argument max_attempts"),
    ],
)
def test_enqueue_bad_input_is_one_line(dsn: str, client: Client, args: list[str], message: str) -> None:
    assert message in failed(run(dsn, "enqueue", *args))
    assert client.jobs() == []


def test_debug_shows_the_exception(dsn: str) -> None:
    result = CliRunner().invoke(main, ["--debug", "enqueue", "--dsn", dsn, ""])
    assert result.exit_code == 1
    assert type(result.exception).__name__ == "InvalidArgument"


# --- jobs ----------------------------------------------------------------------------------


def test_jobs_table_and_filters(dsn: str, client: Client) -> None:
    ids = client.enqueue_batch("a", [1, 2, 3])
    client.enqueue("b", priority=9)
    out = ok(run(dsn, "jobs"))
    assert out.splitlines()[1].split()[:3] == ["id", "entrypoint", "status"]
    rows = [line.split() for line in out.splitlines()[3:]]
    assert [int(r[0]) for r in rows] == [*ids, ids[-1] + 1]
    assert rows[-1][1:4] == ["b", "queued", "9"]
    only_a = ok(run(dsn, "jobs", "--entrypoint", "a", "--limit", "2"))
    assert [int(line.split()[0]) for line in only_a.splitlines()[3:]] == ids[:2]
    assert ok(run(dsn, "jobs", "--status", "dead")).strip() == "jobs: none"


def test_jobs_rejects_unknown_status(dsn: str) -> None:
    result = run(dsn, "jobs", "--status", "finished")
    assert result.exit_code == 2 and "finished" in result.stderr


# --- cancel, retry, pause, resume ----------------------------------------------------------


def test_cancel(dsn: str, client: Client) -> None:
    ids = client.enqueue_batch("c", [1, 2])
    out = ok(run(dsn, "cancel", *map(str, ids), "999999"))
    assert out.strip() == "canceled 2 of 3 jobs"
    assert [client.job_status(i) for i in ids] == ["canceled", "canceled"]


def test_retry(dsn: str, client: Client, conn: psycopg.Connection) -> None:
    job_id = client.enqueue("dying", max_attempts=1)
    worker = conn.execute("SELECT pgq.register_worker('w', ARRAY['dying'])").fetchone()[0]
    conn.execute("SELECT pgq.claim(%s, ARRAY['dying'])", (worker,))
    conn.execute("SELECT pgq.fail(%s, %s, 'boom')", (worker, job_id))
    assert ok(run(dsn, "retry", str(job_id))).strip() == "re-queued 1 of 1 job"
    assert client.job_status(job_id) == "queued"


def test_cancel_needs_ids(dsn: str) -> None:
    assert run(dsn, "cancel").exit_code == 2


def test_pause_and_resume(dsn: str, client: Client) -> None:
    assert ok(run(dsn, "pause", "email")).strip() == "paused email"
    assert client.queues()[0].paused is True
    assert ok(run(dsn, "resume", "email")).strip() == "resumed email"
    assert client.queues()[0].paused is False


# --- configure -----------------------------------------------------------------------------


def test_configure_sets_and_shows(dsn: str, client: Client) -> None:
    out = ok(
        run(
            dsn,
            *("configure", "email", "--max-attempts", "8", "--backoff-base", "2 seconds"),
            *("--backoff-max", "10 minutes", "--lease", "45 seconds", "--timeout", "5 min"),
            *("--concurrency", "3", "--retention", "2 days"),
        )
    )
    assert out.strip() == (
        "email: max_attempts=8 backoff_base=2s backoff_max=10m00s lease=45s timeout=5m00s"
        " concurrency=3 retention=2d00h00m paused=no"
    )
    [queue] = client.queues()
    assert (queue.lease, queue.concurrency) == (timedelta(seconds=45), 3)
    assert ok(run(dsn, "configure", "email")) == out  # no options: show only
    assert "concurrency=unlimited" in ok(run(dsn, "configure", "email", "--concurrency", "0"))


def test_configure_unknown_entrypoint_shows_defaults(dsn: str, client: Client) -> None:
    assert "defaults apply" in ok(run(dsn, "configure", "nothing"))
    assert client.queues() == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--lease", "soon"], "invalid argument lease: 'soon' is not an interval"),
        (["--lease", "1 millisecond"], "invalid argument lease"),
        (["--max-attempts", "0"], "invalid argument max_attempts"),
        (["--backoff-base", "1 hour", "--backoff-max", "1 minute"], "invalid argument backoff_max"),
    ],
)
def test_configure_bad_input_is_one_line(dsn: str, args: list[str], message: str) -> None:
    assert message in failed(run(dsn, "configure", "email", *args))


def test_database_without_pgq_is_one_line(fresh_db: str) -> None:
    assert "pgq install" in failed(run(fresh_db, "status"))


def test_unreachable_database_is_one_line() -> None:
    line = failed(run("postgresql://postgres@127.0.0.1:1/nowhere", "status"))
    assert "127.0.0.1" in line


# --- the installed console script ----------------------------------------------------------


def pgq_script() -> str:
    beside = Path(sys.executable).parent / "pgq"
    found = str(beside) if beside.exists() else shutil.which("pgq")
    assert found, "the pgq console script is not installed (pip install -e .)"
    return found


def script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([pgq_script(), *args], capture_output=True, text=True, timeout=60, check=False)


def test_console_script_exit_codes(dsn: str, client: Client) -> None:
    done = script("enqueue", "--dsn", dsn, "email", '{"to": "a@b"}')
    assert done.returncode == 0, done.stderr
    job_id = int(done.stdout.strip())
    assert client.job_status(job_id) == "queued"

    done = script("status", "--dsn", dsn)
    assert done.returncode == 0 and "email" in done.stdout

    bad_input = (
        ["enqueue", "--dsn", dsn, "email", "{oops"],
        ["enqueue", "--dsn", dsn, "", "{}"],
        ["configure", "--dsn", dsn, "email", "--lease", "soon"],
    )
    for args in bad_input:
        done = script(*args)
        assert done.returncode == 1
        assert "Traceback" not in done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr

    done = script("--debug", "enqueue", "--dsn", dsn, "")
    assert done.returncode == 1 and "Traceback" in done.stderr
