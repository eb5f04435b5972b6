"""Plans made while the queue was empty, used when it fills.

A queue is often empty, and autovacuum analyzes it then: its statistics say pgq._jobs has
no rows (over as many pages as it had, when vacuum cannot truncate them). A session that
plans its statements then (an idle worker), or any session before the next ANALYZE when the
pages were kept, makes plans that read the whole table, which cost nothing on an empty one. When
a burst of jobs arrives, every claim, completion, heartbeat and read of pgq.queues would
scan and sort the burst until autovacuum analyzes the table again (a minute or more): 50 to
550 ms per call at 200k jobs, where the indexes take a few. So the functions that read
pgq._jobs run with enable_seqscan = off, and with jit = off: the cost that disables a scan
would otherwise make PostgreSQL compile these short statements (a third of a second each).
These are plan checks.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from conftest import create_database, drop_database
from support.plans import explain_nested, logged_plans, on_jobs, plan_nodes

BURST = 20_000


@pytest.fixture(params=["truncated", "pages kept"])
def emptied(request: pytest.FixtureRequest, template_db: str) -> Iterator[str]:
    """A database whose job table was drained and analyzed empty, with autovacuum off for it
    so that no ANALYZE comes between. Vacuum truncates the table's empty pages when it can
    take the lock (the planner then counts no pages at all), else keeps them (it counts no
    rows over them)."""
    name = f"pgq_empty_plans_{os.getpid()}"
    dsn = create_database(name, template=template_db)
    try:
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("ALTER TABLE pgq._jobs_default SET (autovacuum_enabled = off)")
            c.execute("SELECT pgq.enqueue_batch('bench', array_fill('{}'::jsonb, ARRAY[2000]))")
            c.execute("DELETE FROM pgq._jobs")
            truncate = request.param == "truncated"
            c.execute(f"VACUUM (ANALYZE, TRUNCATE {truncate}) pgq._jobs")
            pages, rows = c.execute(
                "SELECT relpages, reltuples FROM pg_class WHERE oid = 'pgq._jobs_default'::regclass"
            ).fetchone()
            assert (pages == 0) == truncate and rows == 0, (pages, rows)
        yield dsn
    finally:
        drop_database(name)


Call = tuple[str, str, Callable[[str, list[int]], tuple[Any, ...]]]

# Each call with the worker and the ids of the four jobs the first claim took.
CALLS: list[Call] = [
    ("claim", "SELECT id FROM pgq.claim(%s, ARRAY['bench'], 4)", lambda w, ids: (w,)),
    ("keyed claim", "SELECT id FROM pgq.claim(%s, ARRAY['keyed'], 2)", lambda w, ids: (w,)),
    ("complete", "SELECT pgq.complete(%s, %s::bigint[])", lambda w, ids: (w, [ids[0]])),
    ("fail", "SELECT pgq.fail(%s, %s, 'boom')", lambda w, ids: (w, ids[1])),
    ("snooze", "SELECT pgq.snooze(%s, %s, interval '1 hour')", lambda w, ids: (w, ids[2])),
    ("watch", "SELECT pgq.watch(%s)", lambda w, ids: (ids[3],)),
    ("heartbeat", "SELECT pgq.heartbeat(%s, %s::bigint[])", lambda w, ids: (w, [ids[3]])),
    ("cancel", "SELECT pgq.cancel(%s::bigint[])", lambda w, ids: ([ids[3]],)),
    ("retry", "SELECT pgq.retry(%s::bigint[])", lambda w, ids: ([ids[1]],)),
    ("job", "SELECT pgq.job(%s)", lambda w, ids: (ids[1],)),
    ("job_status", "SELECT pgq.job_status(%s)", lambda w, ids: (ids[1],)),
    ("enqueue with a dedupe key", "SELECT pgq.enqueue('other', dedupe_key => 'k')", lambda w, ids: ()),
    (
        "enqueue with a dependency",
        "SELECT pgq.enqueue('other', depends_on => %s)",
        lambda w, ids: ([ids[2]],),
    ),
    ("release", "SELECT pgq.release(%s, '{}')", lambda w, ids: (w,)),
    ("sweep", "SELECT pgq.sweep()", lambda w, ids: ()),
    ("reap", "SELECT pgq.reap()", lambda w, ids: ()),
    ("queues", "SELECT * FROM pgq.queues", lambda w, ids: ()),
]


def run_calls(c: psycopg.Connection, worker: str, notices: list[str] | None = None) -> dict[str, list[str]]:
    """Every call once, on four jobs the claim takes; with `notices` (auto_explain on), the
    statements of each call that read pgq._jobs with a Seq Scan or were compiled by JIT."""
    ids: list[int] = []
    found: dict[str, list[str]] = {}
    for name, statement, args in CALLS:
        if notices is not None:
            notices.clear()
        rows = c.execute(statement, args(worker, ids)).fetchall()
        if name == "claim":
            ids = [r[0] for r in rows]
            assert len(ids) == 4, ids
        for doc in logged_plans(notices or []):
            text = " ".join(doc["Query Text"].split())[:80]
            if "JIT" in doc:
                found.setdefault(name, []).append(f"JIT: {text}")
            if any(on_jobs(n) and n["Node Type"] == "Seq Scan" for n in plan_nodes(doc["Plan"])):
                found.setdefault(name, []).append(text)
    return found


def enqueue_for_a_round(producer: psycopg.Connection) -> None:
    producer.execute("SELECT pgq.enqueue_batch('bench', array_fill('{}'::jsonb, ARRAY[4]))")
    producer.execute(
        "SELECT pgq.enqueue_batch('keyed', array_fill('{}'::jsonb, ARRAY[2]),"
        " concurrency_keys => ARRAY['a', 'b'])"
    )


@pytest.mark.parametrize("planned", ["while empty", "after the burst"])
def test_calls_walk_the_indexes_after_the_queue_was_analyzed_empty(emptied: str, planned: str) -> None:
    with (
        psycopg.connect(emptied, autocommit=True) as producer,
        psycopg.connect(emptied, autocommit=True) as c,
    ):
        producer.execute("SELECT pgq.configure('keyed', key_concurrency => 1)")
        worker = c.execute("SELECT pgq.register_worker('empty', ARRAY['bench', 'keyed'])").fetchone()[0]
        if planned == "while empty":
            # The statistics still say the table is empty: these few jobs change nothing
            # there, and the calls plan every statement they run on them.
            for _ in range(7):  # past the five custom plans, to the cached generic ones
                enqueue_for_a_round(producer)
                run_calls(c, worker)
        enqueue_for_a_round(producer)
        producer.execute(
            "SELECT count(*) FROM unnest(ARRAY['bench', 'other']) AS e,"
            " pgq.enqueue_batch(e, array_fill('{}'::jsonb, ARRAY[%s]))",
            (BURST // 2,),
        )
        found = run_calls(c, worker, explain_nested(c))
        assert not found, "\n".join(f"{name}: {text}" for name, texts in found.items() for text in texts)
        # The statistics still say the table is empty: nothing analyzed it meanwhile.
        assert (
            c.execute("SELECT reltuples FROM pg_class WHERE oid = 'pgq._jobs_default'::regclass").fetchone()[
                0
            ]
            == 0
        )
