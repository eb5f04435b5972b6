"""Batches with callbacks (pgq.batch, docs/batches.md): each callback is enqueued exactly
once, in the transaction that brings it about, however the members' ends interleave.

The race that matters is forced, not hoped for: the last two members of a batch of 1,000
end on two connections whose commits both reach pgq._trg_batch_settle, held at a hook (hooks.py)
just before it locks the batch, and are let go together. Then three real `pgq worker`
processes drain two batches whose members interleave (so that one completion call settles
members of both, in either order) and every callback exists once.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest
from psycopg import sql

import pgq
from support.hooks import HOOK, hook
from support.workers import WorkerProcess, scalar, wait_until, wait_until_waiting_on_lock

CALLBACKS = "on_finish => '\"b_finish\"', on_success => '\"b_success\"', on_death => '\"b_death\"'"


def open_batch(dsn: str, sizes: list[tuple[str, int]], callbacks: str = CALLBACKS) -> tuple[int, list[int]]:
    """One batch whose members are `sizes` (entrypoint, count) in order, committed."""
    with psycopg.connect(dsn) as c:
        batch = c.execute(f"SELECT pgq.batch({callbacks})").fetchone()[0]
        ids = []
        for entrypoint, n in sizes:
            ids += [
                r[0]
                for r in c.execute(
                    "SELECT * FROM pgq.enqueue_batch(%s, array_fill('{}'::jsonb, ARRAY[%s]),"
                    " max_attempts => 1, batch => %s)",
                    (entrypoint, n, batch),
                )
            ]
    return batch, ids


def callbacks(conn: psycopg.Connection, batch: int) -> dict[str, list[dict[str, Any]]]:
    """The callback jobs of a batch by event: their payloads' "batch" figures."""
    found: dict[str, list[dict[str, Any]]] = {}
    for (figures,) in conn.execute(
        "SELECT payload -> 'batch' FROM pgq._jobs"
        " WHERE (payload -> 'batch' ->> 'id')::bigint = %s ORDER BY id",
        (batch,),
    ):
        found.setdefault(figures["event"], []).append(figures)
    return found


def race_last_two(conn: psycopg.Connection, dsn: str, ends: list[str]) -> dict[str, list[dict[str, Any]]]:
    """A batch of 1,000: 998 members succeed, then the last two end by `ends` (SQL with
    %(w)s and %(id)s) on two connections at once; returns the callbacks."""
    batch, ids = open_batch(dsn, [("b_part", 1000)])
    w = conn.execute("SELECT pgq.register_worker('w', ARRAY['b_part'])").fetchone()[0]
    assert (
        conn.execute("SELECT count(*) FROM pgq.claim(%s, ARRAY['b_part'], 1000)", (w,)).fetchone()[0] == 1000
    )
    done = conn.execute("SELECT count(*) FROM pgq.complete(%s, %s)", (w, ids[:998])).fetchone()[0]
    assert done == 998 and callbacks(conn, batch) == {}
    original = hook(conn, "pgq._trg_batch_settle()", "PERFORM 1 FROM pgq._batches")
    conn.execute("SELECT pg_advisory_lock(%s)", (HOOK,))
    try:
        with (
            psycopg.connect(dsn) as a,
            psycopg.connect(dsn) as b,
            ThreadPoolExecutor(max_workers=2) as pool,
        ):
            for session, end, job in ((a, ends[0], ids[998]), (b, ends[1], ids[999])):
                session.execute(end, {"w": w, "id": job})
            commits = [pool.submit(session.commit) for session in (a, b)]
            for session in (a, b):
                assert wait_until_waiting_on_lock(conn, session.info.backend_pid), (
                    "a commit never reached the hook"
                )
            conn.execute("SELECT pg_advisory_unlock(%s)", (HOOK,))
            for commit in commits:
                commit.result(timeout=30)
    finally:
        conn.execute("SELECT pg_advisory_unlock_all()")
        conn.execute(original)
    assert (
        conn.execute(
            "SELECT count(*) FROM pgq._batch_members"
            " WHERE batch_id = %s AND (outcome IS NULL OR ended_xact IS NOT NULL)",
            (batch,),
        ).fetchone()[0]
        == 0
    ), "a member's end was not counted"
    return callbacks(conn, batch)


COMPLETE = "SELECT pgq.complete(%(w)s, ARRAY[%(id)s]::bigint[])"
FAIL = "SELECT pgq.fail(%(w)s, %(id)s, 'boom')"


