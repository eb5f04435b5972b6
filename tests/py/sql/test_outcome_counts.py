"""pgq.outcome_totals: cumulative counts of finished jobs, kept by a statement trigger on the
outcome log. Each outcome lands under its name; the counts survive the log's retention; and
two workers settling jobs of one entrypoint at the same time do not wait for each other's
counter row (one row per connection shard)."""

from __future__ import annotations

import psycopg
import pytest


def _totals(conn: psycopg.Connection, entrypoint: str) -> dict[str, int]:
    rows = conn.execute(
        "SELECT outcome, jobs FROM pgq.outcome_totals WHERE entrypoint = %s", (entrypoint,)
    ).fetchall()
    return {outcome: jobs for outcome, jobs in rows}


def _claim(conn: psycopg.Connection, entrypoint: str, n: int) -> tuple[str, list[int], list[int]]:
    worker = conn.execute("SELECT pgq.register_worker('counts', ARRAY[%s])", (entrypoint,)).fetchone()[0]
    rows = conn.execute(
        "SELECT id, deliveries FROM pgq.claim(%s, ARRAY[%s], %s, protocol => 2)", (worker, entrypoint, n)
    ).fetchall()
    return worker, [r[0] for r in rows], [r[1] for r in rows]


def test_each_outcome_is_counted_once_and_survives_the_log(conn: psycopg.Connection) -> None:
    conn.execute("SELECT pgq.enqueue_batch('oc', array_fill('{}'::jsonb, ARRAY[5]))")
    conn.execute("SELECT pgq.enqueue('oc', max_attempts => 1)")
    worker, ids, deliveries = _claim(conn, "oc", 6)
    assert len(ids) == 6
    # One statement completes four jobs: one upsert, four counted.
    conn.execute(
        "SELECT pgq.complete(%s, %s::bigint[], deliveries => %s::int[])", (worker, ids[:4], deliveries[:4])
    )
    conn.execute("SELECT pgq.fail(%s, %s, 'boom', delivery => %s)", (worker, ids[4], deliveries[4]))
    conn.execute("SELECT pgq.fail(%s, %s, 'boom', delivery => %s)", (worker, ids[5], deliveries[5]))
    conn.execute("SELECT pgq.cancel(ARRAY[pgq.enqueue('oc')])")
    totals = _totals(conn, "oc")
    # One failure had attempts left (failed, retried), the other max_attempts 1 (dead).
    assert totals["succeeded"] == 4 and totals["canceled"] == 1
    assert totals.get("failed", 0) + totals.get("dead", 0) == 2 and totals.get("dead", 0) == 1
    wait, run = conn.execute(
        "SELECT wait_seconds, run_seconds FROM pgq.outcome_totals"
        " WHERE entrypoint = 'oc' AND outcome = 'succeeded'"
    ).fetchone()
    assert wait >= 0 and run >= 0
    # Retention prunes the log, not the counts.
    conn.execute("DELETE FROM pgq._outcomes WHERE entrypoint = 'oc'")
    assert _totals(conn, "oc") == totals


def test_two_workers_settling_one_entrypoint_do_not_wait_for_each_other(
    dsn: str, conn: psycopg.Connection
) -> None:
    conn.execute("SELECT pgq.enqueue_batch('oc2', array_fill('{}'::jsonb, ARRAY[4]))")
    # Two connections in different shards (pid modulo 16); a pid collision would share the
    # row, so open connections until the shards differ.
    a = psycopg.connect(dsn, autocommit=True)
    others: list[psycopg.Connection] = []
    try:
        while True:
            b = psycopg.connect(dsn, autocommit=True)
            if b.info.backend_pid % 16 != a.info.backend_pid % 16:
                break
            others.append(b)
        wa, ids_a, del_a = _claim(a, "oc2", 2)
        wb, ids_b, del_b = _claim(b, "oc2", 2)
        # A completes in a transaction it keeps open (its counter row stays locked) ...
        with a.transaction():
            a.execute("SELECT pgq.complete(%s, %s::bigint[], deliveries => %s::int[])", (wa, ids_a, del_a))
            # ... and B's completion of the same entrypoint does not wait for it.
            b.execute("SET lock_timeout = '2s'")
            done = b.execute(
                "SELECT count(*) FROM pgq.complete(%s, %s::bigint[], deliveries => %s::int[])",
                (wb, ids_b, del_b),
            ).fetchone()[0]
            assert done == 2
        assert _totals(conn, "oc2") == {"succeeded": 4}
        shards = conn.execute("SELECT count(*) FROM pgq._outcome_counts WHERE entrypoint = 'oc2'").fetchone()[
            0
        ]
        assert shards == 2
    finally:
        for c in (a, b, *others):
            c.close()


@pytest.mark.parametrize("statement", ["TRUNCATE pgq._outcomes", "DELETE FROM pgq._outcomes"])
def test_counts_never_go_down(conn: psycopg.Connection, statement: str) -> None:
    conn.execute("SELECT pgq.cancel(ARRAY[pgq.enqueue('oc3')])")
    before = _totals(conn, "oc3")["canceled"]
    conn.execute(statement)
    conn.execute("SELECT pgq.cancel(ARRAY[pgq.enqueue('oc3')])")
    assert _totals(conn, "oc3")["canceled"] == before + 1
