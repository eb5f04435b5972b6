"""Races between sessions: SKIP LOCKED claims, the concurrency limit, dedupe on enqueue.

Each session is its own connection, driven from its own thread; every claim commits on its
own (autocommit), as a worker's would.
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest

from conftest import create_database, drop_database
from support.workers import wait_until_waiting_on_lock


def register(conn: psycopg.Connection, name: str, entrypoints: list[str]) -> uuid.UUID:
    return conn.execute("SELECT pgq.register_worker(%s, %s::text[])", (name, entrypoints)).fetchone()[0]


def claim(
    conn: psycopg.Connection, worker: uuid.UUID, entrypoints: list[str], n: int
) -> list[tuple[int, int]]:
    return conn.execute(
        "SELECT id, deliveries FROM pgq.claim(%s::uuid, %s::text[], %s)", (worker, entrypoints, n)
    ).fetchall()


def complete(conn: psycopg.Connection, worker: uuid.UUID, ids: list[int]) -> list[int]:
    rows = conn.execute("SELECT * FROM pgq.complete(%s::uuid, %s::bigint[])", (worker, ids)).fetchall()
    return sorted(r[0] for r in rows)


def enqueue_many(conn: psycopg.Connection, entrypoint: str, n: int, priority: int = 0) -> list[int]:
    rows = conn.execute(
        "SELECT * FROM pgq.enqueue_batch(%s, array_fill(NULL::jsonb, ARRAY[%s]), priority => %s)",
        (entrypoint, n, priority),
    ).fetchall()
    return [r[0] for r in rows]


def run_in_threads(fns: list[Callable[[], Any]], timeout: float = 120) -> list[Any]:
    """Run each function in its own thread; return their results, re-raise the first error."""
    with ThreadPoolExecutor(max_workers=len(fns)) as pool:
        futures = [pool.submit(fn) for fn in fns]
        return [f.result(timeout=timeout) for f in futures]


# --- SKIP LOCKED ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "entrypoints",
    [["skip_one"], ["skip_a", "skip_b", "skip_c"]],
    ids=["one_entrypoint", "three_entrypoints"],
)
def test_concurrent_claims_are_disjoint_and_complete(
    dsn: str, conn: psycopg.Connection, entrypoints: list[str]
) -> None:
    total = 2000
    expected: set[int] = set()
    for i, ep in enumerate(entrypoints):
        share = total // len(entrypoints) + (1 if i < total % len(entrypoints) else 0)
        expected |= set(enqueue_many(conn, ep, share // 2, priority=0))
        expected |= set(enqueue_many(conn, ep, share - share // 2, priority=5))
    assert len(expected) == total

    batch_sizes = [1, 3, 7, 10, 25, 50]
    barrier = threading.Barrier(len(batch_sizes), timeout=30)

    def worker(batch: int) -> tuple[uuid.UUID, list[int], list[int]]:
        with psycopg.connect(dsn, autocommit=True) as c:
            wid = register(c, f"skip-{batch}", entrypoints)
            barrier.wait()
            ids: list[int] = []
            deliveries: list[int] = []
            while True:
                rows = claim(c, wid, entrypoints, batch)
                if not rows:
                    return wid, ids, deliveries
                assert len(rows) <= batch
                ids += [r[0] for r in rows]
                deliveries += [r[1] for r in rows]

    results = run_in_threads([lambda b=b: worker(b) for b in batch_sizes])

    claimed = [i for _, ids, _ in results for i in ids]
    duplicates = [i for i, n in Counter(claimed).items() if n > 1]
    assert duplicates == [], f"{len(duplicates)} jobs claimed more than once"
    assert set(claimed) == expected
    assert len(claimed) == total
    assert all(d == 1 for _, _, ds in results for d in ds)
    assert sum(1 for _, ids, _ in results if ids) >= 2, "no two sessions ever claimed: no race"

    # The database agrees: every job running, held by the worker that got it.
    held = dict(
        conn.execute(
            "SELECT worker_id, array_agg(id ORDER BY id) FROM pgq._jobs"
            " WHERE status = 'running' GROUP BY worker_id"
        ).fetchall()
    )
    for wid, ids, _ in results:
        assert held.get(wid, []) == sorted(ids)
    assert conn.execute("SELECT count(*) FROM pgq._jobs WHERE status <> 'running'").fetchone()[0] == 0


# A stand-in for pgq._entrypoints_to_claim that waits on advisory lock 4242 first. The claim's
# statement calls it (it can no longer be inlined) after taking its snapshot and before it
# locks any job, which opens the window between the two for another session.
_PAUSED_OPEN_ENTRYPOINTS = """
CREATE FUNCTION pgq._entrypoints_to_claim(entrypoints text[])
RETURNS TABLE (ep text, timeout interval, max_attempts integer, from_np bigint, from_run timestamptz,
               from_id bigint, limited boolean)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_lock(4242);
    PERFORM pg_advisory_unlock(4242);
    RETURN QUERY SELECT * FROM pgq._entrypoints_to_claim_inner(entrypoints);