def test_last_two_members_ending_at_once_enqueue_each_callback_once(
    conn: psycopg.Connection, dsn: str
) -> None:
    # Both succeed: one finish and one success, with the final counts.
    got = race_last_two(conn, dsn, [COMPLETE, COMPLETE])
    figures = {"total": 1000, "succeeded": 1000, "dead": 0, "canceled": 0}
    assert {event: len(jobs) for event, jobs in got.items()} == {"finish": 1, "success": 1}
    assert {k: got["finish"][0][k] for k in figures} == figures
    conn.execute("TRUNCATE pgq._jobs, pgq._outcomes, pgq._workers, pgq._batches, pgq._batch_members")
    # One dies as the other succeeds: one death, one finish, no success.
    got = race_last_two(conn, dsn, [FAIL, COMPLETE])
    assert {event: len(jobs) for event, jobs in got.items()} == {"death": 1, "finish": 1}
    assert {k: got["finish"][0][k] for k in figures} == {**figures, "succeeded": 999, "dead": 1}


def test_three_workers_drain_interleaved_batches_each_callback_once(
    conn: psycopg.Connection, dsn: str, spawn: Callable[..., WorkerProcess]
) -> None:
    # Members of the two batches alternate in id order, 100 and 20 at a time: a worker's
    # completion call often holds members of both, and the three workers' calls lock the
    # two batches at their commits (in id order: no deadlock).
    with psycopg.connect(dsn) as c:
        big = c.execute(f"SELECT pgq.batch({CALLBACKS})").fetchone()[0]
        small = c.execute(f"SELECT pgq.batch({CALLBACKS})").fetchone()[0]
        for _ in range(10):
            for batch, n in ((big, 100), (small, 20)):
                c.execute(
                    "SELECT * FROM pgq.enqueue_batch('noop', array_fill('{}'::jsonb, ARRAY[%s]),"
                    " batch => %s)",
                    (n, batch),
                )
    started = time.monotonic()
    workers = [spawn() for _ in range(3)]
    wait_until(
        lambda: scalar(dsn, "SELECT count(*) FROM pgq._batches WHERE finished_at IS NOT NULL") == 2,
        timeout=120,
        what="both batches to finish",
    )
    print(f"3 workers drained 1,200 members of two batches in {time.monotonic() - started:.2f} s")
    # A loaded machine can drain the batches before a worker finished starting: a SIGTERM
    # then ends it before its handlers are in place (exit -15). Registered workers have them.
    wait_until(lambda: scalar(dsn, "SELECT count(*) FROM pgq._workers") == 3, timeout=60, what="3 workers")
    assert [w.terminate() for w in workers] == [0, 0, 0]
    for batch, total in ((big, 1000), (small, 200)):
        got = callbacks(conn, batch)
        assert {event: len(jobs) for event, jobs in got.items()} == {"finish": 1, "success": 1}, batch
        assert got["success"][0] | {"event": None} == {
            "id": batch,
            "event": None,
            "total": total,
            "succeeded": total,
            "dead": 0,
            "canceled": 0,
        }
        members = conn.execute(
            "SELECT status, count(*) FROM pgq.batch_results(%s) GROUP BY 1", (batch,)
        ).fetchall()
        assert members == [("succeeded", total)]
    assert "deadlock" not in " ".join(w.log() for w in workers)


def test_client_batches_zero_members_rollback_and_prune(conn: psycopg.Connection, dsn: str) -> None:
    with pgq.Client(dsn) as client:
        # No members: it finishes and succeeds at its commit.
        empty = client.batch("b_part", [], on_finish="b_finish", on_success={"entrypoint": "b_success"})
        assert empty.job_ids == [] and client.batch_results(empty.id) == []
        assert {e: len(j) for e, j in callbacks(conn, empty.id).items()} == {"finish": 1, "success": 1}
        # Rolled back: neither the batch nor its members ever were.
        with psycopg.connect(dsn) as tx:
            gone = client.batch("b_part", [{"n": 1}], on_finish="b_finish", conn=tx)
            tx.rollback()
        with pytest.raises(pgq.UnknownJob):
            client.batch_results(gone.id)
        assert scalar(dsn, "SELECT count(*) FROM pgq._jobs WHERE id = %s", (gone.job_ids[0],)) == 0
        with pytest.raises(pgq.InvalidArgument, match=r"on_death\.priority"):
            client.batch("b_part", [{}], on_death={"entrypoint": "b_death", "priority": "high"})
        # A callback's payload keeps its own keys; the producer reads the members.
        full = client.batch(
            "b_part",
            [{"n": 1}, {"n": 2}],
            on_finish={"entrypoint": "b_finish", "payload": {"to": "ops"}},
            priority=3,
        )
        assert [(m.job_id, m.status) for m in client.batch_results(full.id)] == [
            (i, "queued") for i in full.job_ids
        ]
        client.cancel(full.job_ids)
        (finish,) = callbacks(conn, full.id)["finish"]
        assert (finish["canceled"], finish["total"]) == (2, 2)
        assert (
            conn.execute(
                "SELECT payload ->> 'to' FROM pgq._jobs WHERE (payload -> 'batch' ->> 'id')::bigint = %s",
                (full.id,),
            ).fetchone()[0]
            == "ops"
        )

    async def use_async() -> tuple[pgq.Batch, list[pgq.BatchMember]]:
        async with pgq.AsyncClient(dsn) as aclient:
            opened = await aclient.batch("b_part", [{}, {}], on_death="b_death")
            return opened, await aclient.batch_results(opened.id)

    opened, members = asyncio.run(use_async())
    assert [m.job_id for m in members] == opened.job_ids and len(opened.job_ids) == 2

    # Retention: a batch finished before the longest retention goes with its members; one
    # with a member still in the queue (a dead one may be retried) stays.
    conn.execute("UPDATE pgq._batches SET finished_at = now() - interval '30 days'")
    conn.execute("SELECT pgq.prune()")
    assert [r[0] for r in conn.execute("SELECT id FROM pgq._batches")] == [opened.id]
    assert (
        scalar(dsn, "SELECT count(*) FROM pgq._batch_members WHERE batch_id IN (%s, %s)", (empty.id, full.id))
        == 0
    )


