"""Leases, re-delivery and fencing, with real time passing between sessions.

Worker A and worker B are separate sessions. The lease is 1 second (the minimum); the
waits below are a few times that, so a loaded machine does not make the tests flaky.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest

from pgq import WorkerGone
from pgq.errors import translate
from support.workers import wait_until_waiting_on_lock

LEASE = 1.0


def register(conn: psycopg.Connection, name: str, entrypoints: list[str]) -> uuid.UUID:
    return conn.execute("SELECT pgq.register_worker(%s, %s::text[])", (name, entrypoints)).fetchone()[0]


def claim(
    conn: psycopg.Connection, worker: uuid.UUID, entrypoints: list[str], n: int = 1
) -> list[tuple[int, int]]:
    return conn.execute(
        "SELECT id, deliveries FROM pgq.claim(%s::uuid, %s::text[], %s)", (worker, entrypoints, n)
    ).fetchall()


def complete(conn: psycopg.Connection, worker: uuid.UUID, ids: list[int]) -> list[int]:
    rows = conn.execute("SELECT * FROM pgq.complete(%s::uuid, %s::bigint[])", (worker, ids)).fetchall()
    return sorted(r[0] for r in rows)


def heartbeat(conn: psycopg.Connection, worker: uuid.UUID) -> list[int]:
    return [r[0] for r in conn.execute("SELECT * FROM pgq.heartbeat(%s::uuid)", (worker,))]


def job(conn: psycopg.Connection, job_id: int) -> dict[str, Any] | None:
    cur = conn.execute(
        "SELECT status, deliveries, attempt, worker_id FROM pgq._jobs WHERE id = %s", (job_id,)
    )
    row = cur.fetchone()
    return None if row is None else dict(zip([d.name for d in cur.description], row, strict=True))


def worker_state(conn: psycopg.Connection, worker: uuid.UUID) -> str:
    return conn.execute("SELECT state FROM pgq._workers WHERE id = %s", (worker,)).fetchone()[0]


def outcomes(conn: psycopg.Connection, job_id: int) -> list[tuple[str, int, uuid.UUID | None]]:
    return conn.execute(
        "SELECT outcome, deliveries, worker_id FROM pgq._outcomes WHERE job_id = %s ORDER BY finished_at",
        (job_id,),
    ).fetchall()


def run_in_threads(fns: list[Callable[[], Any]], timeout: float = 60) -> list[Any]:
    with ThreadPoolExecutor(max_workers=len(fns)) as pool:
        futures = [pool.submit(fn) for fn in fns]
        return [f.result(timeout=timeout) for f in futures]


@pytest.fixture
def session(dsn: str) -> Iterator[Callable[[], psycopg.Connection]]:
    """Open extra autocommit sessions; all are closed after the test."""
    opened: list[psycopg.Connection] = []

    def open_session() -> psycopg.Connection:
        c = psycopg.connect(dsn, autocommit=True)
        opened.append(c)
        return c

    yield open_session
    for c in opened:
        c.close()


# --- lease expiry, re-delivery, fencing ----------------------------------------------------


def test_silent_worker_loses_its_job_and_is_fenced(session) -> None:
    ep = "leased"
    a, b, admin = session(), session(), session()
    admin.execute("SELECT pgq.configure(%s, lease => '1 second')", (ep,))
    job_id = admin.execute("SELECT pgq.enqueue(%s, '{\"n\": 1}')", (ep,)).fetchone()[0]

    worker_a = register(a, "A", [ep])
    worker_b = register(b, "B", [ep])
    assert claim(a, worker_a, [ep]) == [(job_id, 1)]
    assert claim(b, worker_b, [ep]) == [], "the job is held by A"

    # A goes silent. Within the lease nothing happens even though B sweeps.
    heartbeat(b, worker_b)
    assert job(admin, job_id)["status"] == "running"

    time.sleep(LEASE * 1.5)
    heartbeat(b, worker_b)  # runs pgq.reap: A is past its lease
    assert worker_state(admin, worker_a) == "dead"
    assert worker_state(admin, worker_b) == "alive"
    assert job(admin, job_id) == {
        "status": "queued",
        "deliveries": 1,
        "attempt": 0,
        "worker_id": None,
    }

    assert claim(b, worker_b, [ep]) == [(job_id, 2)], "re-delivered with deliveries = 2"

    # A comes back: every call is fenced.
    assert complete(a, worker_a, [job_id]) == []
    assert a.execute("SELECT pgq.fail(%s, %s, 'late')", (worker_a, job_id)).fetchone()[0] is None
    with pytest.raises(psycopg.Error) as err:
        heartbeat(a, worker_a)
    assert err.value.sqlstate == "PQ003"
    assert isinstance(translate(err.value), WorkerGone)
    with pytest.raises(psycopg.Error) as err:
        claim(a, worker_a, [ep])
    assert err.value.sqlstate == "PQ003"
    assert job(admin, job_id)["worker_id"] == worker_b

    assert complete(b, worker_b, [job_id]) == [job_id]
    assert outcomes(admin, job_id) == [("succeeded", 2, worker_b)]
    assert admin.execute("SELECT pgq.job_status(%s)", (job_id,)).fetchone()[0] == "succeeded"
    # Even now that the job is gone, A's late calls change nothing.
    assert complete(a, worker_a, [job_id]) == []
    assert outcomes(admin, job_id) == [("succeeded", 2, worker_b)]


def test_heartbeating_worker_keeps_its_job_past_the_lease(session) -> None:
    ep = "kept"
    a, b, admin = session(), session(), session()
    admin.execute("SELECT pgq.configure(%s, lease => '1 second')", (ep,))
    job_id = admin.execute("SELECT pgq.enqueue(%s)", (ep,)).fetchone()[0]
    worker_a = register(a, "A", [ep])
    worker_b = register(b, "B", [ep])
    assert claim(a, worker_a, [ep]) == [(job_id, 1)]

    # Beat every tenth of the lease for 2.5 leases: 0.9 s of slack for a slow machine.
    deadline = time.monotonic() + LEASE * 2.5
    sweeps = 0
    while time.monotonic() < deadline:
        heartbeat(a, worker_a)
        heartbeat(b, worker_b)  # B sweeps too, and finds nothing to take
        admin.execute("SELECT pgq.reap()")
        assert claim(b, worker_b, [ep]) == []
        sweeps += 1
        time.sleep(LEASE / 10)
    assert sweeps >= 8

    assert job(admin, job_id) == {
        "status": "running",
        "deliveries": 1,
        "attempt": 0,
        "worker_id": worker_a,
    }
    assert worker_state(admin, worker_a) == "alive"
    assert complete(a, worker_a, [job_id]) == [job_id]
    assert outcomes(admin, job_id) == [("succeeded", 1, worker_a)]


def test_lease_is_the_shortest_of_the_workers_entrypoints(session) -> None:
    """A worker of a 1 s entrypoint and a default (30 s) one is dead after 1 s of silence."""
    a, b, admin = session(), session(), session()
    admin.execute("SELECT pgq.configure('short_lease', lease => '1 second')")
    job_id = admin.execute("SELECT pgq.enqueue('long_lease')").fetchone()[0]
    worker_a = register(a, "A", ["short_lease", "long_lease"])
    worker_b = register(b, "B", ["long_lease"])
    assert claim(a, worker_a, ["long_lease"]) == [(job_id, 1)]
    time.sleep(LEASE * 1.5)
    heartbeat(b, worker_b)
    assert worker_state(admin, worker_a) == "dead"
    assert claim(b, worker_b, ["long_lease"]) == [(job_id, 2)]


# --- concurrent sweeps ---------------------------------------------------------------------


def _setup_sweep_work(admin: psycopg.Connection, round_no: int) -> tuple[set[int], set[int]]:
    """Jobs for a sweep: some held by workers that stopped heartbeating an hour ago, some
    held by a live worker for longer than their timeout. Time is moved by editing the
    tables (as superuser), so no test waits an hour."""
    orphan_ep, slow_ep = f"orphans_{round_no}", f"slow_{round_no}"
    admin.execute("SELECT pgq.enqueue_batch(%s, array_fill('{}'::jsonb, ARRAY[90]))", (orphan_ep,))
    admin.execute("SELECT pgq.enqueue_batch(%s, array_fill('{}'::jsonb, ARRAY[10]))", (slow_ep,))
    # Register everyone first: register_worker sweeps, and must find nothing to do yet.
    doomed = [register(admin, f"doomed-{round_no}-{k}", [orphan_ep]) for k in range(3)]
    live = register(admin, f"live-{round_no}", [slow_ep])
    orphans = {r[0] for wid in doomed for r in claim(admin, wid, [orphan_ep], 30)}
    slow = {r[0] for r in claim(admin, live, [slow_ep], 10)}
    admin.execute(
        "UPDATE pgq._workers SET heartbeat_at = now() - interval '1 hour' WHERE id = ANY(%s)",
        (doomed,),
    )
    admin.execute(
        "UPDATE pgq._jobs SET started_at = now() - interval '3 hours' WHERE id = ANY(%s)",
        (list(slow),),
    )
    assert len(orphans) == 90 and len(slow) == 10
    return orphans, slow


@pytest.mark.parametrize("round_no", range(5))
def test_concurrent_reaps_act_once(dsn: str, session, round_no: int) -> None:
    admin = session()
    orphans, slow = _setup_sweep_work(admin, round_no)
    sessions = 8
    barrier = threading.Barrier(sessions, timeout=30)

    def sweep() -> int:
        with psycopg.connect(dsn, autocommit=True) as c:
            barrier.wait()
            return c.execute("SELECT pgq.reap()").fetchone()[0]

    results = run_in_threads([sweep] * sessions)
    assert sum(results) == len(orphans) + len(slow), results
    assert sum(1 for r in results if r) == 1, f"the sweep's work was split: {results}"

    rows = admin.execute(
        "SELECT id, status, deliveries, attempt, worker_id FROM pgq._jobs WHERE id = ANY(%s)",
        (list(orphans | slow),),
    ).fetchall()
    by_id = {r[0]: r[1:] for r in rows}
    assert {i: by_id[i] for i in orphans} == {i: ("queued", 1, 0, None) for i in orphans}
    assert {i: by_id[i] for i in slow} == {i: ("queued", 1, 1, None) for i in slow}
    failed = admin.execute(
        "SELECT job_id, count(*), min(error) FROM pgq._outcomes WHERE job_id = ANY(%s) GROUP BY job_id",
        (list(orphans | slow),),
    ).fetchall()
    assert {r[0] for r in failed} == slow, "only the timed-out jobs have an outcome"
    assert all(r[1] == 1 and r[2].startswith("timeout") for r in failed), failed
    # And a sweep now has nothing left to do.
    assert admin.execute("SELECT pgq.reap()").fetchone()[0] == 0


def test_job_completed_during_a_sweep_is_not_requeued(dsn: str, session) -> None:
    """complete() holds the row when reap() comes for it: reap skips it without waiting (a
    sweep never blocks, so it cannot deadlock with a batch of completions), and leaves it."""
    ep = "race_complete"
    a, admin = session(), session()
    job_id = admin.execute("SELECT pgq.enqueue(%s)", (ep,)).fetchone()[0]
    worker_a = register(a, "A", [ep])
    assert claim(a, worker_a, [ep]) == [(job_id, 1)]
    admin.execute(
        "UPDATE pgq._workers SET heartbeat_at = now() - interval '1 hour' WHERE id = %s",
        (worker_a,),
    )

    with psycopg.connect(dsn) as completer:  # an open transaction
        done = completer.execute(
            "SELECT * FROM pgq.complete(%s::uuid, ARRAY[%s]::bigint[])", (worker_a, job_id)
        ).fetchall()
        assert done == [(job_id,)]
        with psycopg.connect(dsn, autocommit=True) as sweeper:
            sweeper.execute("SET lock_timeout = '5s'")
            assert sweeper.execute("SELECT pgq.reap()").fetchone()[0] == 0
        completer.commit()

    assert job(admin, job_id) is None, "the completed job came back"
    assert outcomes(admin, job_id) == [("succeeded", 1, worker_a)]
    assert worker_state(admin, worker_a) == "dead"


def test_job_reaped_during_a_late_complete_is_fenced(dsn: str, session) -> None:
    """The other order: reap() released the job first; the late complete() waits, then
    finds the job no longer held and completes nothing."""
    ep = "race_reap"
    a, admin = session(), session()
    job_id = admin.execute("SELECT pgq.enqueue(%s)", (ep,)).fetchone()[0]
    worker_a = register(a, "A", [ep])
    assert claim(a, worker_a, [ep]) == [(job_id, 1)]
    admin.execute(
        "UPDATE pgq._workers SET heartbeat_at = now() - interval '1 hour' WHERE id = %s",
        (worker_a,),
    )

    with psycopg.connect(dsn) as sweeper:  # an open transaction
        assert sweeper.execute("SELECT pgq.reap()").fetchone()[0] == 1
        with ThreadPoolExecutor(1) as pool:
            late = pool.submit(complete, a, worker_a, [job_id])
            assert wait_until_waiting_on_lock(admin, a.info.backend_pid), (
                "complete did not wait for the sweeping transaction"
            )
            sweeper.commit()
            assert late.result(timeout=30) == []

    assert job(admin, job_id) == {
        "status": "queued",
        "deliveries": 1,
        "attempt": 0,
        "worker_id": None,
    }
    assert outcomes(admin, job_id) == []


def test_a_sweep_in_progress_blocks_neither_sweeps_nor_heartbeats(dsn: str, session) -> None:
    """While one sweep's transaction is open, another sweep returns 0 at once (it does not
    queue behind it, nor redo its work) and heartbeats, which sweep too, go through."""
    ep = "busy_sweep"
    a, live, other, admin = session(), session(), session(), session()
    admin.execute("SELECT pgq.enqueue_batch(%s, array_fill('{}'::jsonb, ARRAY[20]))", (ep,))
    worker_a = register(a, "A", [ep])
    worker_live = register(live, "live", [ep])
    ids = [r[0] for r in claim(a, worker_a, [ep], 20)]
    admin.execute(
        "UPDATE pgq._workers SET heartbeat_at = now() - interval '1 hour' WHERE id = %s",
        (worker_a,),
    )
    other.execute("SET lock_timeout = '3s'")
    live.execute("SET lock_timeout = '3s'")

    with psycopg.connect(dsn) as sweeper:  # an open transaction
        assert sweeper.execute("SELECT pgq.reap()").fetchone()[0] == len(ids)
        t0 = time.monotonic()
        assert other.execute("SELECT pgq.reap()").fetchone()[0] == 0
        assert heartbeat(live, worker_live) == []
        assert time.monotonic() - t0 < 2.0
        sweeper.commit()

    assert other.execute("SELECT pgq.reap()").fetchone()[0] == 0
    rows = admin.execute(
        "SELECT status, deliveries, count(*) FROM pgq._jobs WHERE id = ANY(%s) GROUP BY 1, 2",
        (ids,),
    ).fetchall()
    assert rows == [("queued", 1, len(ids))]


def _worker_to_end(admin: psycopg.Connection, ep: str, ender: str) -> tuple[str, int, uuid.UUID, uuid.UUID]:
    """A queued job of `ep` and two workers of it, A and B; for the heartbeat ender, A has
    been silent for an hour (B's next heartbeat finds it dead)."""
    job_id = admin.execute("SELECT pgq.enqueue(%s)", (ep,)).fetchone()[0]
    worker_a, worker_b = register(admin, "A", [ep]), register(admin, "B", [ep])
    if ender == "heartbeat":
        admin.execute(
            "UPDATE pgq._workers SET heartbeat_at = now() - interval '1 hour' WHERE id = %s", (worker_a,)
        )
    return ep, job_id, worker_a, worker_b


def _end_worker(conn: psycopg.Connection, ender: str, worker_a: uuid.UUID, worker_b: uuid.UUID) -> Any:
    """End worker A: by B's heartbeat (its sweep), or by A's unregistration."""
    if ender == "heartbeat":
        return heartbeat(conn, worker_b)
    return conn.execute("SELECT pgq.unregister_worker(%s)", (worker_a,)).fetchone()[0]


@pytest.mark.parametrize("ender", ["heartbeat", "unregister"])
def test_a_claim_in_flight_when_its_worker_stops_being_alive_is_given_back(
    dsn: str, session, ender: str
) -> None:
    """A claim has taken a job and not committed yet when another worker's heartbeat finds
    its worker silent (or the worker unregisters). Unregistration waits for the claim, so
    the release that follows gives its job back (before, the release missed it and marked
    the worker as holding nothing: the job stayed held by a dead worker that heartbeats no
    longer look up). The sweep does not wait (a claim left open must not stop it): it
    leaves the worker alive, and the first sweep after the claim commits ends it."""
    admin = session()
    ep, job_id, worker_a, worker_b = _worker_to_end(admin, f"claim_ends_{ender}", ender)
    ender_conn = session()
    with psycopg.connect(dsn) as claimer:  # an open transaction: the claim in flight
        assert claim(claimer, worker_a, [ep]) == [(job_id, 1)]
        if ender == "heartbeat":
            assert _end_worker(ender_conn, ender, worker_a, worker_b) == []
            assert worker_state(admin, worker_a) == "alive"
            claimer.commit()
            assert job(admin, job_id)["status"] == "running"
            assert _end_worker(ender_conn, ender, worker_a, worker_b) == []
        else:
            with ThreadPoolExecutor(1) as pool:
                done = pool.submit(_end_worker, ender_conn, ender, worker_a, worker_b)
                assert wait_until_waiting_on_lock(admin, ender_conn.info.backend_pid), (
                    "the end of the worker did not wait for its claim"
                )
                claimer.commit()
                done.result(timeout=30)
    assert worker_state(admin, worker_a) == ("dead" if ender == "heartbeat" else "stopped")
    assert job(admin, job_id) == {"status": "queued", "deliveries": 1, "attempt": 0, "worker_id": None}
    released = admin.execute("SELECT released_at IS NOT NULL FROM pgq._workers WHERE id = %s", (worker_a,))
    assert released.fetchone() == (True,)


@pytest.mark.parametrize("ender", ["heartbeat", "unregister"])
def test_a_claim_that_finds_its_worker_ending_takes_nothing(dsn: str, session, ender: str) -> None:
    """The other order: the worker is being ended (not committed yet) when its claim takes a
    job. The claim waits for the end, then finds its worker no longer alive: it fails
    (PQ003) and the job stays queued."""
    admin = session()
    ep, job_id, worker_a, worker_b = _worker_to_end(admin, f"ending_{ender}", ender)
    claimer = session()
    with psycopg.connect(dsn) as ending:  # an open transaction: the end of worker A
        assert _end_worker(ending, ender, worker_a, worker_b) == ([] if ender == "heartbeat" else 0)
        with ThreadPoolExecutor(1) as pool:
            claimed = pool.submit(claim, claimer, worker_a, [ep])
            assert wait_until_waiting_on_lock(admin, claimer.info.backend_pid), (
                "the claim did not wait for the end of its worker"
            )
            ending.commit()
            with pytest.raises(WorkerGone):
                try:
                    claimed.result(timeout=30)
                except psycopg.Error as exc:
                    raise translate(exc) from exc
    assert job(admin, job_id) == {"status": "queued", "deliveries": 0, "attempt": 0, "worker_id": None}


def test_a_claim_that_takes_nothing_writes_nothing(session) -> None:
    """An idle worker polls: a claim with nothing due locks no row (a lock is a write, and
    the commit of a transaction that wrote waits for a WAL flush)."""
    c = session()
    worker = register(c, "idle", ["idle_ep"])
    with c.transaction():
        assert claim(c, worker, ["idle_ep"], 10) == []
        assert c.execute("SELECT pg_current_xact_id_if_assigned()").fetchone() == (None,)


def test_a_late_heartbeat_never_releases_a_job_claimed_after_it(dsn: str) -> None:
    """The worker sent a heartbeat with its list of running jobs; the beat waited for a lock
    on the worker row (here another session's FOR SHARE), the worker gave up on it at its
    deadline (its cancel lost, or libpq too old to send one) and claimed a job. When the lock
    is free the stale beat runs: it must not release that job, which would then run twice at
    once."""
    ep = "late_beat"
    with (
        psycopg.connect(dsn, autocommit=True) as holder,
        psycopg.connect(dsn, autocommit=True) as late,
        psycopg.connect(dsn, autocommit=True) as worker_conn,
    ):
        worker = register(worker_conn, "late", [ep])
        earlier = worker_conn.execute("SELECT pgq.enqueue(%s)", (ep,)).fetchone()[0]
        assert claim(worker_conn, worker, [ep]) == [(earlier, 1)]
        holder.execute("BEGIN")
        holder.execute("SELECT 1 FROM pgq._workers WHERE id = %s FOR SHARE", (worker,))
        with ThreadPoolExecutor(1) as pool:
            stale = pool.submit(
                lambda: late.execute(
                    "SELECT * FROM pgq.heartbeat(%s::uuid, ARRAY[]::bigint[])", (worker,)
                ).fetchall()
            )
            assert wait_until_waiting_on_lock(worker_conn, late.info.backend_pid)
            job = worker_conn.execute("SELECT pgq.enqueue(%s)", (ep,)).fetchone()[0]
            assert claim(worker_conn, worker, [ep]) == [(job, 1)]
            holder.execute("COMMIT")
            stale.result(timeout=30)
        rows = worker_conn.execute(
            "SELECT id, status, deliveries FROM pgq._jobs WHERE id = ANY(%s) ORDER BY id", ([earlier, job],)
        ).fetchall()
        # The job claimed before the beat, not in its list, goes back (a lost claim reply);
        # the one claimed after it stays with the worker.
        assert rows == [(earlier, "queued", 1), (job, "running", 1)]