END
$$
"""


def test_a_job_changed_between_the_claims_snapshot_and_its_lock_is_left_for_the_next_claim(
    template_db: str,
) -> None:
    """The claim updates the rows it locked by their ctid. A job that another transaction
    changed after the claim's snapshot and that is still due (here an UPDATE of its headers,
    as an operator might run) is locked at its new version, which the claim's update cannot
    see: that claim leaves it queued, the next one takes it, changed. No job is lost or
    delivered twice. (pgq's own writes of a queued job, a dedupe_mode 'replace' enqueue,
    also move its run_at past the claim's now(), so the claim skips it either way.)"""
    name = f"pgq_claim_window_{os.getpid()}"
    dsn = create_database(name, template=template_db)
    try:
        with (
            psycopg.connect(dsn, autocommit=True) as admin,
            psycopg.connect(dsn, autocommit=True) as claimer,
        ):
            admin.execute(
                "ALTER FUNCTION pgq._entrypoints_to_claim(text[]) RENAME TO _entrypoints_to_claim_inner"
            )
            admin.execute(_PAUSED_OPEN_ENTRYPOINTS)
            first, changed, last = enqueue_many(admin, "window", 3)
            worker = register(claimer, "w", ["window"])
            admin.execute("SELECT pg_advisory_lock(4242)")
            with ThreadPoolExecutor(max_workers=1) as pool:
                claimed = pool.submit(claim, claimer, worker, ["window"], 10)
                assert wait_until_waiting_on_lock(admin, claimer.info.backend_pid)
                admin.execute("UPDATE pgq._jobs SET headers = '{\"h\": 2}' WHERE id = %s", (changed,))
                admin.execute("SELECT pg_advisory_unlock(4242)")
                first_claim = claimed.result(timeout=30)
            assert sorted(first_claim) == [(first, 1), (last, 1)]
            status = admin.execute("SELECT status FROM pgq._jobs WHERE id = %s", (changed,)).fetchone()[0]
            assert status == "queued"
            again = claimer.execute(
                "SELECT id, deliveries, headers FROM pgq.claim(%s::uuid, '{window}', 10)", (worker,)
            ).fetchall()
            assert again == [(changed, 1, {"h": 2})]
    finally:
        drop_database(name)


# --- concurrency limit ---------------------------------------------------------------------

LIMIT = 3
THREADS = 8


def test_concurrency_limit_holds_in_lockstep_rounds(dsn: str, conn: psycopg.Connection) -> None:
    """All sessions claim at the same instant; no one completes until every claim returned.

    Each round starts with nothing running, so the round's claims together must be exactly
    the limit (there are always more jobs and more claimers than slots).
    """
    ep = "limited_rounds"
    conn.execute("SELECT pgq.configure(%s, concurrency => %s)", (ep, LIMIT))
    enqueue_many(conn, ep, 5000)
    rounds = 40
    per_round: list[list[int]] = [[0] * THREADS for _ in range(rounds)]
    running_seen: list[int] = []

    def count_running() -> None:  # runs once all claims of a round returned, none completed
        running_seen.append(
            conn.execute(
                "SELECT count(*) FROM pgq._jobs WHERE entrypoint = %s AND status = 'running'",
                (ep,),
            ).fetchone()[0]
        )

    start = threading.Barrier(THREADS, timeout=30)
    claimed_all = threading.Barrier(THREADS, timeout=30, action=count_running)
    completed_all = threading.Barrier(THREADS, timeout=30)

    def worker(k: int) -> None:
        rng = random.Random(k)
        with psycopg.connect(dsn, autocommit=True) as c:
            wid = register(c, f"rounds-{k}", [ep])
            for r in range(rounds):
                start.wait()
                rows = claim(c, wid, [ep], rng.randint(1, 4))
                per_round[r][k] = len(rows)
                claimed_all.wait()
                ids = [row[0] for row in rows]
                if ids:
                    assert complete(c, wid, ids) == sorted(ids)
                completed_all.wait()

    run_in_threads([lambda k=k: worker(k) for k in range(THREADS)])

    totals = [sum(r) for r in per_round]
    assert max(totals) <= LIMIT, f"more than {LIMIT} jobs claimed in one round: {totals}"
    assert totals == [LIMIT] * rounds, f"the limit was not filled: {totals}"
    assert running_seen == [LIMIT] * rounds


def test_concurrency_limit_holds_under_free_running_claims(dsn: str, conn: psycopg.Connection) -> None:
    """8 sessions claim, hold briefly and complete as fast as they can for ~2 s.

    Two independent views must never see more than the limit: the claims the threads hold
    (counted up after a claim returns, down before the completion is sent, so the count is
    never above what the database has running) and a watcher session polling the table.
    """
    ep = "limited_free"
    conn.execute("SELECT pgq.configure(%s, concurrency => %s)", (ep, LIMIT))
    enqueue_many(conn, ep, 20000)
    duration = 2.0
    lock = threading.Lock()
    state = {"held": 0, "max_held": 0, "claims": 0, "completed": 0}
    deadline = [0.0]  # set by the barrier once every session is connected and registered

    def start_clock() -> None:
        deadline[0] = time.monotonic() + duration

    barrier = threading.Barrier(THREADS + 1, timeout=30, action=start_clock)

    def worker(k: int) -> None:
        rng = random.Random(k)
        with psycopg.connect(dsn, autocommit=True) as c:
            wid = register(c, f"free-{k}", [ep])
            barrier.wait()
            while time.monotonic() < deadline[0]:
                rows = claim(c, wid, [ep], rng.randint(1, 3))
                if not rows:
                    continue
                ids = [r[0] for r in rows]
                with lock:
                    state["held"] += len(ids)
                    state["claims"] += 1
                    state["max_held"] = max(state["max_held"], state["held"])
                time.sleep(rng.uniform(0, 0.01))
                with lock:
                    state["held"] -= len(ids)
                assert complete(c, wid, ids) == sorted(ids)
                with lock:
                    state["completed"] += len(ids)

    def watcher() -> tuple[int, int]:
        seen_max, polls = 0, 0
        with psycopg.connect(dsn, autocommit=True) as c:
            barrier.wait()
            while time.monotonic() < deadline[0]:
                n = c.execute(
                    "SELECT count(*) FROM pgq._jobs WHERE entrypoint = %s AND status = 'running'",
                    (ep,),
                ).fetchone()[0]
                seen_max, polls = max(seen_max, n), polls + 1
        return seen_max, polls

    results = run_in_threads([*(lambda k=k: worker(k) for k in range(THREADS)), watcher])
    watched_max, polls = results[-1]

    assert state["max_held"] <= LIMIT, f"threads held {state['max_held']} jobs at once"
    assert watched_max <= LIMIT, f"the watcher saw {watched_max} running"
    # Not vacuous: the limit was reached, many times over.
    assert state["max_held"] == LIMIT or watched_max == LIMIT
    assert state["completed"] > 50, state
    assert polls > 10
    assert (
        conn.execute(
            "SELECT count(*) FROM pgq._jobs WHERE entrypoint = %s AND status = 'running'", (ep,)
        ).fetchone()[0]
        == 0
    )
    succeeded = conn.execute(
        "SELECT count(*), count(DISTINCT job_id) FROM pgq._outcomes"
        " WHERE entrypoint = %s AND outcome = 'succeeded'",
        (ep,),
    ).fetchone()
    assert succeeded == (state["completed"], state["completed"])


def test_concurrency_limit_counts_jobs_claimed_by_other_entrypoint_lists(
    dsn: str, conn: psycopg.Connection
) -> None:
    """A worker claiming several entrypoints at once still respects one entrypoint's limit."""
    conn.execute("SELECT pgq.configure('lim_x', concurrency => 2)")
    enqueue_many(conn, "lim_x", 50)
    enqueue_many(conn, "free_y", 50)
    barrier = threading.Barrier(6, timeout=30)

    def worker(k: int) -> list[tuple[int, str]]:
        eps = ["lim_x", "free_y"] if k % 2 else ["lim_x"]
        with psycopg.connect(dsn, autocommit=True) as c:
            wid = register(c, f"mixed-{k}", eps)
            barrier.wait()
            return c.execute(
                "SELECT id, entrypoint FROM pgq.claim(%s::uuid, %s::text[], 10)", (wid, eps)
            ).fetchall()

    results = run_in_threads([lambda k=k: worker(k) for k in range(6)])
    limited = [r for rows in results for r in rows if r[1] == "lim_x"]
    assert len(limited) == 2
    assert (
        conn.execute(
            "SELECT count(*) FROM pgq._jobs WHERE entrypoint = 'lim_x' AND status = 'running'"
        ).fetchone()[0]
        == 2
    )


# --- dedupe --------------------------------------------------------------------------------


def _enqueue_dedupe(c: psycopg.Connection, ep: str, key: str) -> int:
    return c.execute("SELECT pgq.enqueue(%s, dedupe_key => %s)", (ep, key)).fetchone()[0]


def test_dedupe_race_second_enqueue_waits_and_returns_the_same_id(dsn: str, conn: psycopg.Connection) -> None:
    with psycopg.connect(dsn) as a, psycopg.connect(dsn) as b:  # both in open transactions
        first = _enqueue_dedupe(a, "dedupe", "order-1")
        with ThreadPoolExecutor(max_workers=1) as pool:
            second = pool.submit(_enqueue_dedupe, b, "dedupe", "order-1")
            blocked = wait_until_waiting_on_lock(conn, b.info.backend_pid)
            done_early = second.done()
            a.commit()
            second_id = second.result(timeout=30)
        b.commit()
    assert blocked and not done_early, "the second enqueue did not wait for the first"
    assert second_id == first
    rows = conn.execute(
        "SELECT id FROM pgq._jobs WHERE entrypoint = 'dedupe' AND dedupe_key = 'order-1'"
    ).fetchall()
    assert rows == [(first,)]


def test_dedupe_race_first_rolls_back_second_gets_its_own_job(dsn: str, conn: psycopg.Connection) -> None:
    with psycopg.connect(dsn) as a, psycopg.connect(dsn) as b:
        first = _enqueue_dedupe(a, "dedupe", "order-2")
        with ThreadPoolExecutor(max_workers=1) as pool:
            second = pool.submit(_enqueue_dedupe, b, "dedupe", "order-2")
            assert wait_until_waiting_on_lock(conn, b.info.backend_pid)
            a.rollback()
            second_id = second.result(timeout=30)
        b.commit()
    assert second_id != first
    rows = conn.execute(
        "SELECT id FROM pgq._jobs WHERE entrypoint = 'dedupe' AND dedupe_key = 'order-2'"
    ).fetchall()
    assert rows == [(second_id,)]


def test_dedupe_many_sessions_one_job(dsn: str, conn: psycopg.Connection) -> None:
    barrier = threading.Barrier(8, timeout=30)

    def producer() -> int:
        with psycopg.connect(dsn, autocommit=True) as c:
            barrier.wait()
            return _enqueue_dedupe(c, "dedupe", "order-3")

    ids = run_in_threads([producer] * 8)
    assert len(set(ids)) == 1
    assert conn.execute("SELECT count(*) FROM pgq._jobs WHERE dedupe_key = 'order-3'").fetchone()[0] == 1


def test_dedupe_after_the_first_job_completed_gives_a_new_id(conn: psycopg.Connection) -> None:
    first = _enqueue_dedupe(conn, "dedupe_done", "k")
    wid = register(conn, "dedupe-worker", ["dedupe_done"])
    assert [r[0] for r in claim(conn, wid, ["dedupe_done"], 1)] == [first]
    # still live while running: same id
    assert _enqueue_dedupe(conn, "dedupe_done", "k") == first
    assert complete(conn, wid, [first]) == [first]

    second = _enqueue_dedupe(conn, "dedupe_done", "k")
    assert second != first
    assert conn.execute("SELECT pgq.job_status(%s)", (first,)).fetchone()[0] == "succeeded"
    assert conn.execute("SELECT pgq.job_status(%s)", (second,)).fetchone()[0] == "queued"
    assert _enqueue_dedupe(conn, "dedupe_done", "k") == second


def _dead_job(conn: psycopg.Connection, ep: str, key: str) -> int:
    job_id = conn.execute(
        "SELECT pgq.enqueue(%s, dedupe_key => %s, max_attempts => 1)", (ep, key)
    ).fetchone()[0]
    wid = register(conn, f"killer-{uuid.uuid4()}", [ep])
    assert [r[0] for r in claim(conn, wid, [ep], 1)] == [job_id]
    assert conn.execute("SELECT pgq.fail(%s, %s, 'boom')", (wid, job_id)).fetchone()[0] == "dead"
    return job_id


def test_retry_racing_an_enqueue_of_the_same_dedupe_key_leaves_the_job_dead(
    dsn: str, conn: psycopg.Connection
) -> None:
    dead = _dead_job(conn, "dedupe_retry", "k")
    with psycopg.connect(dsn) as producer, psycopg.connect(dsn, autocommit=True) as admin:
        fresh = _enqueue_dedupe(producer, "dedupe_retry", "k")  # open transaction
        assert fresh != dead
        with ThreadPoolExecutor(max_workers=1) as pool:
            retried = pool.submit(
                lambda: admin.execute("SELECT pgq.retry(ARRAY[%s]::bigint[])", (dead,)).fetchone()
            )
            wait_until_waiting_on_lock(conn, admin.info.backend_pid)
            producer.commit()
            # Documented: a dead job whose key a newer live job holds stays dead.
            assert retried.result(timeout=30) == (0,)
    assert conn.execute("SELECT pgq.job_status(%s)", (dead,)).fetchone()[0] == "dead"
    assert conn.execute("SELECT pgq.job_status(%s)", (fresh,)).fetchone()[0] == "queued"


def test_retry_of_two_dead_jobs_with_the_same_dedupe_key(conn: psycopg.Connection) -> None:
    first = _dead_job(conn, "dedupe_retry2", "k")
    second = _dead_job(conn, "dedupe_retry2", "k")
    assert first != second
    assert conn.execute("SELECT pgq.retry(ARRAY[%s, %s]::bigint[])", (first, second)).fetchone()[0] == 1
    statuses = conn.execute(
        "SELECT status, count(*) FROM pgq._jobs WHERE id IN (%s, %s) GROUP BY 1 ORDER BY 1",
        (first, second),
    ).fetchall()
    assert statuses == [("dead", 1), ("queued", 1)]
