"""The claim's query plan on a large backlog: a regression guard, not a benchmark.

1,000,000 queued jobs across 100 entrypoints are loaded with one INSERT ... SELECT (as
superuser, straight into pgq._jobs), then analysed. The claim must walk _jobs_claim_idx in
claim order and stop after batch_size rows: no Sort, no Seq Scan. A queue that silently
loses that index gets orders of magnitude slower only once the backlog is large, which is
exactly when it hurts.

This module has its own database (cloned from the template): the shared per-module
database is truncated after every test, and the backlog is loaded once.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from conftest import create_database, drop_database
from support.plans import explain_nested, logged_plans, on_jobs, plan_nodes

ROWS = 1_000_000
ENTRYPOINTS = 100

# The inner query of pgq.claim_v3 (sql/functions/claim_v3.sql), for one entrypoint, from its claim
# mark ($2, $3, $4; executed here from the front, as without a mark).
CLAIM_QUERY = """
    SELECT id FROM pgq._jobs
    WHERE entrypoint = $1 AND status = 'queued' AND run_at <= now()
      AND ROW(-priority::bigint, run_at, id) >= ROW($2::bigint, $3::timestamptz, $4::bigint)
    ORDER BY -priority::bigint, run_at, id
    LIMIT 10
    FOR UPDATE SKIP LOCKED