def test_every_way_a_member_ends_is_counted_once(conn: psycopg.Connection, dsn: str) -> None:
    """Each path that ends a job, each in a transaction of its own: the member's outcome and
    the batch's counts follow; a discarded dead member stays dead; a retried one is live."""
    conn.execute("SELECT pgq.configure('b_pill', max_deliveries => 1)")
    gone = conn.execute("SELECT pgq.enqueue('b_gone')").fetchone()[0]
    conn.execute("SELECT pgq.cancel(ARRAY[%s]::bigint[])", (gone,))
    waited = conn.execute("SELECT pgq.enqueue('b_gone')").fetchone()[0]
    with psycopg.connect(dsn) as c:
        batch = c.execute(f"SELECT pgq.batch({CALLBACKS})").fetchone()[0]
        ids = {}
        for path in (
            "done",
            "dies",
            "canceled",
            "confirmed",
            "failed_cancel",
            "pill",
            "discarded",
            "retried",
        ):
            (ids[path],) = c.execute(
                "SELECT * FROM pgq.enqueue_batch(%s, ARRAY['{}']::jsonb[], max_attempts => 1, batch => %s)",
                (f"b_{path}", batch),
            ).fetchone()
        for path, parent in (("cascade", waited), ("born_canceled", gone)):
            (ids[path],) = c.execute(
                "SELECT * FROM pgq.enqueue_batch('b_dep', ARRAY['{}']::jsonb[],"
                " depends_on => ARRAY[%s]::bigint[], batch => %s)",
                (parent, batch),
            ).fetchone()
    entrypoints = [f"b_{path}" for path in ids]
    w = conn.execute("SELECT pgq.register_worker('w', %s::text[])", (entrypoints,)).fetchone()[0]

    def run(path: str, *statements: str) -> None:
        assert (
            conn.execute("SELECT count(*) FROM pgq.claim(%s, ARRAY[%s])", (w, f"b_{path}")).fetchone()[0] == 1
        )
        for statement in statements:
            conn.execute(statement, {"w": w, "id": ids[path]})

    run("done", COMPLETE)
    run("dies", FAIL)
    conn.execute("SELECT pgq.cancel(ARRAY[%s]::bigint[])", (ids["canceled"],))
    run("confirmed", "SELECT pgq.cancel(ARRAY[%(id)s]::bigint[])", "SELECT pgq.confirm_cancel(%(w)s, %(id)s)")
    run("failed_cancel", "SELECT pgq.cancel(ARRAY[%(id)s]::bigint[])", FAIL)
    run("pill", "SELECT pgq._release(ARRAY[%(w)s]::uuid[], '{}', TRUE)")
    run("discarded", FAIL, "SELECT pgq.cancel(ARRAY[%(id)s]::bigint[])")
    run("retried", FAIL, "SELECT pgq.retry(ARRAY[%(id)s]::bigint[])")
    conn.execute("SELECT pgq.cancel(ARRAY[%s]::bigint[])", (waited,))
    outcomes = dict(
        conn.execute(
            "SELECT job_id, outcome FROM pgq._batch_members WHERE batch_id = %s", (batch,)
        ).fetchall()
    )
    assert {path: outcomes[job] for path, job in ids.items()} == {
        "done": "succeeded",
        "dies": "dead",
        "canceled": "canceled",
        "confirmed": "canceled",
        "failed_cancel": "canceled",
        "pill": "dead",
        "discarded": "dead",
        "retried": None,
        "cascade": "canceled",
        "born_canceled": "canceled",
    }
    counts = conn.execute(
        "SELECT total, succeeded, dead, canceled, finished_at IS NULL FROM pgq._batches WHERE id = %s",
        (batch,),
    ).fetchone()
    assert counts == (10, 1, 3, 5, True)
    assert {event: len(jobs) for event, jobs in callbacks(conn, batch).items()} == {"death": 1}
    run("retried", COMPLETE)
    got = callbacks(conn, batch)
    assert {event: len(jobs) for event, jobs in got.items()} == {"death": 1, "finish": 1}
    assert {k: got["finish"][0][k] for k in ("succeeded", "dead", "canceled")} == {
        "succeeded": 2,
        "dead": 3,
        "canceled": 5,
    }


