"""The monitoring scenario of `pgq bench` (`--only monitor`): what the dashboard and
/metrics cost with a large backlog. `size` queued jobs (5M by default) over 100
entrypoints, filled with INSERT ... SELECT generate_series and vacuumed, then each read
timed through the dashboard's own code (pgq.web.queries, pgq.web.metrics), median of
`reads`:

- pgq.queues, the overview, /metrics;
- the jobs browser's first page and its deepest page (keyset: below the 50 oldest ids),
  and for comparison the OFFSET query of 0.2.0 for the same deepest page;
- a payload search that matches nothing: bounded (it reads at most SEARCH_SPAN jobs a
  page), and for comparison the unbounded scan of 0.2.0.

Figures only, no pass or fail: the report prints them beside the 1 s goal.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import psycopg

from ..web import metrics as web_metrics
from ..web.job_queries import PAGE_SIZE, SEARCH_SPAN
from ..web.queries import Queries, make_pool
from .db import Server, execute, note
from .scenarios.common import fill_in_chunks

ENTRYPOINTS = 100
# A payload of the size the trial used (a few hundred bytes of JSON).
PAYLOAD = '{"to": "someone@example.com", "template": "welcome", "vars": {"name": "A. Person", "n": 0}}'


def monitor_reads(server: Server, *, size: int, reads: int = 5) -> dict[str, Any]:
    with server.database("monitor") as dsn:
        fill_in_chunks(
            dsn,
            size,
            "INSERT INTO pgq._jobs (entrypoint, payload)"
            f" SELECT 'tenant_' || (i %% {ENTRYPOINTS}), '{PAYLOAD}'::jsonb"
            " FROM generate_series(%s::bigint, %s::bigint) AS i",
            f"monitor: loading {size:,} jobs",
            chunk=500_000,
        )
        execute(dsn, "VACUUM (ANALYZE) pgq._jobs")
        low = execute(dsn, "SELECT id FROM pgq._jobs ORDER BY id OFFSET %s LIMIT 1", params=(PAGE_SIZE,))[0][
            0
        ]
        pool = make_pool(dsn)
        pool.open(wait=True)
        try:
            db = Queries(pool)
            result: dict[str, Any] = {"queued": size, "entrypoints": ENTRYPOINTS, "reads": reads}
            cases: dict[str, Callable[[], Any]] = {
                "queues": db.queues,
                "overview": db.overview,
                "metrics": lambda: web_metrics.render(db),
                "jobs_first_page": lambda: db.jobs(),
                "jobs_deepest_page_keyset": lambda: db.jobs(before=str(low)),
                "jobs_deepest_page_offset_0_2_0": lambda: _old_offset_page(db, size),
                "search_no_match_bounded": lambda: db.jobs(text="no-such-needle"),
                "search_no_match_unbounded_0_2_0": lambda: _old_search(db),
            }
            for name, read in cases.items():
                note(f"monitor: {name}")
                result[name] = _time(read, reads)
            result["search_span"] = SEARCH_SPAN
        finally:
            pool.close()
    return result


def _old_offset_page(db: Queries, size: int) -> None:
    """0.2.0's jobs page: ORDER BY id DESC ... OFFSET, here its deepest page (the
    dashboard's 5 s statement timeout is lifted here, to measure it)."""
    with db.pool.connection() as conn, conn.transaction():
        conn.execute("SET LOCAL statement_timeout = 0")
        conn.execute(
            "SELECT id FROM pgq.jobs WHERE TRUE ORDER BY id DESC LIMIT %s OFFSET %s",
            (PAGE_SIZE + 1, max(size - PAGE_SIZE, 0)),
        ).fetchall()


def _old_search(db: Queries) -> None:
    """0.2.0's payload search: every live job's payload read (the dashboard's 5 s statement
    timeout is lifted here, to measure it)."""
    with db.pool.connection() as conn, conn.transaction():
        conn.execute("SET LOCAL statement_timeout = 0")
        conn.execute(
            "SELECT id FROM pgq.jobs WHERE strpos(payload::text, %s) > 0 ORDER BY id DESC LIMIT %s",
            ("no-such-needle", PAGE_SIZE + 1),
        ).fetchall()


def _time(read: Callable[[], Any], reads: int) -> dict[str, Any]:
    """Median and worst of `reads` timed calls, after one untimed call (caches, plans)."""
    try:
        read()
        times = []
        for _ in range(reads):
            started = time.perf_counter()
            read()
            times.append((time.perf_counter() - started) * 1000)
    except psycopg.Error as exc:
        return {"error": str(exc).strip()}
    return {"median_ms": round(statistics.median(times), 1), "max_ms": round(max(times), 1)}
