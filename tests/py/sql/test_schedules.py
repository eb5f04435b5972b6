"""Periodic schedules (pgq.schedule, pgq.run_schedules): exactly once per schedule and minute.

Time is simulated: run_schedules takes the time to act at, and a test sets each schedule's
next_run to the start of its simulated window (the schedule row is the only state). The
last tests use real time: a worker's heartbeat sweep firing a due schedule without pg_cron,
and `pgq install` registering the sweeps with pg_cron.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psycopg
import pytest

from conftest import ADMIN_DSN
from support.workers import WorkerProcess, ledger_lines, scalar, wait_until

# A Monday, 23:00 UTC: a two-hour window from here crosses midnight into Tuesday.
T0 = datetime(2030, 1, 7, 23, 0, tzinfo=timezone.utc)


def start_at(conn: psycopg.Connection, t0: datetime) -> None:
    """Every schedule's next run becomes its first matching minute at or after t0."""
    conn.execute(
        "UPDATE pgq._schedules SET next_run = pgq._cron_next(cron, %s::timestamptz - interval '1 minute'),"
        " last_run = NULL",
        (t0,),
    )


def fired(conn: psycopg.Connection) -> Counter[tuple[str, str]]:
    """(schedule, fire time) of every job the schedules enqueued, counted."""
    rows = conn.execute(
        "SELECT headers->>'schedule', headers->>'fire_time' FROM pgq._jobs WHERE headers ? 'schedule'"
    ).fetchall()
    return Counter((r[0], r[1]) for r in rows)


