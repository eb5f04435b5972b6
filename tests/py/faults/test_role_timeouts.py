"""A DBA's timeouts on the worker's role (`ALTER ROLE ... SET statement_timeout`, as managed
services set them): a heartbeat and a registration succeed whatever maintenance is due, the
backlog of a fleet that went silent still drains, a step at a time, and `pgq.reap()` under
the same timeout makes progress instead of being cancelled and rolled back for ever.

The fleet: DEAD workers silent for an hour, each holding EACH jobs (the report: 80 x 500;
scaled so that releasing them all takes well over the timeout here, and the test stays
short). Durations are printed (-s), never asserted tightly.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import errors, sql
from psycopg.conninfo import make_conninfo

from conftest import admin_execute
from support.hooks import HOOK, hook
from support.workers import WorkerProcess, ledger_lines, wait_until

DEAD = 40
EACH = 500
TIMEOUT = "300ms"


@pytest.fixture(scope="module")
def timed(dsn: str) -> Iterator[str]:
    """The DSN of a worker login role with statement_timeout set on the role."""
    name = f"pgq_timed_{uuid.uuid4().hex[:8]}"
    admin_execute(
        sql.SQL("CREATE ROLE {} LOGIN IN ROLE pgq_worker").format(sql.Identifier(name)),
        sql.SQL("ALTER ROLE {} SET statement_timeout = {}").format(
            sql.Identifier(name), sql.Literal(TIMEOUT)
        ),
    )
    try:
        yield make_conninfo(dsn, user=name)
    finally:
        admin_execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def fleet(c: psycopg.Connection, ep: str, dead: int = DEAD, each: int = EACH) -> list[uuid.UUID]:
    """dead workers of ep, each holding `each` jobs (alive until silenced)."""
    c.execute(
        "SELECT count(*) FROM pgq.enqueue_batch(%s, array_fill('{}'::jsonb, ARRAY[%s]))", (ep, dead * each)
    )
    ids = []
    for i in range(dead):
        wid = c.execute("SELECT pgq.register_worker(%s, ARRAY[%s])", (f"gone-{i}", ep)).fetchone()[0]
        got = c.execute("SELECT count(*) FROM pgq.claim(%s, ARRAY[%s], %s)", (wid, ep, each)).fetchone()[0]
        assert got == each
        ids.append(wid)
    return ids


def silence(c: psycopg.Connection, ids: list[uuid.UUID]) -> None:
    """The workers went silent an hour ago (no sweep has found them dead yet)."""
    c.execute("UPDATE pgq._workers SET heartbeat_at = now() - interval '1 hour' WHERE id = ANY (%s)", (ids,))


def silent_fleet(c: psycopg.Connection, ep: str) -> None:
    silence(c, fleet(c, ep))


def held(c: psycopg.Connection, ep: str) -> int:
    return c.execute(
        "SELECT count(*) FROM pgq._jobs WHERE entrypoint = %s AND status = 'running'", (ep,)
    ).fetchone()[0]


@pytest.fixture(autouse=True)
def clean(conn: psycopg.Connection) -> Iterator[None]:
    """Each test starts with no job and no worker left by the one before (as an admin)."""
    conn.execute("SELECT pgq.reap()")
    conn.execute("DELETE FROM pgq._jobs")
    conn.execute("DELETE FROM pgq._workers")
    yield


def test_the_timeout_is_in_force(timed: str) -> None:
    with psycopg.connect(timed, autocommit=True) as w:
        assert w.execute("SHOW statement_timeout").fetchone()[0] == TIMEOUT
        with pytest.raises(errors.QueryCanceled):
            w.execute("SELECT pg_sleep(1)")


def test_registration_succeeds_beside_a_silent_fleet(conn: psycopg.Connection, timed: str) -> None:
    ep = "rt_register"
    silent_fleet(conn, ep)
    with psycopg.connect(timed, autocommit=True) as w:
        for i in range(3):
            t0 = time.monotonic()
            w.execute("SELECT pgq.register_worker('live', ARRAY[%s])", (ep,)).fetchone()
            print(
                f"\nregister_worker {i}: {1000 * (time.monotonic() - t0):.0f} ms,"
                f" {held(conn, ep)} jobs still held"
            )
    # Each registration freed a share of the backlog.
    assert held(conn, ep) < DEAD * EACH


def test_heartbeats_succeed_and_drain_a_silent_fleet(conn: psycopg.Connection, timed: str) -> None:
    ep = "rt_beat"
    ids = fleet(conn, ep)
    with psycopg.connect(timed, autocommit=True) as w:
        # Registered while the fleet was still alive: only the heartbeats meet the backlog.
        wid = w.execute("SELECT pgq.register_worker('live', ARRAY[%s])", (ep,)).fetchone()[0]
        silence(conn, ids)
        beats = []
        for _ in range(400):
            if held(conn, ep) == 0:
                break
            t0 = time.monotonic()
            w.execute("SELECT * FROM pgq.heartbeat(%s)", (wid,)).fetchall()
            beats.append(1000 * (time.monotonic() - t0))
        print(
            f"{len(beats)} heartbeats drained {DEAD * EACH} jobs: max {max(beats, default=0):.0f} ms,"
            f" mean {sum(beats) / max(len(beats), 1):.0f} ms"
        )
    assert held(conn, ep) == 0
    unreleased = conn.execute(
        "SELECT count(*) FROM pgq._workers"
        " WHERE entrypoints = ARRAY[%s] AND state = 'dead' AND released_at IS NULL",
        (ep,),
    ).fetchone()[0]
    assert unreleased == 0


@pytest.mark.parametrize("timeout", [TIMEOUT, "60ms"])
def test_reap_under_the_timeout_makes_progress(conn: psycopg.Connection, timed: str, timeout: str) -> None:
    """pgq.reap (pg_cron's call, as a role with the timeout) may do the whole work, but a call
    that is cut short keeps what it did: each call frees jobs until none is left (also under
    a timeout so short that a batch sized for the longer one would not fit)."""
    ep = "rt_reap"
    silent_fleet(conn, ep)
    with psycopg.connect(timed, autocommit=True) as w:
        w.execute(sql.SQL("SET statement_timeout = {}").format(sql.Literal(timeout)))
        calls = []
        for _ in range(1000):
            before = held(conn, ep)
            if before == 0:
                break
            t0 = time.monotonic()
            w.execute("SELECT pgq.reap()")
            calls.append((1000 * (time.monotonic() - t0), before - held(conn, ep)))
            assert held(conn, ep) < before, "a reap freed nothing"
        print(
            f"\n{len(calls)} reaps under {timeout}: {max(t for t, _ in calls):.0f} ms at most,"
            f" freeing {min(n for _, n in calls)} to {max(n for _, n in calls)} jobs each"
        )
    assert held(conn, ep) == 0


@pytest.mark.parametrize(
    ("function", "before"),
    [
        # Inside a batch of the reap: the timeout strikes while it waits.
        ("pgq._release_gone(uuid, boolean, integer)", "UPDATE pgq._workers"),
        # Inside another task of the sweep.
        ("pgq.run_schedules(timestamptz)", "IF v_now <"),
    ],
)
def test_a_sweep_task_that_outlasts_the_timeout_cannot_fail_the_call(
    conn: psycopg.Connection, timed: str, function: str, before: str
) -> None:
    """Forced: the task waits on an advisory lock the test holds, so the timeout strikes
    inside it (WHEN OTHERS does not catch query_canceled). The heartbeat, the registration
    and pgq.reap still succeed; the reap returns what the steps before the cut did."""
    ep = "rt_cut"
    ids = fleet(conn, ep, dead=2, each=10)
    with psycopg.connect(timed, autocommit=True) as w:
        wid = w.execute("SELECT pgq.register_worker('live', ARRAY[%s])", (ep,)).fetchone()[0]
        silence(conn, ids)
        original = hook(conn, function, before)
        conn.execute("SELECT pg_advisory_lock(%s)", (HOOK,))
        try:
            w.execute("SELECT * FROM pgq.heartbeat(%s)", (wid,)).fetchall()
            w.execute("SELECT pgq.register_worker('again', ARRAY[%s])", (ep,)).fetchone()
            assert w.execute("SELECT pgq.sweep()").fetchone()[0] >= 0
            beat = conn.execute("SELECT heartbeat_at FROM pgq._workers WHERE id = %s", (wid,)).fetchone()[0]
            assert beat > conn.execute("SELECT now() - interval '5 seconds'").fetchone()[0]
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (HOOK,))
            conn.execute(original)


# The report's statement_timeout, with what a DBA sets beside it (see test_soak.DBA_SETTINGS).
FLEET_SETTINGS = {
    "statement_timeout": TIMEOUT,
    "lock_timeout": "1s",
    "idle_in_transaction_session_timeout": "5s",
    "idle_session_timeout": "10s",
}


@pytest.fixture
def strict(dsn: str) -> Iterator[str]:
    """The DSN of a worker login role with FLEET_SETTINGS on it."""
    name = f"pgq_strict_{uuid.uuid4().hex[:8]}"
    statements: list[sql.Composable] = [
        sql.SQL("CREATE ROLE {} LOGIN IN ROLE pgq_worker").format(sql.Identifier(name))
    ]
    for setting, value in FLEET_SETTINGS.items():
        statements.append(
            sql.SQL("ALTER ROLE {} SET {} = {}").format(
                sql.Identifier(name), sql.Identifier(setting), sql.Literal(value)
            )
        )
    admin_execute(*statements)
    try:
        yield make_conninfo(dsn, user=name)
    finally:
        admin_execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def test_a_real_worker_under_the_settings_runs_a_silent_fleets_jobs(
    conn: psycopg.Connection, strict: str, tmp_path: Path
) -> None:
    """A `pgq worker` process logged in as a role with FLEET_SETTINGS starts beside a fleet
    that went silent holding DEAD x EACH jobs: it registers, its heartbeats keep it alive, and
    every job runs and ends with exactly one outcome (0 lost, 0 stuck, 0 double outcomes).
    Before the fix the registration failed with 57014 for ever and every job stayed held."""
    ep = "noop"
    conn.execute("SELECT pgq.configure(%s, lease => '2 seconds')", (ep,))
    silent_fleet(conn, ep)
    ids = [r[0] for r in conn.execute("SELECT id FROM pgq._jobs WHERE entrypoint = %s", (ep,))]
    t0 = time.monotonic()
    proc = WorkerProcess(strict, tmp_path)
    try:
        wait_until(
            lambda: (
                not conn.execute("SELECT 1 FROM pgq._jobs WHERE entrypoint = %s LIMIT 1", (ep,)).fetchone()
                or proc.proc.poll() is not None
            ),
            240,
            "the fleet's jobs to be run",
            interval=0.5,
        )
        print(f"\n{len(ids)} jobs of a silent fleet run in {time.monotonic() - t0:.1f} s")
        assert proc.proc.poll() is None, proc.log()[-3000:]
        alive = conn.execute(
            "SELECT count(*) FROM pgq._workers WHERE name <> 'live' AND state = 'alive'"
            " AND entrypoints @> ARRAY[%s]",
            (ep,),
        ).fetchone()[0]
        assert alive == 1, "the worker was reaped: its heartbeats failed"
    finally:
        code = proc.terminate()
    log = proc.log()
    print("worker log lines mentioning errors:", [line for line in log.splitlines() if "rror" in line][:10])
    assert code == 0, log[-3000:]
    outcomes = dict(
        conn.execute(
            "SELECT job_id, count(*) FROM pgq._outcomes WHERE job_id = ANY (%s) GROUP BY job_id", (ids,)
        ).fetchall()
    )
    assert len(outcomes) == len(ids), "lost or stuck jobs"
    assert set(outcomes.values()) == {1}, "double outcomes"
    ran = {row[0] for row in ledger_lines(tmp_path)}
    assert ran >= set(ids)
