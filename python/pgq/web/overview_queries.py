"""The overview's queries (and an entrypoint's row of it): the counts of every entrypoint,
their last minutes' outcomes and latencies, the charts' series.

Counts come from pgq.queues, as for `pgq status` and psql, so that every view of the queue
gives one number: exact up to pgq.queues_exact_limit per entrypoint and state (100,000 by
default), above it an estimate, marked as one (the row's `approximate`). pgq.queues reads
the partial indexes only (dead jobs have theirs, _jobs_dead_idx), so no count here scans
the job table and nothing is cached.

Entrypoint names are chosen by whoever enqueues, so there may be tens of thousands: pages
that list them show ENTRYPOINT_PAGE at a time, by name, with a search (a substring). Only
reads: nothing here may change the queue.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from .pool import Reader

EXACT_LIMIT = 100_000  # pgq.queues_exact_limit's default: counts up to it are exact
ENTRYPOINT_PAGE = 100  # entrypoints per page of the overview and the settings


@dataclass
class Count:
    value: int
    estimated: bool = False
    floor: int = 0  # an estimated count is above this (what was counted exactly)


@dataclass
class Queue:
    entrypoint: str
    queued: Count = field(default_factory=lambda: Count(0))
    scheduled: Count = field(default_factory=lambda: Count(0))
    waiting: int = 0
    running: int = 0
    dead: Count = field(default_factory=lambda: Count(0))
    oldest_queued_age: timedelta | None = None
    paused: bool = False
    per_second: float = 0.0
    succeeded: int = 0
    failed: int = 0
    dead_5m: int = 0
    canceled: int = 0
    wait_p50: timedelta | None = None
    wait_p99: timedelta | None = None
    run_p50: timedelta | None = None
    run_p99: timedelta | None = None
    approximate: bool = False  # some count of the row is an estimate (pgq.queues)


@dataclass
class Overview:
    """One page of the overview: its queues, and what all entrypoints hold together."""

    queues: list[Queue]
    entrypoints: int  # how many entrypoints match (all pages)
    search: str = ""
    page: int = 1
    pages: int = 1
    totals: dict[str, int] = field(default_factory=dict)  # jobs by state, every entrypoint
    approximate: bool = False  # some total is an estimate
    oldest_queued_age: timedelta | None = None  # the oldest due job of any entrypoint


class OverviewQueries(Reader):
    # --- counts ------------------------------------------------------------------------

    def queues(self) -> tuple[list[dict[str, Any]], int]:
        """Every row of pgq.queues (counts and settings of each entrypoint with live jobs or
        settings), and the exact limit in force (counts above it may be estimates)."""
        with self.pool.connection() as conn:
            rows = conn.execute("SELECT * FROM pgq.queues").fetchall()
            setting = conn.execute("SELECT current_setting('pgq.queues_exact_limit', TRUE) AS s").fetchone()[
                "s"
            ]
        limit = int(setting) if setting and setting.strip().isdigit() else EXACT_LIMIT
        return rows, limit

    def entrypoints(self, search: str = "", after: str = "", limit: int | None = None) -> list[str]:
        """Entrypoints with live jobs or settings (pgq.queues), recent outcomes (pgq.stats),
        alive workers or schedules, by name: those containing `search`, after `after`, at
        most `limit` (None: all)."""
        # Names only: with a limit of 0, pgq.queues reads one index entry per entrypoint and
        # state instead of counting (the counts are not shown here).
        with self.pool.connection() as conn, conn.transaction():
            conn.execute("SET LOCAL pgq.queues_exact_limit = 0")
            names = {r["entrypoint"] for r in conn.execute("SELECT q.entrypoint FROM pgq.queues AS q")}
        names |= self._other_entrypoints()
        out = sorted(n for n in names if search in n and n > after)
        return out if limit is None else out[:limit]

    def _other_entrypoints(self) -> set[str]:
        """Entrypoints known without live jobs: recent outcomes, alive workers, schedules."""
        rows = self._all(
            "SELECT s.entrypoint AS ep FROM pgq.stats('1 hour') AS s"
            " UNION SELECT unnest(w.entrypoints) FROM pgq.workers AS w WHERE w.state = 'alive'"
            " UNION SELECT s.entrypoint FROM pgq.schedules AS s"
        )
        return {r["ep"] for r in rows}

    def overview(self, search: str = "", page: int = 1, size: int = ENTRYPOINT_PAGE) -> Overview:
        """A page of entrypoints (containing `search`), the busiest first (most live jobs,
        then by name), with their counts from pgq.queues and their last 5 minutes from
        pgq.stats; and the totals of all entrypoints. pgq.queues is read whole (it counts
        every entrypoint in one pass anyway), so the page is a slice in memory."""
        rows, limit = self.queues()
        by_name = {r["entrypoint"]: r for r in rows}
        stats = {r["entrypoint"]: r for r in self.stats()}
        names = [n for n in by_name.keys() | stats.keys() | self._other_entrypoints() if search in n]

        def live(name: str) -> int:
            r = by_name.get(name)
            return sum(int(r[s]) for s in ("queued", "scheduled", "waiting", "running", "dead")) if r else 0

        names.sort(key=lambda n: (-live(n), n))
        pages = max(1, -(-len(names) // size))
        page = min(max(page, 1), pages)
        result = Overview(
            queues=[
                _queue(n, by_name.get(n), stats.get(n), limit) for n in names[(page - 1) * size : page * size]
            ],
            entrypoints=len(names),
            search=search,
            page=page,
            pages=pages,
            totals={
                s: sum(int(r[s]) for r in rows) for s in ("queued", "scheduled", "waiting", "running", "dead")
            },
            approximate=any(r["approximate"] for r in rows),
            oldest_queued_age=max(
                (r["oldest_queued_age"] for r in rows if r["oldest_queued_age"]), default=None
            ),
        )
        return result

    def queue(self, name: str) -> Queue | None:
        """One entrypoint's row of the overview (its pgq.queues counts and last 5 minutes),
        None when neither knows it."""
        rows, limit = self.queues()
        row = next((r for r in rows if r["entrypoint"] == name), None)
        stats = next((r for r in self.stats() if r["entrypoint"] == name), None)
        if row is None and stats is None:
            return None
        return _queue(name, row, stats, limit)

    def stats(self, since: str = "5 minutes") -> list[dict[str, Any]]:
        """pgq.stats(since): per entrypoint, outcomes and latency percentiles of the window."""
        return self._all("SELECT * FROM pgq.stats(%s::interval)", (since,))

    def outcome_totals(self) -> list[dict[str, Any]]:
        """pgq.outcome_totals: finished jobs by entrypoint and outcome since the install
        (cumulative: never lower from one read to the next)."""
        return self._all("SELECT * FROM pgq.outcome_totals")

    def series(self, window: str) -> dict[str, list[Any]]:
        """Throughput and latency of all entrypoints: per second over the last 5 minutes
        ('5m') or per minute over the last 24 hours ('24h'), for the charts."""
        unit, span, step = ("second", "5 minutes", 1) if window == "5m" else ("minute", "24 hours", 60)
        rows = self._all(
            f"""
            WITH buckets AS (
                SELECT extract(EPOCH FROM b)::bigint AS t FROM generate_series(
                    date_trunc('{unit}', now() - interval '{span}'), date_trunc('{unit}', now()),
                    interval '1 {unit}') AS b
            ), o AS (
                SELECT extract(EPOCH FROM date_trunc('{unit}', o.finished_at))::bigint AS t,
                    count(*) FILTER (WHERE o.outcome = 'succeeded') AS ok,
                    count(*) FILTER (WHERE o.outcome = 'failed') AS failed,
                    percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (
                        ORDER BY extract(EPOCH FROM o.started_at - o.enqueued_at))
                        FILTER (WHERE o.outcome = 'succeeded') AS wait_q,
                    percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (
                        ORDER BY extract(EPOCH FROM o.finished_at - o.started_at))
                        FILTER (WHERE o.outcome = 'succeeded') AS run_q
                FROM pgq.outcomes AS o
                WHERE o.finished_at >= date_trunc('{unit}', now() - interval '{span}')
                GROUP BY 1
            )
            SELECT b.t, coalesce(o.ok, 0) AS ok, coalesce(o.failed, 0) AS failed,
                o.wait_q, o.run_q
            FROM buckets AS b LEFT JOIN o ON o.t = b.t ORDER BY b.t
            """
        )
        keys = ("t", "ok", "failed", "wait50", "wait99", "run50", "run99")
        out: dict[str, list[Any]] = {k: [] for k in keys}
        for r in rows:
            out["t"].append(r["t"])
            out["ok"].append(r["ok"] / step)
            out["failed"].append(r["failed"] / step)
            wq, rq = r["wait_q"] or [None, None], r["run_q"] or [None, None]
            out["wait50"].append(wq[0])
            out["wait99"].append(wq[1])
            out["run50"].append(rq[0])
            out["run99"].append(rq[1])
        return out


def _queue(name: str, row: dict[str, Any] | None, stats: dict[str, Any] | None, limit: int) -> Queue:
    """A Queue of the overview from its pgq.queues row and pgq.stats row (either may be
    missing). In an approximate row, a count above the exact limit is the estimate."""
    q = Queue(name)
    if row is not None:
        approx = bool(row["approximate"])

        def count(value: int) -> Count:
            return Count(int(value), estimated=approx and value > limit, floor=limit)

        q.queued, q.scheduled, q.dead = count(row["queued"]), count(row["scheduled"]), count(row["dead"])
        q.waiting, q.running = int(row["waiting"]), int(row["running"])
        q.oldest_queued_age, q.paused, q.approximate = row["oldest_queued_age"], bool(row["paused"]), approx
    if stats is not None:
        q.per_second = float(stats["per_second"] or 0)
        q.succeeded, q.failed, q.dead_5m, q.canceled = (
            stats["succeeded"],
            stats["failed"],
            stats["dead"],
            stats["canceled"],
        )
        q.wait_p50, q.wait_p99 = stats["wait_p50"], stats["wait_p99"]
        q.run_p50, q.run_p99 = stats["run_p50"], stats["run_p99"]
    return q
