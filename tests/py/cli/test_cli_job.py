"""`pgq job`, `pgq wait`, `pgq jobs` for finished jobs, `pgq --version`, and tables that
fit the terminal."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from uuid import UUID

import psycopg
import pytest
from click.testing import CliRunner, Result
from rich.console import Console

import pgq
from pgq.cli import output
from pgq.cli.main import main


@pytest.fixture
def client(dsn: str) -> Iterator[pgq.Client]:
    with pgq.Client(dsn) as c:
        yield c


def run(dsn: str, *args: str) -> Result:
    command, *rest = args
    return CliRunner().invoke(main, [command, "--dsn", dsn, *rest])


def claim(client: pgq.Client, entrypoint: str) -> UUID:
    with psycopg.connect(client.dsn, autocommit=True) as conn:
        worker = conn.execute("SELECT pgq.register_worker('t', ARRAY[%s])", (entrypoint,)).fetchone()[0]
        conn.execute("SELECT pgq.claim(%s, ARRAY[%s])", (worker, entrypoint))
    return worker


TRACEBACK = 'Traceback (most recent call last):\n  File "app.py", line 3, in h\nValueError: bad input'


def test_job_tells_a_finished_jobs_whole_story(dsn: str, client: pgq.Client) -> None:
    parent = client.enqueue(
        "story", {"n": 1}, headers={"trace": "t1"}, priority=4, concurrency_key="tenant:3"
    )
    child = client.enqueue("story_child", depends_on=[parent])
    worker = claim(client, "story")
    client.fail(worker, parent, TRACEBACK, retry_in=timedelta(0))
    out = run(dsn, "job", str(parent)).stdout
    assert out.startswith(f"job {parent}: queued\n")
    assert f"waited for by {child} (waiting)" in out
    worker = claim(client, "story")
    assert client.complete(worker, [parent], results=[{"sum": 3}]) == [parent]
    result = run(dsn, "job", str(parent))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"job {parent}: succeeded"
    assert '  payload      {"n": 1}' in lines
    assert '  headers      {"trace": "t1"}' in lines
    assert '  result       {"sum": 3}' in lines
    assert "  concurrency key tenant:3" in lines
    assert "failed attempts (1):" in lines
    assert "    ValueError: bad input" in lines and '      File "app.py", line 3, in h' in lines
    story = json.loads(run(dsn, "job", str(child), "--json").stdout)
    assert story["depends_on"] == [{"id": parent, "status": "succeeded"}]


def test_job_of_an_unknown_id_is_an_error(dsn: str) -> None:
    result = run(dsn, "job", "99999999")
    assert result.exit_code == 1
    assert result.stderr.strip() == "error: job 99999999 is unknown (never enqueued, or finished and pruned)"


def test_wait_prints_the_result_or_the_error(dsn: str, client: pgq.Client) -> None:
    job_id = client.enqueue("waited")
    worker = claim(client, "waited")
    outcome: list[Result] = []
    waiter = threading.Thread(target=lambda: outcome.append(run(dsn, "wait", str(job_id), "--timeout", "60")))
    waiter.start()
    client.complete(worker, [job_id], results=[[1, "two"]])
    waiter.join(timeout=90)
    assert outcome[0].exit_code == 0 and outcome[0].stdout == f'job {job_id} succeeded: [1, "two"]\n'

    dead = client.enqueue("waited", max_attempts=1)
    client.fail(claim(client, "waited"), dead, TRACEBACK)
    result = run(dsn, "wait", str(dead))
    assert result.exit_code == 1 and result.stdout == f"job {dead} dead: ValueError: bad input\n"

    queued = client.enqueue("waited")
    result = run(dsn, "wait", str(queued), "--timeout", "0.1")
    assert result.exit_code == 1
    assert result.stderr == f"error: job {queued} unfinished after 0.1 s (status queued)\n"
    assert run(dsn, "wait", "99999999").exit_code == 1


def test_jobs_shows_the_errors_last_line_and_lists_finished_jobs(dsn: str, client: pgq.Client) -> None:
    retrying = client.enqueue("listed")
    client.fail(claim(client, "listed"), retrying, TRACEBACK)
    done = client.enqueue("listed")
    client.complete(claim(client, "listed"), [done])
    canceled = client.enqueue("listed")
    client.cancel(canceled)

    live = run(dsn, "jobs").stdout
    assert "ValueError: bad input" in live and "Traceback" not in live
    assert str(done) not in live.split()
    assert [
        line.split()[0] for line in run(dsn, "jobs", "--status", "succeeded").stdout.splitlines()[3:]
    ] == [str(done)]
    canceled_out = run(dsn, "jobs", "--status", "canceled").stdout
    assert f"{canceled}" in canceled_out.split() and "canceled by pgq.cancel" in canceled_out
    failed_out = run(dsn, "jobs", "--status", "failed").stdout
    assert str(retrying) in failed_out.split() and "ValueError: bad input" in failed_out


def test_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0 and result.stdout == f"pgq {pgq.__version__}\n"


def test_tables_fit_the_terminal_and_never_cut_numbers() -> None:
    table = output.build_table(
        "queues",
        ["entrypoint", "queued", "scheduled", "waiting", "oldest", "per second", "error"],
        [["a_rather_long_entrypoint_name", 45000, 1234567, 3, "2m05s", "3012.5", "x " * 40]],
        right=("per second",),
        squeeze=("error",),
        drop=("scheduled", "waiting", "oldest"),
    )
    console = Console(width=60, record=True)
    with console.capture() as captured:
        console.print(table)
    text = captured.get()
    assert max(len(line) for line in text.splitlines()) <= 60, text
    assert "scheduled" not in text and "waiting" not in text  # dropped, least useful first
    for whole in ("45000", "3012.5", "queued", "per second", "a_rather_long_entrypoint_name"):
        assert whole in text, text
    assert "…" not in text


def test_explain_says_why_a_job_is_not_running(dsn: str, client: pgq.Client) -> None:
    """`pgq explain ID` (pgq.explain; every reason is covered by tests/sql/explain.sql):
    one line per reason, --json, and an unknown id exits 1 naming it."""
    parent = client.enqueue("explain_cli")
    child = client.enqueue("explain_cli", depends_on=[parent])
    client.pause("explain_cli")
    out = run(dsn, "explain", str(child))
    assert out.exit_code == 0, out.output
    assert out.stdout.splitlines() == [
        f"job {child}: waiting: waiting for jobs {parent}",
        f"job {child}: paused: entrypoint explain_cli is paused",
        f"job {child}: no_worker: no live worker serves entrypoint explain_cli",
    ]
    doc = json.loads(run(dsn, "explain", str(parent), "--json").stdout)
    assert [r["reason"] for r in doc] == ["paused", "no_worker"]
    assert client.explain(parent)[0].reason == "paused"
    client.resume("explain_cli")
    worker = claim(client, "explain_cli")
    held = run(dsn, "explain", str(parent)).stdout
    assert held.startswith(f"job {parent}: held: held by worker {worker} (t, alive) until its lease ends at ")
    missing = run(dsn, "explain", str(child + 1000))
    assert missing.exit_code == 1
    assert f"job {child + 1000} is unknown" in missing.output
    with pytest.raises(pgq.UnknownJob):
        client.explain(child + 1000)


def test_job_lists_its_durable_steps(dsn: str, client: pgq.Client) -> None:
    job_id = client.enqueue("story_steps")
    worker = claim(client, "story_steps")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pgq.record_step(%s, %s, 1, 'charge', '{\"id\": \"ch_1\"}')", (worker, job_id))
    out = run(dsn, "job", str(job_id)).stdout.splitlines()
    steps = out.index("steps (1):")
    assert out[steps + 1].startswith('  charge: {"id": "ch_1"} (delivery 1, ')
