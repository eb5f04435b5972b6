"""A drain while an old snapshot is held (a report, a pg_dump, an idle transaction).

Vacuum cannot remove the row versions that claims and completions leave behind while a
REPEATABLE READ snapshot from before them is open: every index that points at them keeps
the entries, and a scan that walks such an index visits each dead version in the heap. A
statement that needs a handful of rows by id must therefore find them through the primary
key, never by walking the index of running jobs (whose statistics, taken when few jobs ran,
make it look free). These are plan and buffer checks, not timings.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from support.plans import explain_nested, logged_plans, on_jobs, plan_nodes

JOBS = 3000
BATCH = 100


@pytest.fixture
def held(dsn: str) -> Iterator[psycopg.Connection]:
    """JOBS queued jobs, analysed while none runs; then a snapshot held from before the drain."""
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(
            "SELECT count(*) FROM pgq.enqueue_batch('held', array_fill('{\"n\": 1}'::jsonb, ARRAY[%s]))",
            (JOBS,),
        )
        c.execute("ANALYZE pgq._jobs")
    holder = psycopg.connect(dsn)
    holder.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    holder.execute("SELECT 1 FROM pgq._queues LIMIT 1").fetchall()
    try:
        yield holder
    finally:
        holder.close()


def nested_plans(
    c: psycopg.Connection, statement: str, params: tuple[Any, ...]
) -> list[tuple[str, dict[str, Any]]]:
    """Run a pgq call with auto_explain on its nested statements: (query text, plan) of each."""
    notices = explain_nested(
        c, "auto_explain.log_analyze = on", "auto_explain.log_buffers = on", "auto_explain.log_timing = off"
    )
    try:
        c.execute(statement, params).fetchall()
    finally:
        c.execute("RESET client_min_messages")
        c.execute("SET auto_explain.log_min_duration = -1")
    return [(doc["Query Text"], doc["Plan"]) for doc in logged_plans(notices)]


def jobs_indexes(plans: list[tuple[str, dict[str, Any]]], marker: str) -> list[str | None]:
    """The indexes (None: not an index) through which the statement containing `marker` reads pgq._jobs."""
    found = [plan for text, plan in plans if marker in text]
    assert found, f"no statement with {marker!r} among {[t[:60] for t, _ in plans]}"
    return [
        n.get("Index Name")
        for plan in found
        for n in plan_nodes(plan)
        if on_jobs(n) and "Scan" in n["Node Type"]
    ]


def shared_hits(plans: list[tuple[str, dict[str, Any]]], marker: str) -> int:
    return sum(plan["Shared Hit Blocks"] for text, plan in plans if marker in text)


@pytest.mark.parametrize("mode", ["force_custom_plan", "force_generic_plan"])
def test_calls_by_job_id_use_the_primary_key_under_a_held_snapshot(
    dsn: str, held: psycopg.Connection, mode: str
) -> None:
    """complete, fail, snooze, cancel and the heartbeat's cancellation lookup read their jobs by
    key, however many dead entries the held snapshot has left in the running index."""
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(f"SET plan_cache_mode = {mode}")
        worker = c.execute("SELECT pgq.register_worker('held', ARRAY['held'])").fetchone()[0]

        def claim() -> list[int]:
            rows = c.execute(
                "SELECT id FROM pgq.claim(%s::uuid, ARRAY['held'], %s)", (worker, BATCH)
            ).fetchall()
            return [r[0] for r in rows]

        def complete(ids: list[int]) -> list[tuple[str, dict[str, Any]]]:
            plans = nested_plans(c, "SELECT * FROM pgq.complete(%s::uuid, %s::bigint[])", (worker, ids))
            assert sorted(
                r[0] for r in c.execute("SELECT job_id FROM pgq._outcomes WHERE job_id = ANY (%s)", (ids,))
            ) == sorted(ids)
            return plans

        first = complete(claim())
        # Most of the queue claimed and completed under the held snapshot: the running index
        # now holds thousands of entries that vacuum may not remove.
        for _ in range(JOBS // BATCH - 3):
            ids = claim()
            c.execute("SELECT count(*) FROM pgq.complete(%s::uuid, %s::bigint[])", (worker, ids))
        ids = claim()
        last = complete(ids[4:])
        calls = {
            "fail": nested_plans(c, "SELECT pgq.fail(%s::uuid, %s, 'boom')", (worker, ids[0])),
            "snooze": nested_plans(
                c, "SELECT pgq.snooze(%s::uuid, %s, interval '1 minute')", (worker, ids[1])
            ),
            "cancel": nested_plans(c, "SELECT pgq.cancel(ARRAY[%s]::bigint[])", (ids[2],)),
            "heartbeat": nested_plans(c, "SELECT * FROM pgq.heartbeat(%s::uuid)", (worker,)),
        }
        assert c.execute("SELECT status FROM pgq._jobs WHERE id = %s", (ids[0],)).fetchone() == ("queued",)
        assert c.execute("SELECT status, snoozes FROM pgq._jobs WHERE id = %s", (ids[1],)).fetchone() == (
            "queued",
            1,
        )

    marker = "DELETE FROM pgq._jobs"
    assert set(jobs_indexes(first, marker)) == {"_jobs_pkey"}
    assert set(jobs_indexes(last, marker)) == {"_jobs_pkey"}
    # The same work early and late: the dead versions of the jobs completed so far are not
    # visited (a walk of the running index would touch each of their heap pages).
    assert shared_hits(last, marker) <= shared_hits(first, marker) * 1.5 + 20
    assert set(jobs_indexes(calls["fail"], "fail.job_id")) == {"_jobs_pkey"}
    assert set(jobs_indexes(calls["snooze"], "snooze.job_id")) == {"_jobs_pkey"}
    assert set(jobs_indexes(calls["cancel"], "SET cancel_requested = TRUE")) == {"_jobs_pkey"}
    assert set(jobs_indexes(calls["heartbeat"], "j.cancel_requested")) == {"_jobs_default_cancel_idx"}


def test_a_heartbeat_does_not_visit_the_jobs_claimed_under_a_held_snapshot(
    dsn: str, held: psycopg.Connection
) -> None:
    """A heartbeat's sweep (silent workers, the jobs of workers gone, timeouts) reads only what
    it may act on: as much work after thousands of jobs were claimed and completed under the
    snapshot as after the first hundred, a worker that stopped meanwhile included."""
    with psycopg.connect(dsn, autocommit=True) as c:
        worker = c.execute("SELECT pgq.register_worker('held', ARRAY['held'])").fetchone()[0]

        def drain(batches: int) -> None:
            for _ in range(batches):
                c.execute(
                    "SELECT count(*) FROM pgq.complete(%s::uuid,"
                    " ARRAY(SELECT id FROM pgq.claim(%s::uuid, ARRAY['held'], %s)))",
                    (worker, worker, BATCH),
                )

        def beat() -> int:
            plans = nested_plans(c, "SELECT * FROM pgq.heartbeat(%s::uuid)", (worker,))
            return shared_hits(plans, "FROM pgq.heartbeat(")

        def stop_holding_a_job() -> int:
            """A worker stops holding a job: the next heartbeat gives it back; its cost."""
            gone = c.execute("SELECT pgq.register_worker('gone', ARRAY['held'])").fetchone()[0]
            [(job,)] = c.execute("SELECT id FROM pgq.claim(%s::uuid, ARRAY['held'], 1)", (gone,)).fetchall()
            c.execute("UPDATE pgq._workers SET state = 'stopped', stopped_at = now() WHERE id = %s", (gone,))
            cost = beat()
            row = c.execute("SELECT status, worker_id FROM pgq._jobs WHERE id = %s", (job,)).fetchone()
            assert row == ("queued", None)
            released = c.execute("SELECT released_at IS NOT NULL FROM pgq._workers WHERE id = %s", (gone,))
            assert released.fetchone() == (True,), "looked up once"
            return cost

        drain(1)
        early_release = stop_holding_a_job()  # the session's first calls also load caches
        first = beat()
        drain(JOBS // BATCH - 3)
        last = beat()
        late_release = stop_holding_a_job()
        after = beat()
    # A walk of the running index would visit the heap page of each of ~3000 dead entries:
    # about 170 buffers here.
    assert last <= first + 10, (first, last)
    assert after <= first + 10, (first, after)
    assert late_release <= early_release + 10, (early_release, late_release)