"""
FROM_THE_FRONT = "'ep_42', -2147483648, '-infinity', 0"


@pytest.fixture(scope="module")
def backlog(template_db: str) -> Iterator[str]:
    """A database with ROWS due jobs spread evenly over ENTRYPOINTS entrypoints."""
    name = f"pgq_claim_plan_{os.getpid()}"
    dsn = create_database(name, template=template_db)
    try:
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute(
                "INSERT INTO pgq._jobs (entrypoint, priority, run_at, payload)"
                " SELECT 'ep_' || (g %% %(eps)s), g %% 3,"
                "        now() - interval '1 hour' + g * interval '1 millisecond',"
                "        jsonb_build_object('n', g)"
                " FROM generate_series(1, %(rows)s) AS g",
                {"eps": ENTRYPOINTS, "rows": ROWS},
            )
            c.execute("ANALYZE pgq._jobs")
            assert c.execute("SELECT count(*) FROM pgq._jobs").fetchone()[0] == ROWS
        yield dsn
    finally:
        drop_database(name)


def assert_walks_the_claim_index(plan: dict[str, Any]) -> None:
    nodes = list(plan_nodes(plan))
    kinds = [n["Node Type"] for n in nodes]
    assert any(
        n.get("Index Name") == "_jobs_default_claim_idx" and n["Node Type"] == "Index Scan" for n in nodes
    ), kinds
    assert not [k for k in kinds if "Sort" in k], f"the claim sorts: {kinds}"
    assert "Seq Scan" not in kinds, kinds
    assert "Bitmap Heap Scan" not in kinds, f"a bitmap scan cannot return rows in order: {kinds}"
    # The rows come out of the index already in order: Limit over LockRows over the scan.
    assert kinds[:3] == ["Limit", "LockRows", "Index Scan"], kinds


@pytest.mark.parametrize("generic", [False, True], ids=["custom_plan", "generic_plan"])
def test_claim_query_walks_the_claim_index(backlog: str, generic: bool) -> None:
    with psycopg.connect(backlog, autocommit=True) as c:
        c.execute(f"PREPARE claim_q(text, bigint, timestamptz, bigint) AS {CLAIM_QUERY}")
        mode = "force_generic_plan" if generic else "force_custom_plan"
        c.execute(f"SET plan_cache_mode = {mode}")
        (doc,) = c.execute(f"EXPLAIN (FORMAT JSON) EXECUTE claim_q({FROM_THE_FRONT})").fetchone()
        doc = json.loads(doc) if isinstance(doc, str) else doc
        assert_walks_the_claim_index(doc[0]["Plan"])
        # And the query does return rows in claim order, from the right entrypoint.
        ids = [r[0] for r in c.execute(f"EXECUTE claim_q({FROM_THE_FRONT})")]
        assert len(ids) == 10
        expected = c.execute(
            "SELECT id FROM pgq._jobs WHERE entrypoint = 'ep_42' AND status = 'queued'"
            " ORDER BY priority DESC, run_at, id LIMIT 10"
        ).fetchall()
        assert ids == [r[0] for r in expected]


def test_claim_function_uses_the_index_after_plan_caching(backlog: str) -> None:
    """The plans pgq.claim actually runs (auto_explain on its nested statements), including
    the generic plan PL/pgSQL switches to after a few calls."""
    with psycopg.connect(backlog, autocommit=True) as c:
        worker = c.execute("SELECT pgq.register_worker('plan', ARRAY['ep_1', 'ep_2', 'ep_3'])").fetchone()[0]
        notices = explain_nested(c)
        for _ in range(8):
            notices.clear()
            rows = c.execute(
                "SELECT id FROM pgq.claim(%s, ARRAY['ep_1', 'ep_2', 'ep_3'], 20)", (worker,)
            ).fetchall()
            assert len(rows) == 20
        c.execute("RESET client_min_messages")

    plans = [doc["Plan"] for doc in logged_plans(notices) if "CROSS JOIN LATERAL" in doc["Query Text"]]
    assert len(plans) == 1, "the claim statement's plan was not captured"
    nodes = list(plan_nodes(plans[0]))
    jobs_scans = [n for n in nodes if on_jobs(n)]
    assert jobs_scans, nodes
    assert all(n["Node Type"] != "Seq Scan" for n in jobs_scans), [
        (n["Node Type"], n.get("Index Name")) for n in jobs_scans
    ]
    assert any(n.get("Index Name") == "_jobs_default_claim_idx" for n in jobs_scans)
    locks = [n for n in nodes if n["Node Type"] == "LockRows"]
    assert locks and all(
        any(c.get("Index Name") == "_jobs_default_claim_idx" for c in plan_nodes(n)) for n in locks
    ), "the rows are not locked straight off the claim index"
    # The UPDATE takes the locked rows by their ctid: no second descent of an index per job.
    assert [n["Node Type"] for n in jobs_scans if "Scan" in n["Node Type"]] == ["Index Scan", "Tid Scan"], [
        (n["Node Type"], n.get("Index Name")) for n in jobs_scans
    ]


def test_claim_of_100_on_the_backlog_is_fast(backlog: str) -> None:
    with psycopg.connect(backlog, autocommit=True) as c:
        eps = [f"ep_{i}" for i in range(ENTRYPOINTS)]
        worker = c.execute("SELECT pgq.register_worker('timing', %s::text[])", (eps,)).fetchone()[0]
        expected = {
            r[0]
            for r in c.execute(
                "SELECT id FROM pgq._jobs WHERE entrypoint = 'ep_7' AND status = 'queued'"
                " ORDER BY priority DESC, run_at, id LIMIT 100"
            )
        }

        t0 = time.perf_counter()
        one = c.execute("SELECT id FROM pgq.claim(%s::uuid, ARRAY['ep_7'], 100)", (worker,)).fetchall()
        single = time.perf_counter() - t0
        assert {r[0] for r in one} == expected
        assert single < 1.0, f"claiming 100 of one entrypoint took {single:.3f} s"

        t0 = time.perf_counter()
        many = c.execute(
            "SELECT id, priority FROM pgq.claim(%s::uuid, %s::text[], 100)", (worker, eps)
        ).fetchall()
        across = time.perf_counter() - t0
        assert len(many) == 100
        assert {r[1] for r in many} == {2}, "highest priority first"
        assert across < 2.0, f"claiming 100 across {ENTRYPOINTS} entrypoints took {across:.3f} s"

        # The sweep runs on every heartbeat: it must not scan the backlog either.
        t0 = time.perf_counter()
        c.execute("SELECT * FROM pgq.heartbeat(%s::uuid)", (worker,)).fetchall()
        beat = time.perf_counter() - t0
        assert beat < 1.0, f"a heartbeat (with its sweep) took {beat:.3f} s"

        done = c.execute(
            "SELECT count(*) FROM pgq.complete(%s::uuid, %s::bigint[])",
            (worker, [r[0] for r in one + many]),
        ).fetchone()[0]
        assert done == 200


def test_backlog_is_what_the_plan_tests_assume(backlog: str) -> None:
    with psycopg.connect(backlog) as c:
        per_ep = c.execute(
            "SELECT min(n), max(n), count(*) FROM"
            " (SELECT count(*) AS n FROM pgq._jobs WHERE status = 'queued' GROUP BY entrypoint) s"
        ).fetchone()
        assert per_ep[2] == ENTRYPOINTS
        assert per_ep[0] > ROWS // ENTRYPOINTS - 1000
        stats = c.execute(
            "SELECT reltuples FROM pg_class WHERE oid = 'pgq._jobs_default'::regclass"
        ).fetchone()[0]
        assert stats > ROWS * 0.9, "the table was not analysed"


def test_queues_view_reads_only_the_indexes(backlog: str) -> None:
    """pgq.queues on the backlog: every statement it runs (auto_explain on the nested
    statements of pgq._queue_counts, cached generic plans included) reads _jobs through its
    partial indexes, never a Seq Scan; each entrypoint's 10,000 jobs are over the exact
    limit (set to 100 here), so the counts are estimates from
    the fresh statistics, close to the truth; the oldest due job is still exact."""
    with psycopg.connect(backlog, autocommit=True) as c:
        notices = explain_nested(c)
        # Exact counts reach 100,000 per entrypoint by default: a limit of 100 puts each
        # entrypoint's 10,000 jobs over it, so that the estimates are what is read here.
        c.execute("SET pgq.queues_exact_limit = 100")
        view = "SELECT entrypoint, queued, oldest_queued_age, approximate FROM pgq.queues"
        for _ in range(2):
            c.execute(view).fetchall()
        with c.transaction():  # the third read shares now() with the exact ages below
            rows = c.execute(view).fetchall()
            c.execute("SET auto_explain.log_min_duration = -1")  # the checks below scan, on purpose
            oldest = dict(
                c.execute(
                    "SELECT entrypoint, now() - min(run_at) FROM pgq._jobs WHERE status = 'queued' GROUP BY 1"
                ).fetchall()
            )
        sample = 300 * int(c.execute("SHOW default_statistics_target").fetchone()[0])
        queued = c.execute("SELECT count(*) FROM pgq._jobs WHERE status = 'queued'").fetchone()[0]
        vals, freqs = c.execute(
            "SELECT most_common_vals::text::text[], most_common_freqs FROM pg_stats"
            " WHERE schemaname = 'pgq' AND tablename = '_jobs_default' AND attname = 'entrypoint'"
        ).fetchone()
    plans = [doc["Plan"] for doc in logged_plans(notices)]
    scans = [n for p in plans for n in plan_nodes(p) if on_jobs(n)]
    assert scans and all(n["Node Type"] != "Seq Scan" for n in scans), [
        (n["Node Type"], n.get("Index Name")) for n in scans
    ]
    assert len(rows) == ENTRYPOINTS and all(r[3] for r in rows)
    # An entrypoint's share comes from ANALYZE's random sample of 300 x the statistics
    # target rows (30,000: about 300 per entrypoint), so each estimate is off by a relative
    # standard error of sqrt((1 - p) / (p * sample)), 5.7% here; of 100 entrypoints one is
    # beyond 3 of those now and then, so each may be off by 6 (34%). Their sum is the claim
    # index's size from the statistics: within 1% of the truth.
    share = 1 / ENTRYPOINTS
    error = 6 * math.sqrt((1 - share) / (share * sample))
    per_ep = ROWS // ENTRYPOINTS
    assert all(per_ep * (1 - error) < r[1] < per_ep * (1 + error) for r in rows), (error, rows)
    assert abs(sum(r[1] for r in rows) - queued) < queued * 0.01, (queued, rows)
    # Shared out by each entrypoint's frequency in those statistics (every entrypoint counted
    # the same 101 per priority exactly), to within the rounding of each share.
    weight = dict(zip(vals, freqs, strict=True))
    total, weights = sum(r[1] for r in rows), sum(weight[r[0]] for r in rows)
    assert all(abs(r[1] - total * weight[r[0]] / weights) <= 2 for r in rows), (weight, rows)
    # The same now(): the view's oldest age is exact.
    assert all(r[2] == oldest[r[0]] for r in rows), (rows, oldest)
