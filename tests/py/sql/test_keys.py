"""Concurrency keys across sessions: the per-key limit under racing claims (forced with a
held lock, and in lockstep rounds), fair claims between a big and a small tenant, and a
real Worker that sees the key and snoozes.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import psycopg
import pytest

import pgq
from support.plans import explain_nested, logged_plans, on_jobs, plan_nodes
from support.workers import wait_until, wait_until_waiting_on_lock
from test_sql_concurrency import complete, register, run_in_threads


def claim(conn: psycopg.Connection, worker: uuid.UUID, ep: str, n: int) -> list[tuple[int, str | None]]:
    return conn.execute(
        "SELECT id, concurrency_key FROM pgq.claim(%s, ARRAY[%s], %s, protocol => 2)", (worker, ep, n)
    ).fetchall()


def enqueue_keyed(conn: psycopg.Connection, ep: str, key: str, n: int) -> list[int]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT pgq.enqueue_batch(%s, array_fill('{}'::jsonb, ARRAY[%s]),"
            " concurrency_keys => array_fill(%s::text, ARRAY[%s]))",
            (ep, n, key, n),
        )
    ]


def test_key_limit_holds_when_a_claim_waits_for_another(dsn: str, conn: psycopg.Connection) -> None:
    """Session A claims key k's one slot and holds its transaction open; session B's claim
    must wait for A's lock, then see A's running job and take nothing of k."""
    ep = "key_race"
    conn.execute("SELECT pgq.configure(%s, key_concurrency => 1)", (ep,))
    enqueue_keyed(conn, ep, "k", 5)
    with psycopg.connect(dsn) as a, psycopg.connect(dsn, autocommit=True) as b:
        wa = register(a, "a", [ep])
        a.commit()
        wb = register(b, "b", [ep])
        assert [r[1] for r in claim(a, wa, ep, 5)] == ["k"]  # in A's open transaction
        result: list[Any] = []
        t = threading.Thread(target=lambda: result.append(claim(b, wb, ep, 5)))
        t.start()
        assert wait_until_waiting_on_lock(conn, b.info.backend_pid), "B did not wait for A's lock"
        a.commit()
        t.join(30)
        assert result == [[]], f"B claimed past the key limit: {result}"
        running = conn.execute(
            "SELECT count(*) FROM pgq._jobs WHERE entrypoint = %s AND status = 'running'", (ep,)
        ).fetchone()[0]
        assert running == 1


def test_key_limit_holds_in_lockstep_rounds(dsn: str, conn: psycopg.Connection) -> None:
    """6 sessions claim at the same instant, 3 keys with a limit of 2 each: every round
    claims exactly 2 jobs of each key, never more."""
    ep, limit, threads, rounds = "key_rounds", 2, 6, 15
    conn.execute("SELECT pgq.configure(%s, key_concurrency => %s)", (ep, limit))
    for key in ("a", "b", "c"):
        enqueue_keyed(conn, ep, key, 200)
    per_round: list[dict[str, int]] = [{} for _ in range(rounds)]
    lock = threading.Lock()
    start = threading.Barrier(threads, timeout=30)
    claimed_all = threading.Barrier(threads, timeout=30)
    completed_all = threading.Barrier(threads, timeout=30)

    def worker(k: int) -> None:
        with psycopg.connect(dsn, autocommit=True) as c:
            wid = register(c, f"rounds-{k}", [ep])
            for r in range(rounds):
                start.wait()
                rows = claim(c, wid, ep, 3)
                with lock:
                    for _, key in rows:
                        per_round[r][key] = per_round[r].get(key, 0) + 1
                claimed_all.wait()
                if rows:
                    complete(c, wid, [row[0] for row in rows])
                completed_all.wait()

    run_in_threads([lambda k=k: worker(k) for k in range(threads)])
    assert per_round == [{"a": limit, "b": limit, "c": limit}] * rounds


def test_small_tenant_is_not_stuck_behind_a_big_one(conn: psycopg.Connection) -> None:
    """20 jobs of a small tenant enqueued after 3000 of a big one all start long before
    the big one is half done (claims of 10, as a worker with concurrency 10 makes them)."""
    ep = "fair"
    enqueue_keyed(conn, ep, "big", 3000)
    enqueue_keyed(conn, ep, "small", 20)
    wid = register(conn, "fair", [ep])
    started: list[str] = []
    while started.count("small") < 20:
        rows = claim(conn, wid, ep, 10)
        assert rows, f"nothing to claim after {len(started)} starts"
        started += [r[1] for r in rows]
        complete(conn, wid, [r[0] for r in rows])
    big_before_last_small = started.count("big")
    assert started.count("small") == 20
    # Rotation gives the small tenant every second start: 20 big ones at most before its
    # last one. The bound is generous: a tenth of the way through the big backlog.
    assert big_before_last_small <= 300, big_before_last_small


def test_an_entrypoint_without_keys_claims_as_before(conn: psycopg.Connection) -> None:
    ep = "plain_order"
    ids = [
        conn.execute("SELECT pgq.enqueue(%s, priority => %s)", (ep, p)).fetchone()[0] for p in (0, 5, 0, 5)
    ]
    wid = register(conn, "plain", [ep])
    got = [r[0] for r in claim(conn, wid, ep, 4)]
    assert got == [ids[1], ids[3], ids[0], ids[2]], "priority, then age, as before keys"
    assert not conn.execute("SELECT coalesce(bool_or(keyed), false) FROM pgq._queues").fetchone()[0]


def test_worker_sees_the_key_and_snoozes(dsn: str, conn: psycopg.Connection) -> None:
    client = pgq.Client(dsn)
    try:
        job_id = client.enqueue("snoozy", {"n": 1}, concurrency_key="tenant:7")
    finally:
        client.close()
    seen: list[tuple[str | None, int, int]] = []
    worker = pgq.Worker(dsn, concurrency=2, poll_interval=0.1, name="snoozer")

    @worker.entrypoint("snoozy")
    def handle(job: pgq.Job) -> str:
        seen.append((job.concurrency_key, job.attempt, job.deliveries))
        if len(seen) == 1:
            raise pgq.Snooze(0)
        return "done"

    t = threading.Thread(target=worker.run)
    t.start()
    try:
        wait_until(
            lambda: conn.execute("SELECT pgq.job_status(%s)", (job_id,)).fetchone()[0] == "succeeded",
            30,
            "the snoozed job to succeed",
        )
    finally:
        worker.stop()
        t.join(30)
    assert seen == [("tenant:7", 1, 1), ("tenant:7", 1, 2)]
    outcomes = conn.execute(
        "SELECT outcome, attempt, concurrency_key FROM pgq.outcomes WHERE job_id = %s ORDER BY finished_at",
        (job_id,),
    ).fetchall()
    assert outcomes == [("snoozed", 1, "tenant:7"), ("succeeded", 1, "tenant:7")]
    assert conn.execute("SELECT pgq.job(%s) ->> 'concurrency_key'", (job_id,)).fetchone()[0] == "tenant:7"


def test_a_job_canceled_at_its_enqueues_commit_keeps_its_key(dsn: str, conn: psycopg.Connection) -> None:
    """The enqueue's transaction is open when its dependency is canceled: the commit-time
    check cancels the new job, and its outcome row keeps the key."""
    parent = conn.execute("SELECT pgq.enqueue('keyparent')").fetchone()[0]
    with psycopg.connect(dsn) as producer:
        child = producer.execute(
            "SELECT pgq.enqueue('keychild', depends_on => ARRAY[%s::bigint], concurrency_key => 'tenant:9')",
            (parent,),
        ).fetchone()[0]
        assert conn.execute("SELECT pgq.cancel(ARRAY[%s::bigint])", (parent,)).fetchone()[0] == 1
        producer.commit()
    assert conn.execute(
        "SELECT outcome, concurrency_key FROM pgq.outcomes WHERE job_id = %s", (child,)
    ).fetchall() == [("canceled", "tenant:9")]


def test_snooze_rejects_a_bad_delay() -> None:
    with pytest.raises(ValueError):
        pgq.Snooze(-1)
    with pytest.raises(ValueError):
        pgq.Snooze(True)  # type: ignore[arg-type]
    assert pgq.Snooze(1.5).seconds == 1.5


def test_keyed_claim_reads_per_key_not_per_job(conn: psycopg.Connection) -> None:
    """On 100k queued jobs of two keys, the keyed claim's statement (its plan captured with
    auto_explain, actual row counts) reads a few rows per key, never the backlog."""
    ep = "keyed_big"
    enqueue_keyed(conn, ep, "big", 100_000)
    enqueue_keyed(conn, ep, "small", 10)
    conn.execute("ANALYZE pgq._jobs")
    wid = register(conn, "kb", [ep])
    notices = explain_nested(conn, "auto_explain.log_analyze = on")
    rows = claim(conn, wid, ep, 10)
    conn.execute("RESET client_min_messages")
    assert sorted(r[1] for r in rows) == ["big"] * 5 + ["small"] * 5
    statements = logged_plans(notices)
    plans = [d["Plan"] for d in statements if "RECURSIVE" in d.get("Query Text", "")]
    assert len(plans) == 1, "the keyed claim's plan was not captured"
    scans = [n for n in plan_nodes(plans[0]) if on_jobs(n)]
    assert scans and all(n["Node Type"] != "Seq Scan" for n in scans), [n["Node Type"] for n in scans]
    read = sum(n["Actual Rows"] * n["Actual Loops"] for n in scans)
    assert read < 200, f"the keyed claim read {read} rows of _jobs"
    # Nor does any other statement of the claim (the jobs without a key walk the claim index).
    for doc in statements:
        scans = [n for n in plan_nodes(doc["Plan"]) if on_jobs(n)]
        read = sum(n["Actual Rows"] * n["Actual Loops"] for n in scans)
        assert read < 1000, f"{read} rows of _jobs read by: {doc.get('Query Text', '')[:300]}"


def test_a_locked_keyed_job_is_passed_over_not_waited_for(dsn: str, conn: psycopg.Connection) -> None:
    """A queued keyed job locked by another transaction (a replace-mode enqueue or a cancel
    in progress) is skipped, and the next job in claim order takes its place: a claim of one
    must not come back empty while the first job in line is locked."""
    ep = "keyed_locked"
    first = enqueue_keyed(conn, ep, "a", 2)[0]
    enqueue_keyed(conn, ep, "b", 1)
    wid = register(conn, "kl", [ep])
    with psycopg.connect(dsn) as other:
        other.execute("SELECT 1 FROM pgq._jobs WHERE id = %s FOR UPDATE", (first,))
        rows = claim(conn, wid, ep, 1)
        assert len(rows) == 1 and rows[0][0] != first, rows
        other.rollback()
    assert [r[0] for r in claim(conn, wid, ep, 1)] == [first]