def fire_label(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%MZ")


# --- concurrent sweeps ---------------------------------------------------------------------


def test_concurrent_sweeps_enqueue_each_due_schedule_once(dsn: str, conn: psycopg.Connection) -> None:
    """8 sessions call run_schedules(now) at the same instant for the same minute, minute
    after minute: the calls together enqueue exactly the due schedules, once each."""
    crons = {f"every-{k}": "* * * * *" for k in range(5)}
    crons |= {"even": "*/2 * * * *", "quarter": "*/15 * * * *"}
    for name, cron in crons.items():
        conn.execute("SELECT pgq.schedule(%s, %s, 'sched_race', %s)", (name, cron, f'{{"s": "{name}"}}'))
    start_at(conn, T0)

    sessions = 8
    barrier = threading.Barrier(sessions, timeout=30)
    conns = [psycopg.connect(dsn, autocommit=True) for _ in range(sessions)]
    try:

        def sweep(c: psycopg.Connection, at: datetime) -> int:
            barrier.wait()
            return c.execute("SELECT pgq.run_schedules(%s)", (at,)).fetchone()[0]

        minutes = 16
        with ThreadPoolExecutor(max_workers=sessions) as pool:
            for m in range(minutes):
                at = T0 + timedelta(minutes=m, seconds=1)
                counts = [f.result(timeout=60) for f in [pool.submit(sweep, c, at) for c in conns]]
                due = 5 + (m % 2 == 0) + (m % 15 == 0)
                assert sum(counts) == due, f"minute {m}: {counts}"
                # The same minute again: nothing more is due.
                again = [f.result(timeout=60) for f in [pool.submit(sweep, c, at) for c in conns]]
                assert again == [0] * sessions, f"minute {m}, second sweep: {again}"
    finally:
        for c in conns:
            c.close()

    jobs = fired(conn)
    assert max(jobs.values()) == 1, [k for k, n in jobs.items() if n > 1]
    expected = {
        (name, fire_label(T0 + timedelta(minutes=m)))
        for m in range(minutes)
        for name, cron in crons.items()
        if cron == "* * * * *"
        or (cron == "*/2 * * * *" and m % 2 == 0)
        or (cron == "*/15 * * * *" and m % 15 == 0)
    }
    assert set(jobs) == expected
    # Each job carries its schedule's payload.
    payloads = conn.execute(
        "SELECT DISTINCT headers->>'schedule' = payload->>'s' FROM pgq._jobs WHERE entrypoint = 'sched_race'"
    ).fetchall()
    assert payloads == [(True,)]
    last = conn.execute("SELECT max(last_run) FROM pgq.schedules").fetchone()[0]
    assert last == T0 + timedelta(minutes=minutes - 1)


def test_sweeps_racing_while_jobs_complete_still_fire_once(dsn: str, conn: psycopg.Connection) -> None:
    """The dedupe key of a schedule's job protects only while the job is live: with every
    job completed at once, only the schedule row keeps a late sweep from firing again."""
    conn.execute("SELECT pgq.schedule('fast', '* * * * *', 'sched_done')")
    start_at(conn, T0)
    wid = conn.execute("SELECT pgq.register_worker('drain', ARRAY['sched_done'])").fetchone()[0]
    sessions = 6
    barrier = threading.Barrier(sessions, timeout=30)

    def sweep(at: datetime) -> int:
        with psycopg.connect(dsn, autocommit=True) as c:
            barrier.wait()
            n = c.execute("SELECT pgq.run_schedules(%s)", (at,)).fetchone()[0]
            # Complete whatever is there at once, so no live job holds the dedupe key.
            ids = [
                r[0]
                for r in c.execute("SELECT id FROM pgq.claim(%s::uuid, ARRAY['sched_done'], 100)", (wid,))
            ]
            if ids:
                c.execute("SELECT pgq.complete(%s::uuid, %s::bigint[])", (wid, ids))
            n += c.execute("SELECT pgq.run_schedules(%s)", (at,)).fetchone()[0]
            return n

    minutes = 10
    with ThreadPoolExecutor(max_workers=sessions) as pool:
        for m in range(minutes):
            at = T0 + timedelta(minutes=m, seconds=30)
            counts = [f.result(timeout=60) for f in [pool.submit(sweep, at) for _ in range(sessions)]]
            assert sum(counts) == 1, f"minute {m}: {counts}"
    total = conn.execute(
        "SELECT count(*) FROM pgq.outcomes WHERE entrypoint = 'sched_done' AND outcome = 'succeeded'"
    ).fetchone()[0]
    live = conn.execute("SELECT count(*) FROM pgq._jobs WHERE entrypoint = 'sched_done'").fetchone()[0]
    assert total + live == minutes


# --- a simulated window --------------------------------------------------------------------

WINDOW_SCHEDULES: dict[str, tuple[str, Callable[[datetime], bool]]] = {
    "every-minute": ("* * * * *", lambda t: True),
    "every-7": ("*/7 * * * *", lambda t: t.minute % 7 == 0),
    "tuesday-midnight": ("0 0 * * tue", lambda t: t.weekday() == 1 and t.hour == 0 and t.minute == 0),
}


def expected_fires(t0: datetime, minutes: int) -> set[tuple[str, str]]:
    return {
        (name, fire_label(t))
        for m in range(minutes)
        for t in [t0 + timedelta(minutes=m)]
        for name, (_, matches) in WINDOW_SCHEDULES.items()
        if matches(t)
    }


def test_two_hours_minute_by_minute_fire_exactly_the_matching_minutes(conn: psycopg.Connection) -> None:
    for name, (cron, _) in WINDOW_SCHEDULES.items():
        conn.execute("SELECT pgq.schedule(%s, %s, 'sched_window')", (name, cron))
    start_at(conn, T0)
    minutes = 120
    total = 0
    for m in range(minutes):
        # Sweeps land anywhere in the minute, some minutes twice.
        at = T0 + timedelta(minutes=m, seconds=(m * 17) % 60)
        total += conn.execute("SELECT pgq.run_schedules(%s)", (at,)).fetchone()[0]
        if m % 5 == 0:
            total += conn.execute("SELECT pgq.run_schedules(%s)", (at + timedelta(seconds=5),)).fetchone()[0]

    expected = expected_fires(T0, minutes)
    # 120 every minute, 18 at minutes 0, 7, ... 56 of each hour, and Tuesday 00:00 once.
    assert len(expected) == 120 + 18 + 1
    jobs = fired(conn)
    assert total == len(expected)
    assert max(jobs.values()) == 1
    assert set(jobs) == expected
    nexts = dict(conn.execute("SELECT name, next_run FROM pgq.schedules").fetchall())
    end = T0 + timedelta(minutes=minutes)
    assert nexts == {
        "every-minute": end,
        "every-7": end,  # 01:00: minute 0 is a multiple of 7
        "tuesday-midnight": datetime(2030, 1, 15, 0, 0, tzinfo=timezone.utc),
    }


def test_an_outage_fires_each_schedule_once_then_resumes(conn: psycopg.Connection) -> None:
    for name, (cron, _) in WINDOW_SCHEDULES.items():
        conn.execute("SELECT pgq.schedule(%s, %s, 'sched_outage')", (name, cron))
    start_at(conn, T0)
    assert conn.execute("SELECT pgq.run_schedules(%s)", (T0,)).fetchone()[0] == 2  # minute 0: two due

    back = T0 + timedelta(hours=3, seconds=10)  # 02:00:10 on Tuesday
    assert conn.execute("SELECT pgq.run_schedules(%s)", (back,)).fetchone()[0] == 3
    assert conn.execute("SELECT pgq.run_schedules(%s)", (back,)).fetchone()[0] == 0
    jobs = fired(conn)
    # Each fired once for the earliest run it missed, not once per missed minute.
    assert jobs == Counter(
        {
            ("every-minute", fire_label(T0)): 1,
            ("every-7", fire_label(T0)): 1,
            ("every-minute", fire_label(T0 + timedelta(minutes=1))): 1,
            ("every-7", fire_label(T0 + timedelta(minutes=7))): 1,
            ("tuesday-midnight", fire_label(T0 + timedelta(hours=1))): 1,
        }
    )
    # And the next runs are after the outage, not in the past.
    nexts = dict(conn.execute("SELECT name, next_run FROM pgq.schedules").fetchall())
    assert nexts["every-minute"] == T0 + timedelta(hours=3, minutes=1)
    assert nexts["every-7"] == T0 + timedelta(hours=3, minutes=7)  # 02:07 (120 % 7 = 1)
    assert nexts["tuesday-midnight"] == datetime(2030, 1, 15, 0, 0, tzinfo=timezone.utc)

    # Normal service resumes the next minute.
    assert conn.execute("SELECT pgq.run_schedules(%s)", (back + timedelta(minutes=1),)).fetchone()[0] == 1


# --- real time -----------------------------------------------------------------------------


def test_a_worker_fires_a_due_schedule_without_pg_cron(
    dsn: str, conn: psycopg.Connection, tmp_path: Path
) -> None:
    """No pg_cron in this database: the worker's heartbeat sweep runs pgq.run_schedules."""
    assert conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'pg_cron'").fetchone()[0] == 0
    # Heartbeats every lease / 4 = 0.25 s (the worker paces them by its shortest lease).
    conn.execute("SELECT pgq.configure('tick', lease => '1 second')")
    # A yearly schedule, made due by hand: an every-minute one could also fall due on its own
    # at a minute boundary while the test runs, and fire before the hand-set time.
    conn.execute("SELECT pgq.schedule('yearly', '0 0 1 1 *', 'tick')")
    worker = WorkerProcess(dsn, tmp_path)
    try:
        wait_until(
            lambda: scalar(dsn, "SELECT count(*) FROM pgq.workers WHERE state = 'alive'"),
            20,
            "the worker to register",
        )
        time.sleep(0.5)  # let it read the 1 s lease and start beating
        due = conn.execute(
            "UPDATE pgq._schedules SET next_run = now() WHERE name = 'yearly' RETURNING next_run"
        ).fetchone()[0]
        made_due = time.time()
        runs = wait_until(
            lambda: [r for r in ledger_lines(tmp_path) if r[2] == "tick"], 10, "the scheduled job to run"
        )
        latency = runs[0][4] - made_due
        assert worker.terminate() == 0
    finally:
        if worker.proc.poll() is None:
            worker.kill()
    assert len(runs) == 1, runs
    assert runs[0][3] == f"fire:{fire_label(due)}"
    assert latency < 3.0, f"the sweep took {latency:.2f} s to fire a due schedule"
    assert conn.execute("SELECT pgq.job_status(%s)", (runs[0][0],)).fetchone()[0] == "succeeded", (
        "the job ran and completed"
    )
    last_run, next_run = conn.execute("SELECT last_run, next_run FROM pgq.schedules").fetchone()
    assert last_run == due
    assert next_run > due


# --- pg_cron -------------------------------------------------------------------------------


def _cron_rows(database: str) -> list[tuple[str, str, str, str]]:
    with psycopg.connect(ADMIN_DSN, autocommit=True) as c:
        return c.execute(
            "SELECT jobname, schedule, command, database FROM cron.job"
            " WHERE database = %s OR jobname LIKE %s ORDER BY jobname",
            (database, f"%:{database}"),
        ).fetchall()


def _pgq(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pgq", *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_pgq_install_schedules_the_sweeps_with_pg_cron(fresh_db: str) -> None:
    with psycopg.connect(ADMIN_DSN) as c:
        if c.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_cron'").fetchone() is None:
            pytest.skip("pg_cron is not installed in the maintenance database")
    with psycopg.connect(fresh_db) as c:
        name = c.info.dbname
    try:
        done = _pgq("install", "--dsn", fresh_db)
        assert done.returncode == 0, done.stderr
        rows = _cron_rows(name)
        in_db = {r[0]: r for r in rows if r[3] == name}
        assert any("pgq.run_schedules()" in r[2] and r[1] == "* * * * *" for r in in_db.values()), rows
        hourly = re.compile(r"\d+ \* \* \* \*")
        assert any("pgq.prune()" in r[2] and hourly.fullmatch(r[1]) for r in in_db.values()), rows
        assert any("pgq.reap()" in r[2] for r in in_db.values()), rows
        assert "pg_cron" in done.stdout, done.stdout

        gone = _pgq("uninstall", "--yes", "--dsn", fresh_db)
        assert gone.returncode == 0, gone.stderr
        assert _cron_rows(name) == [], "uninstall left pg_cron jobs behind"
    finally:
        with psycopg.connect(ADMIN_DSN, autocommit=True) as c:
            c.execute(
                "SELECT cron.unschedule(jobid) FROM cron.job WHERE database = %s OR jobname LIKE %s",
                (name, f"%:{name}"),
            )
