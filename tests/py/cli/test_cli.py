"""The `pgq` queue commands: click's CliRunner for each, and the real console script."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner, Result
from psycopg.conninfo import make_conninfo
from rich.console import Console

import pgq.cli.status
from pgq import Client
from pgq.cli.main import main


@pytest.fixture
def client(dsn: str) -> Iterator[Client]:
    with Client(dsn) as c:
        yield c


@pytest.fixture(autouse=True)
def _clean_schedules(request: pytest.FixtureRequest) -> Iterator[None]:
    """conftest empties the queue after each test; the schedules are emptied here."""
    yield
    if "dsn" in request.fixturenames:
        with psycopg.connect(request.getfixturevalue("dsn"), autocommit=True) as c:
            c.execute("DELETE FROM pgq._schedules")


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
    lines = out.splitlines()
    assert lines[:6] == ["queues: none", "", "stats for the last 5 minutes: none", "", "workers: none", ""]
    # The sweeps are listed even when they never ran (pg_cron stopped shows as "never").
    assert lines[6] == "sweeps" and [line.split()[:4:3] for line in lines[9:]] == [
        ["reap", "-"],
        ["run_schedules", "-"],
        ["prune", "-"],
    ]


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
    assert header.split()[-2:] == ["concurrency", "rate"]
    email = next(line for line in lines if line.startswith("email")).split()
    assert email[1:6] == ["3", "1", "0", "0", "0"]  # queued, scheduled, waiting, running, dead
    assert email[-3:] == ["yes", "-", "-"]  # paused, no concurrency limit, no rate limit
    sms = next(line for line in lines if line.startswith("sms")).split()
    assert sms[-3:] == ["no", "7", "-"]
    worker = next(line for line in lines if line.startswith("box-1")).split()
    assert worker[1] == "alive" and worker[-1] == "0"
    assert all(line == line.rstrip() for line in lines)


def test_status_shows_estimated_counts_with_a_tilde(dsn: str, client: Client) -> None:
    """Above the exact limit of pgq.queues (lowered to 100 here through the DSN's options),
    a count is an estimate: the row is approximate and status shows ~N; the other rows and
    the counts within the limit stay exact."""
    client.enqueue_batch("big", list(range(250)))
    client.enqueue_batch("small", [1, 2])
    limited = make_conninfo(dsn, options="-c pgq.queues_exact_limit=200")
    with Client(limited) as c:
        rows = {q.entrypoint: q for q in c.queues()}
    assert rows["big"].approximate and rows["big"].queued > 100
    assert not rows["small"].approximate and rows["small"].queued == 2
    lines = ok(run(limited, "status")).splitlines()
    big = next(line for line in lines if line.startswith("big")).split()
    assert re.fullmatch(r"~\d[\d,]*", big[1]) and big[2:6] == ["0", "0", "0", "0"], big
    assert next(line for line in lines if line.startswith("small")).split()[1:3] == ["2", "0"]
    # With the default limit the same counts are exact.
    assert {q.entrypoint: (q.queued, q.approximate) for q in client.queues()} == {
        "big": (250, False),
        "small": (2, False),
    }


def finish(conn: psycopg.Connection, entrypoint: str, n: int) -> None:
    """Enqueue, claim and complete n jobs of entrypoint: n succeeded outcomes."""
    conn.execute("SELECT pgq.enqueue_batch(%s, array_fill('{}'::jsonb, ARRAY[%s]))", (entrypoint, n))
    worker = conn.execute("SELECT pgq.register_worker('stats', ARRAY[%s])", (entrypoint,)).fetchone()[0]
    conn.execute(
        "SELECT pgq.complete(%(w)s, ARRAY(SELECT id FROM pgq.claim(%(w)s, ARRAY[%(e)s], %(n)s)))",
        {"w": worker, "e": entrypoint, "n": n},
    )


def test_status_shows_stats_of_the_last_minutes(dsn: str, conn: psycopg.Connection) -> None:
    finish(conn, "email", 3)
    conn.execute(
        "INSERT INTO pgq._outcomes (job_id, entrypoint, outcome, priority, attempt, deliveries,"
        " enqueued_at, finished_at) VALUES (0, 'old', 'succeeded', 0, 0, 1, now() - interval '20 minutes',"
        " now() - interval '20 minutes')"
    )
    lines = ok(run(dsn, "status")).splitlines()
    title = lines.index("stats for the last 5 minutes")
    assert lines[title + 1].split() == [
        *("entrypoint", "succeeded", "failed", "dead", "canceled", "per", "second"),
        *("wait", "p50", "wait", "p95", "wait", "p99", "run", "p50", "run", "p95", "run", "p99"),
    ]
    email = lines[title + 3].split()
    assert email[:6] == ["email", "3", "0", "0", "0", "0.01"]  # 3 jobs in 300 s
    assert all(re.fullmatch(r"[0-9.]+m?s", v) for v in email[6:]), email
    assert not any(line.startswith("old") for line in lines)
    hour = ok(run(dsn, "status", "--since", "1 hour")).splitlines()
    title = hour.index("stats for the last 1 hour")
    assert [line.split()[:2] for line in hour[title + 3 : title + 5]] == [["email", "3"], ["old", "1"]]


def test_status_after_a_drain_lists_the_entrypoints_that_ran(dsn: str, conn: psycopg.Connection) -> None:
    """Drained, pgq.queues has no row of an entrypoint without jobs or settings; status
    still lists the entrypoints of its statistics, with nothing queued (not `queues: none`
    above three entrypoints that just ran jobs)."""
    for entrypoint in ("email", "sms", "push"):
        finish(conn, entrypoint, 2)
    lines = ok(run(dsn, "status")).splitlines()
    assert "queues: none" not in lines
    title = lines.index("queues")
    rows = [line.split() for line in lines[title + 3 : title + 6]]
    assert [r[:6] for r in rows] == [[e, "0", "0", "0", "0", "0"] for e in ("email", "push", "sms")]


def render_at(width: int, frame: object) -> list[str]:
    console = Console(width=width, no_color=True)
    with console.capture() as captured:
        console.print(frame)
    return captured.get().splitlines()


def test_status_watch_fits_60_80_and_120_columns_with_every_header_whole(
    dsn: str, client: Client, conn: psycopg.Connection
) -> None:
    """Each column shown has its whole header and its whole values at every width (it
    once cut the last column to its first letter: `wait p99   r` at 80 and 120 columns);
    the least useful columns are left out instead, and more fit in a wider terminal."""
    seed_dashboard(client, conn)
    headers = {"entrypoint", "queued", "scheduled", "waiting", "running", "dead", "oldest", "paused"}
    headers |= {"now/s", "1 min/s", "succeeded", "failed", "wait p50", "wait p99", "run p50", "run p99"}
    for long_name in (False, True):  # short names only, then a long one that takes more room
        if long_name:
            client.enqueue("a_longer_entrypoint_name", run_at=timedelta(hours=1))
        with Client(dsn) as c:
            snapshot = pgq.cli.status.take_snapshot(c, "5 minutes", 2.0)
        shown = {}
        for width in (60, 80, 120):
            lines = render_at(width, pgq.cli.status.dashboard(snapshot, "5 minutes", 2.0))
            assert max(len(line) for line in lines) <= width, lines
            header = next(line for line in lines if line.startswith("entrypoint"))
            cells = re.split(r"\s{2,}", header.strip())
            assert set(cells) <= headers, (width, header)
            email = re.split(r"\s{2,}", next(line for line in lines if line.startswith("email")).strip())
            assert len(email) == len(cells), (width, header, email)  # no value cut or wrapped
            shown[width] = cells
        assert len(shown[60]) < len(shown[80]) < len(shown[120]) <= len(headers), shown
        assert shown[60][:2] == ["entrypoint", "queued"] and "1 min/s" in shown[60], lines


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "soon"], "invalid argument since: 'soon' is not an interval"),
        (["--since", "40 days"], "invalid argument since"),
        (["--interval", "1"], "--interval and --iterations go with --watch"),
    ],
)
def test_status_bad_input_is_one_line(dsn: str, args: list[str], message: str) -> None:
    assert message in failed(run(dsn, "status", *args))


def seed_dashboard(client: Client, conn: psycopg.Connection) -> None:
    finish(conn, "email", 2)
    client.enqueue_batch("email", [1, 2, 3])
    conn.execute("SELECT pgq.register_worker(name => 'box-1', entrypoints => ARRAY['email'])")


def test_status_watch_renders_each_refresh_then_exits(
    dsn: str, client: Client, conn: psycopg.Connection
) -> None:
    seed_dashboard(client, conn)
    out = ok(run(dsn, "status", "--watch", "--iterations", "2", "--interval", "0.01"))
    frames = out.split("pgq status at ")[1:]
    assert len(frames) == 2  # piped: one snapshot per refresh
    for frame in frames:
        assert "percentiles over the last 5 minutes; every 0.01s, Ctrl-C to quit" in frame
        header = next(line for line in frame.splitlines() if line.startswith("entrypoint")).split()
        assert header[:8] == [
            "entrypoint",
            "queued",
            "scheduled",
            "waiting",
            "running",
            "dead",
            "oldest",
            "paused",
        ]
        assert " ".join(header[8:]) == "now/s 1 min/s succeeded failed wait p50 wait p99 run p50 run p99"
        email = next(line for line in frame.splitlines() if line.startswith("email")).split()
        assert email[1:6] == ["3", "0", "0", "0", "0"]
        assert email[10:12] == ["2", "0"]  # succeeded, failed
        assert next(line for line in frame.splitlines() if line.startswith("box-1")).split()[1] == "email"
        assert "workers: 2 alive, 0 dead, 0 stopped" in frame  # box-1 and the one of finish()


def test_status_watch_rates_cover_the_refresh_interval_and_the_last_minute(
    dsn: str, conn: psycopg.Connection
) -> None:
    """20 jobs finished 5 s ago, 30 more 40 s ago: over a 10 s refresh interval 2/s, over
    the minute 50/60 (not the 5-minute average)."""
    conn.execute(
        "INSERT INTO pgq._outcomes (job_id, entrypoint, outcome, priority, attempt, deliveries,"
        " enqueued_at, started_at, finished_at)"
        " SELECT -i, 'rated', 'succeeded', 0, 0, 1, f, f, f"
        " FROM generate_series(1, 50) AS i,"
        " LATERAL (SELECT now() - CASE WHEN i <= 20 THEN interval '5 s' ELSE interval '40 s' END AS f) AS t"
    )
    out = ok(run(dsn, "status", "--watch", "--iterations", "1", "--interval", "10"))
    header = next(line for line in out.splitlines() if line.startswith("entrypoint"))
    rated = next(line for line in out.splitlines() if line.startswith("rated")).split()
    assert header.split()[8:11] == ["now/s", "1", "min/s"]
    assert rated[8:10] == ["2", "0.833"]


def test_status_watch_on_a_terminal_uses_a_live_display(
    dsn: str, client: Client, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed_dashboard(client, conn)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich: stdout is a terminal
    monkeypatch.setenv("TERM", "xterm-256color")
    snapshots = []
    take = pgq.cli.status.take_snapshot
    monkeypatch.setattr(
        pgq.cli.status, "take_snapshot", lambda *a: snapshots.append(take(*a)) or snapshots[-1]
    )
    out = ok(run(dsn, "status", "--watch", "--iterations", "3", "--interval", "0.01"))
    assert len(snapshots) == 3
    assert "\x1b[" in out  # drawn in place with cursor movements
    assert "pgq status at" in out and "box-1" in out


def test_status_watch_survives_a_lost_connection(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    take = pgq.cli.status.take_snapshot

    def flaky(*args: object) -> pgq.cli.status.Snapshot:
        calls.append(1)
        if len(calls) == 2:
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return take(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(pgq.cli.status, "take_snapshot", flaky)
    out = ok(run(dsn, "status", "--watch", "--iterations", "3", "--interval", "0.01"))
    frames = out.split("pgq status at ")[1:]
    assert len(frames) == 3
    assert [("server closed the connection" in f) for f in frames] == [False, True, False]
    assert "(showing the last snapshot; retrying)" in frames[1]


def test_status_watch_exits_0_on_ctrl_c(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(pgq.cli.status.time, "sleep", interrupted)
    out = ok(run(dsn, "status", "--watch"))
    assert out.count("pgq status at") == 1
    assert "every 2s, Ctrl-C to quit" in out and "workers: 0 alive, 0 dead, 0 stopped" in out


def test_status_watch_unreachable_database_is_one_line() -> None:
    line = failed(run("postgresql://postgres@127.0.0.1:1/nowhere", "status", "--watch", "--iterations", "1"))
    assert "127.0.0.1" in line


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
    # The ids, one a line, on stdout (for a script); how many on stderr.
    ids = [int(line) for line in ok(result).split()]
    assert len(ids) == len(set(ids)) == 10005
    assert result.stderr.strip().splitlines()[-1] == "enqueued 10005 jobs"
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT array_agg(id ORDER BY id) FROM pgq.jobs").fetchone()[0] == sorted(ids)
    # Over the 10,000 pgq.queues counts exactly by default: raised for an exact count.
    with Client(make_conninfo(dsn, options="-c pgq.queues_exact_limit=20000")) as exact:
        [queue] = exact.queues()
    assert queue.queued == 10005 and not queue.approximate
    jobs = client.jobs(limit=10)
    assert {j.payload["n"] for j in jobs} == {1} and {j.priority for j in jobs} == {3}


def test_enqueue_headers_and_depends_on(dsn: str, client: Client) -> None:
    first = int(ok(run(dsn, "enqueue", "step", "--headers", '{"trace": "t-1"}')))
    second = int(ok(run(dsn, "enqueue", "step")))
    third = int(
        ok(run(dsn, "enqueue", "step", "--depends-on", f"{first},{second}", "--depends-on", str(first)))
    )
    with psycopg.connect(dsn) as c:
        rows = c.execute("SELECT id, status, headers, depends_on FROM pgq.jobs ORDER BY id").fetchall()
    assert [(r[0], r[1], r[2]) for r in rows] == [
        (first, "queued", {"trace": "t-1"}),
        (second, "queued", None),
        (third, "waiting", None),
    ]
    assert sorted(set(rows[2][3])) == [first, second]


def test_enqueue_count_takes_headers_attempts_and_parents(dsn: str, client: Client) -> None:
    parent = client.enqueue("email", {})
    ok(
        run(
            dsn,
            "enqueue",
            "email",
            "--count",
            "2",
            "--headers",
            '{"t": 1}',
            "--max-attempts",
            "2",
            "--depends-on",
            str(parent),
        )
    )
    with psycopg.connect(dsn) as c:
        rows = c.execute(
            "SELECT status, headers, max_attempts, depends_on FROM pgq.jobs WHERE id <> %s ORDER BY id",
            (parent,),
        ).fetchall()
    assert rows == [("waiting", {"t": 1}, 2, [parent])] * 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["email", "--headers", "[1]"], "--headers must be a JSON object"),
        (["email", "--headers", "{"], "--headers is not valid JSON"),
        (["email", "--depends-on", "x"], "--depends-on takes job ids"),
        (["email", "--depends-on", "99999999"], "depends_on"),
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
    out = ok(run(dsn, "cancel", *map(str, ids)))
    assert out.strip() == "canceled 2 of 2 jobs"
    assert [client.job_status(i) for i in ids] == ["canceled", "canceled"]


def test_cancel_reports_unknown_ids_and_exits_1(dsn: str, client: Client) -> None:
    job_id = client.enqueue("c")
    result = run(dsn, "cancel", str(job_id), "99999999")
    assert failed(result) == "error: unknown job id: 99999999"
    assert result.stdout.strip() == "canceled 1 of 2 jobs"
    assert client.job_status(job_id) == "canceled"


def test_retry(dsn: str, client: Client, conn: psycopg.Connection) -> None:
    job_id = client.enqueue("dying", max_attempts=1)
    worker = conn.execute("SELECT pgq.register_worker('w', ARRAY['dying'])").fetchone()[0]
    conn.execute("SELECT pgq.claim(%s, ARRAY['dying'])", (worker,))
    conn.execute("SELECT pgq.fail(%s, %s, 'boom')", (worker, job_id))
    assert ok(run(dsn, "retry", str(job_id))).strip() == "re-queued 1 of 1 job"
    assert client.job_status(job_id) == "queued"


def test_cancel_needs_ids(dsn: str) -> None:
    assert run(dsn, "cancel").exit_code == 2
    assert run(dsn, "retry").exit_code == 2
    assert run(dsn, "cancel", "1", "--entrypoint", "x").exit_code == 2  # ids or filters


def kill(conn: psycopg.Connection, entrypoint: str, n: int) -> list[int]:
    """n dead jobs of entrypoint (one attempt each, failed)."""
    ids = [
        r[0]
        for r in conn.execute(
            "SELECT pgq.enqueue(%s, max_attempts => 1) FROM generate_series(1, %s)", (entrypoint, n)
        )
    ]
    worker = conn.execute("SELECT pgq.register_worker('killer', ARRAY[%s])", (entrypoint,)).fetchone()[0]
    for job_id in ids:
        conn.execute("SELECT count(*) FROM pgq.claim(%s, ARRAY[%s], 1)", (worker, entrypoint))
        conn.execute("SELECT pgq.fail(%s, %s, 'boom')", (worker, job_id))
    return ids


def test_retry_and_cancel_say_why_a_job_was_left_alone(
    dsn: str, client: Client, conn: psycopg.Connection
) -> None:
    """Retrying a finished or live job did nothing and said `re-queued 0 of 1 job`, exit 0:
    now each job left alone is named with why, and nothing done at all is exit 1."""
    finish(conn, "done", 1)
    [succeeded] = [o.job_id for o in client.outcomes(entrypoint="done")]
    canceled, queued = client.enqueue("c"), client.enqueue("c")
    client.cancel([canceled])
    [dead] = kill(conn, "dying", 1)
    result = run(dsn, "retry", str(succeeded), str(canceled), str(queued))
    assert result.exit_code == 1 and result.stdout.strip() == "re-queued 0 of 3 jobs", result.output
    assert result.stderr.splitlines() == [
        f"job {succeeded}: not re-queued: it has finished (succeeded); only dead jobs are retried"
        " (--finished runs it again as a new job)",
        f"job {canceled}: not re-queued: it has finished (canceled); only dead jobs are retried"
        " (--finished runs it again as a new job)",
        f"job {queued}: not re-queued: it is queued, not dead",
        "error: no job was re-queued",
    ]
    # Some done: exit 0, the others still named.
    result = run(dsn, "retry", str(dead), str(succeeded))
    assert result.exit_code == 0 and result.stdout.strip() == "re-queued 1 of 2 jobs", result.output
    assert "not re-queued: it has finished (succeeded)" in result.stderr
    result = run(dsn, "cancel", str(succeeded))
    assert result.exit_code == 1 and result.stdout.strip() == "canceled 0 of 1 job", result.output
    assert result.stderr.splitlines() == [
        f"job {succeeded}: not canceled: it has finished (succeeded)",
        "error: no job was canceled",
    ]


def test_retry_finished_runs_them_again_as_new_jobs(
    dsn: str, client: Client, conn: psycopg.Connection
) -> None:
    """--finished (pgq.rerun): a succeeded and a canceled job run again, each as a new job
    from its stored row; the old ids keep their outcomes. A re-run's dedupe key is honoured:
    while the first re-run is live, another is not created."""
    done = client.enqueue("report", {"day": 1}, dedupe_key="day-1", headers={"h": "x"}, priority=4)
    worker = conn.execute("SELECT pgq.register_worker('w', ARRAY['report'])").fetchone()[0]
    conn.execute(
        "SELECT pgq.complete(%(w)s, ARRAY(SELECT id FROM pgq.claim(%(w)s, ARRAY['report'], 1)))",
        {"w": worker},
    )
    canceled = client.enqueue("report", {"day": 2})
    client.cancel([canceled])
    result = run(dsn, "retry", "--finished", str(done), str(canceled))
    assert result.exit_code == 0, result.output
    said = result.stdout.splitlines()
    assert said[0] == "re-queued 0 of 2 jobs"
    again = {
        int(m[1]): (m[2], int(m[3]))
        for m in (re.fullmatch(r"job (\d+) \((\w+)\) runs again as job (\d+)", line) for line in said[1:])
        if m
    }
    assert {k: v[0] for k, v in again.items()} == {done: "succeeded", canceled: "canceled"}, said
    jobs = {j.id: j for j in client.jobs()}
    first = jobs[again[done][1]]
    assert (first.payload, first.headers, first.priority, first.dedupe_key, first.status) == (
        {"day": 1},
        {"h": "x"},
        4,
        "day-1",
        "queued",
    )
    assert jobs[again[canceled][1]].payload == {"day": 2}
    assert [client.job_status(done), client.job_status(canceled)] == ["succeeded", "canceled"]
    result = run(dsn, "retry", "--finished", str(done))
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines() == [
        f"job {done}: not run again: job {first.id}, live, holds its dedupe key",
        "error: no job was re-queued",
    ]
    assert run(dsn, "retry", "--finished", "--entrypoint", "report").exit_code == 2


def test_retry_and_cancel_by_filters(dsn: str, client: Client, conn: psycopg.Connection) -> None:
    dying, other = kill(conn, "dying", 3), kill(conn, "other", 1)
    assert ok(run(dsn, "retry", "--entrypoint", "dying", "--status", "dead")).strip() == "re-queued 3 jobs"
    assert [client.job_status(i) for i in dying + other] == ["queued", "queued", "queued", "dead"]
    result = run(dsn, "retry", "--entrypoint", "dying")
    assert result.exit_code == 1 and "no job was re-queued" in result.stderr  # nothing dead left
    later = client.enqueue("dying", run_at=timedelta(hours=1))
    assert ok(run(dsn, "cancel", "--entrypoint", "dying", "--status", "queued")).strip() == "canceled 4 jobs"
    assert [client.job_status(i) for i in [*dying, later]] == ["canceled"] * 4
    assert ok(run(dsn, "cancel", "--status", "dead")).strip() == "canceled 1 job"  # discarded
    assert client.jobs() == []


def test_pause_or_configure_of_an_unknown_entrypoint_is_refused_unless_created(
    dsn: str, client: Client, conn: psycopg.Connection
) -> None:
    """A typo (`pgq pause emial`) once left a permanent paused row in pgq.queues: refused
    now (by pgq.pause, create_new => false), and configure likewise; --create sets one up
    before its first job. A job, settings, a schedule or a worker make a name known."""
    client.enqueue("email")
    for args in (["pause", "emial"], ["configure", "emial", "--concurrency", "2"]):
        line = failed(run(dsn, *args))
        assert "invalid argument entrypoint: 'emial' is unknown" in line and "create_new" in line, line
    assert [q.entrypoint for q in client.queues()] == ["email"]  # nothing left behind
    assert ok(run(dsn, "pause", "emial", "--create")).strip() == "paused emial"
    assert "concurrency=2" in ok(run(dsn, "configure", "later", "--concurrency", "2", "--create"))
    conn.execute("SELECT pgq.register_worker('w', ARRAY['served'])")
    client.schedule("nightly", "0 3 * * *", "scheduled")
    for known in ("email", "later", "served", "scheduled"):
        assert ok(run(dsn, "pause", known)).strip() == f"paused {known}"
    assert "concurrency=3" in ok(run(dsn, "configure", "served", "--concurrency", "3"))
    # Calls of 0.2.0 (no create_new) keep creating.
    conn.execute("SELECT pgq.pause('old_caller'), pgq.configure('old_cfg', max_attempts => 2)")
    assert {"old_caller", "old_cfg"} <= {q.entrypoint for q in client.queues()}


def test_pause_and_resume(dsn: str, client: Client) -> None:
    client.enqueue("email")
    assert ok(run(dsn, "pause", "email")).strip() == "paused email"
    assert client.queues()[0].paused is True
    assert ok(run(dsn, "resume", "email")).strip() == "resumed email"
    assert client.queues()[0].paused is False


# --- configure -----------------------------------------------------------------------------


def test_configure_sets_and_shows(dsn: str, client: Client) -> None:
    out = ok(
        run(
            dsn,
            *("configure", "email", "--create", "--max-attempts", "8", "--backoff-base", "2 seconds"),
            *("--backoff-max", "10 minutes", "--lease", "45 seconds", "--timeout", "5 min"),
            *("--concurrency", "3", "--retention", "2 days", "--max-deliveries", "4"),
            *("--key-concurrency", "2", "--max-snoozes", "7"),
        )
    )
    assert out.strip() == (
        "email: max_attempts=8 backoff_base=2s backoff_max=10m00s lease=45s timeout=5m00s"
        " concurrency=3 rate=unlimited retention=2d00h00m max_deliveries=4"
        " key_concurrency=2 max_snoozes=7 paused=no"
    )
    [queue] = client.queues()
    assert (queue.lease, queue.concurrency) == (timedelta(seconds=45), 3)
    assert ok(run(dsn, "configure", "email")) == out  # no options: show only
    assert "concurrency=unlimited" in ok(run(dsn, "configure", "email", "--concurrency", "0"))
    assert "max_deliveries=no cap" in ok(run(dsn, "configure", "email", "--max-deliveries", "0"))
    assert "key_concurrency=unlimited" in ok(run(dsn, "configure", "email", "--key-concurrency", "0"))


def test_enqueue_concurrency_key(dsn: str, client: Client) -> None:
    job_id = int(ok(run(dsn, "enqueue", "email", "--concurrency-key", "tenant:1")))
    ok(run(dsn, "enqueue", "email", "--concurrency-key", "tenant:2", "--count", "3"))
    keys = sorted(j.concurrency_key for j in client.jobs())
    assert keys == ["tenant:1", "tenant:2", "tenant:2", "tenant:2"]
    assert "concurrency key tenant:1" in ok(run(dsn, "job", str(job_id)))


def test_configure_unknown_entrypoint_shows_defaults(dsn: str, client: Client) -> None:
    assert "defaults apply" in ok(run(dsn, "configure", "nothing"))
    assert client.queues() == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--lease", "soon"], "invalid argument lease: 'soon' is not an interval"),
        (["--lease", "1 millisecond"], "invalid argument lease"),
        (["--max-attempts", "0"], "invalid argument max_attempts"),
        (["--max-deliveries", "-1"], "invalid argument max_deliveries"),
        (["--backoff-base", "1 hour", "--backoff-max", "1 minute"], "invalid argument backoff_max"),
    ],
)
def test_configure_bad_input_is_one_line(dsn: str, args: list[str], message: str) -> None:
    assert message in failed(run(dsn, "configure", "email", *args))


def test_configure_rate(dsn: str, client: Client) -> None:
    assert "rate=2.5/s" in ok(run(dsn, "configure", "email", "--rate", "2.5", "--create"))
    assert client.queues()[0].rate == Decimal("2.5")
    lines = ok(run(dsn, "status")).splitlines()
    assert next(line for line in lines if line.startswith("email")).split()[-1] == "2.5/s"
    assert "rate=100/s" in ok(run(dsn, "configure", "email", "--rate", "100", "--max-attempts", "2"))
    assert "rate=unlimited" in ok(run(dsn, "configure", "email", "--rate", "0"))
    assert client.queues()[0].rate is None
    assert "invalid argument rate" in failed(run(dsn, "configure", "email", "--rate", "-1"))
    assert run(dsn, "configure", "email", "--rate", "fast").exit_code == 2


# --- schedules -----------------------------------------------------------------------------

# "(now)" when the next run is under a second away: a schedule made just before its minute.
NEXT_RUN = r"(?P<name>\S+): next run (?P<when>\d{4}-\d\d-\d\d \d\d:\d\dZ) \((in (?P<wait>\S+)|now)\)"


def test_schedule_prints_the_next_run(dsn: str, client: Client) -> None:
    out = ok(run(dsn, "schedule", "nightly", "30 2 * * *", "report", '{"kind": "daily"}')).strip()
    match = re.fullmatch(NEXT_RUN, out)
    assert match and match["name"] == "nightly" and match["when"].endswith(" 02:30Z"), out
    [row] = client.schedules()
    assert (row.cron, row.entrypoint, row.payload) == ("30 2 * * *", "report", {"kind": "daily"})
    assert (
        row.next_run is not None
        and f"{row.next_run.astimezone(timezone.utc):%Y-%m-%d %H:%MZ}" == match["when"]
    )


def test_schedule_payload_from_stdin_and_replace(dsn: str, client: Client) -> None:
    ok(run(dsn, "schedule", "tick", "@hourly", "ping", "-", stdin='{"from": "stdin"}'))
    assert client.schedules()[0].payload == {"from": "stdin"}
    out = ok(run(dsn, "schedule", "tick", "*/5 * * * *", "pong"))
    assert re.fullmatch(NEXT_RUN, out.strip())
    [row] = client.schedules()
    assert (row.cron, row.entrypoint, row.payload) == ("*/5 * * * *", "pong", None)


def test_schedule_that_never_matches_is_refused(dsn: str) -> None:
    line = failed(run(dsn, "schedule", "feb31", "0 0 31 2 *", "report"))
    assert "matches no date" in line


def test_schedules_table(dsn: str, client: Client) -> None:
    assert ok(run(dsn, "schedules")).strip() == "schedules: none"
    client.schedule("b-minutely", "* * * * *", "tick", {"n": 1})
    client.schedule("a-nightly", "30 2 1 1 *", "report")  # not due with b-minutely
    client.run_schedules(client.schedules()[1].next_run)
    lines = ok(run(dsn, "schedules")).splitlines()
    assert lines[0] == "schedules"
    assert " ".join(lines[1].split()) == "name cron entrypoint payload last run next run"
    nightly, minutely = lines[3], lines[4]
    assert nightly.split()[:8] == ["a-nightly", "30", "2", "1", "1", "*", "report", "-"]
    assert nightly.split()[8] == "-"  # never ran
    assert re.search(r"\d\d:30Z \(in \S+\)$", nightly)
    assert minutely.split()[:9] == ["b-minutely", "*", "*", "*", "*", "*", "tick", '{"n":', "1}"]
    assert re.search(r"\d\d:\d\dZ +\d{4}-\d\d-\d\d \d\d:\d\dZ \(in \S+\)$", minutely)


def test_unschedule(dsn: str, client: Client) -> None:
    client.schedule("nightly", "@daily", "report")
    assert ok(run(dsn, "unschedule", "nightly")).strip() == "unscheduled nightly"
    assert client.schedules() == []
    assert "no schedule named 'nightly'" in failed(run(dsn, "unschedule", "nightly"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["n", "0 0 32 * *", "report"],
            'invalid cron expression: day-of-month field "32": 32 is out of range',
        ),
        (["n", "0 25 * * *", "report"], "invalid cron expression: hour field"),
        (["n", "0 0 * * someday", "report"], "invalid cron expression: day-of-week field"),
        (["n", "0 0 * *", "report"], "has 4 fields, expected 5"),
        (["n", "@sometimes", "report"], "unknown macro"),
        (["n", "@daily", ""], "invalid argument entrypoint"),
        (["", "@daily", "report"], "invalid argument name"),
        (["n", "@daily", "report", "{oops"], "PAYLOAD_JSON is not valid JSON"),
    ],
)
def test_schedule_bad_input_is_one_line(dsn: str, client: Client, args: list[str], message: str) -> None:
    assert message in failed(run(dsn, "schedule", *args))
    assert client.schedules() == []


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
        ["schedule", "--dsn", dsn, "nightly", "0 0 32 * *", "report"],
        ["status", "--dsn", dsn, "--since", "soon"],
    )
    for args in bad_input:
        done = script(*args)
        assert done.returncode == 1
        assert "Traceback" not in done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr

    done = script("--debug", "enqueue", "--dsn", dsn, "")
    assert done.returncode == 1 and "Traceback" in done.stderr