def test_members_end_and_callbacks_fire_under_the_pgq_roles(conn: psycopg.Connection, dsn: str) -> None:
    """The count is taken at commit, by a deferred trigger: it must work whoever commits.
    A producer role opens a batch, a worker role completes and fails its members, an admin
    role retries and cancels; each commit counts, and the producer reads the results."""
    tag = uuid.uuid4().hex[:10]
    names = {group: f"b_{group}_{tag}" for group in ("pgq_producer", "pgq_worker", "pgq_admin")}
    for group, name in names.items():
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(sql.Identifier(name), sql.Identifier(group))
        )
    try:
        role_dsn = {group: psycopg.conninfo.make_conninfo(dsn, user=name) for group, name in names.items()}
        with pgq.Client(role_dsn["pgq_producer"]) as producer:
            opened = producer.batch(
                "b_roles", [{}, {}, {}], on_finish="b_finish", on_death="b_death", max_attempts=1
            )
            with psycopg.connect(role_dsn["pgq_worker"], autocommit=True) as w:
                wid = w.execute("SELECT pgq.register_worker('w', ARRAY['b_roles'])").fetchone()[0]
                assert (
                    len(w.execute("SELECT * FROM pgq.claim(%s, ARRAY['b_roles'], 3)", (wid,)).fetchall()) == 3
                )
                w.execute("SELECT pgq.complete(%s, %s)", (wid, opened.job_ids[:1]))
                for job in opened.job_ids[1:]:
                    w.execute("SELECT pgq.fail(%s, %s, 'boom')", (wid, job))
            with psycopg.connect(role_dsn["pgq_admin"], autocommit=True) as a:
                a.execute("SELECT pgq.retry(%s)", (opened.job_ids[1:],))
                a.execute("SELECT pgq.cancel(%s)", (opened.job_ids[1:],))
            assert [m.status for m in producer.batch_results(opened.id)] == [
                "succeeded",
                "canceled",
                "canceled",
            ]
        got = callbacks(conn, opened.id)
        assert {event: len(jobs) for event, jobs in got.items()} == {"death": 1, "finish": 1}
        # on_finish came with the second death (every member had ended once), before the retries.
        assert (got["finish"][0]["succeeded"], got["finish"][0]["dead"]) == (1, 2)
    finally:
        for name in names.values():
            conn.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(name)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def test_ending_a_member_and_waiting_on_another_does_not_deadlock(conn: psycopg.Connection, dsn: str) -> None:
    """A transaction that ends one member and enqueues a job that depends on another member
    (its commit-time check waits for that member's own completion) commits after it; both
    are counted. The count must not hold the batch while that check waits: the other
    completion's commit needs the batch."""
    batch, (first, second) = open_batch(dsn, [("b_dl", 2)])
    w = conn.execute("SELECT pgq.register_worker('w', ARRAY['b_dl'])").fetchone()[0]
    assert len(conn.execute("SELECT * FROM pgq.claim(%s, ARRAY['b_dl'], 2)", (w,)).fetchall()) == 2
    with psycopg.connect(dsn) as a, psycopg.connect(dsn) as b, ThreadPoolExecutor(max_workers=1) as pool:
        b.execute("SELECT pgq.complete(%s, ARRAY[%s]::bigint[])", (w, second))  # holds `second`
        a.execute("SELECT pgq.complete(%s, ARRAY[%s]::bigint[])", (w, first))
        a.execute("SELECT pgq.enqueue('b_next', depends_on => ARRAY[%s]::bigint[])", (second,))
        commit = pool.submit(a.commit)
        assert wait_until_waiting_on_lock(conn, a.info.backend_pid), "the commit did not wait for `second`"
        b.commit()  # DeadlockDetected here (or in a.commit) while the count held the batch
        commit.result(timeout=30)
    assert {e: len(j) for e, j in callbacks(conn, batch).items()} == {"finish": 1, "success": 1}
    assert scalar(dsn, "SELECT status FROM pgq.jobs WHERE entrypoint = 'b_next'") == "queued"
