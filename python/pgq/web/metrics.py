"""/metrics: Prometheus text of the queue as the database sees it, collected on each scrape
from pgq's SQL (pgq.queues, pgq.outcome_totals, pgq.stats, pgq.sweeps): the numbers of
`pgq status`, the dashboard and psql.

Cardinality is bounded whatever the number of entrypoints (their names are chosen by
whoever enqueues, so there may be tens of thousands):
- pgq_queue_* series sum every entrypoint (jobs by state, finished jobs by outcome, the
  oldest due job of any entrypoint): alert on these;
- per-entrypoint series (label entrypoint) exist for at most 2 x TOP_ENTRYPOINTS
  entrypoints: the TOP_ENTRYPOINTS with the most live jobs, and the TOP_ENTRYPOINTS with the
  most finished jobs since the install (a stable ranking: the series do not come and go
  with each scrape); pgq_entrypoints says how many there are in all.

pgq_up is 1 when the database answered (SELECT 1), whatever else failed; a part that failed
(a role without the privilege, a timeout) shows as pgq_scrape_error{part} 1 and its series
are missing. Counters (*_total) are kept in the database (pgq.outcome_totals), so every
scrape and every dashboard process reads the same, never lower figure. Counts above
pgq.queues_exact_limit are estimates: pgq_jobs_approximate and pgq_queue_jobs_approximate
say so. No sample is NaN: a figure that does not exist (no job finished in the window, a
sweep that never ran) has no sample. docs/monitoring.md lists the series and alert rules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

if TYPE_CHECKING:
    from .queries import Queries

STATES = ("queued", "scheduled", "waiting", "running", "dead")
OUTCOMES = ("succeeded", "failed", "dead", "canceled", "snoozed", "discarded")
# Per-entrypoint series for at most twice this many entrypoints (see above).
TOP_ENTRYPOINTS = 50


def _seconds(value: timedelta | None) -> float:
    return 0.0 if value is None else value.total_seconds()


class QueueCollector:
    def __init__(self, db: Queries) -> None:
        self.db = db

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("pgq_up", "1 when the database answered this scrape (SELECT 1), else 0.")
        try:
            self.db.ping()
        except Exception:
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        errors = GaugeMetricFamily(
            "pgq_scrape_error",
            "1 when a part of this scrape failed (its series are missing): queues, outcomes, stats, sweeps.",
            labels=["part"],
        )
        queues = self._part("queues", self.db.queues, errors)
        totals = self._part("outcomes", self.db.outcome_totals, errors)
        stats = self._part("stats", self.db.stats, errors)
        top = _top(queues[0] if queues else [], totals or [])
        if queues is not None:
            yield from _queue_series(queues[0], queues[1], top)
        if totals is not None:
            yield from _outcome_series(totals, top)
        if stats is not None:
            yield from _stats_series(stats, totals or [], top)
        sweeps = self._part("sweeps", self.db.sweeps, errors)
        if sweeps:
            yield from _sweep_series(sweeps)
        yield errors

    def _part(self, name: str, read: Callable[[], Any], errors: GaugeMetricFamily) -> Any:
        try:
            value = read()
        except Exception:
            errors.add_metric([name], 1)
            return None
        errors.add_metric([name], 0)
        return value


def _top(queues: list[dict[str, Any]], totals: list[dict[str, Any]]) -> set[str]:
    """The entrypoints that get series of their own: the busiest by live jobs, and by jobs
    finished since the install (names break ties, so the choice is stable)."""
    live = sorted(queues, key=lambda r: (-sum(int(r[s]) for s in STATES), r["entrypoint"]))
    finished: dict[str, int] = {}
    for r in totals:
        finished[r["entrypoint"]] = finished.get(r["entrypoint"], 0) + int(r["jobs"])
    busiest = sorted(finished, key=lambda e: (-finished[e], e))
    return {r["entrypoint"] for r in live[:TOP_ENTRYPOINTS]} | set(busiest[:TOP_ENTRYPOINTS])


def _queue_series(rows: list[dict[str, Any]], limit: int, top: set[str]) -> Iterator[Metric]:
    count = GaugeMetricFamily("pgq_entrypoints", "Entrypoints with live jobs or settings (pgq.queues rows).")
    count.add_metric([], len(rows))
    total = GaugeMetricFamily(
        "pgq_queue_jobs",
        f"Live jobs by state, all entrypoints (pgq.queues; exact up to {limit} per entrypoint and state).",
        labels=["state"],
    )
    for state in STATES:
        total.add_metric([state], sum(int(r[state]) for r in rows))
    total_approx = GaugeMetricFamily(
        "pgq_queue_jobs_approximate",
        "1 when pgq_queue_jobs includes an estimate (an entrypoint over the limit).",
    )
    total_approx.add_metric([], 1.0 if any(r["approximate"] for r in rows) else 0.0)
    oldest_all = GaugeMetricFamily(
        "pgq_queue_oldest_queued_age_seconds",
        "How long the oldest due job of any entrypoint has waited (0: none).",
    )
    oldest_all.add_metric([], max((_seconds(r["oldest_queued_age"]) for r in rows), default=0.0))
    paused_all = GaugeMetricFamily("pgq_queue_paused_entrypoints", "How many entrypoints are paused.")
    paused_all.add_metric([], sum(1 for r in rows if r["paused"]))
    jobs = GaugeMetricFamily(
        "pgq_jobs",
        "Live jobs by state of the busiest entrypoints (pgq.queues; see pgq_jobs_approximate).",
        labels=["entrypoint", "state"],
    )
    approx = GaugeMetricFamily(
        "pgq_jobs_approximate",
        f"1 when a count of pgq_jobs for the entrypoint is an estimate (above {limit}), else 0.",
        labels=["entrypoint"],
    )
    oldest = GaugeMetricFamily(
        "pgq_oldest_queued_age_seconds",
        "How long the oldest due job has waited (0: none).",
        labels=["entrypoint"],
    )
    paused = GaugeMetricFamily("pgq_paused", "1 when the entrypoint is paused.", labels=["entrypoint"])
    for r in rows:
        ep = r["entrypoint"]
        if ep not in top:
            continue
        for state in STATES:
            jobs.add_metric([ep, state], int(r[state]))
        approx.add_metric([ep], 1.0 if r["approximate"] else 0.0)
        oldest.add_metric([ep], _seconds(r["oldest_queued_age"]))
        paused.add_metric([ep], 1.0 if r["paused"] else 0.0)
    yield from (count, total, total_approx, oldest_all, paused_all, jobs, approx, oldest, paused)


def _outcome_series(rows: list[dict[str, Any]], top: set[str]) -> Iterator[Metric]:
    total = CounterMetricFamily(
        "pgq_queue_finished_jobs",
        "Finished jobs by outcome since the install, all entrypoints (pgq.outcome_totals): succeeded,"
        " failed (attempt failed, retried), dead (attempt failed, job dead), canceled, snoozed, discarded.",
        labels=["outcome"],
    )
    sums = dict.fromkeys(OUTCOMES, 0)
    for r in rows:
        sums[r["outcome"]] = sums.get(r["outcome"], 0) + int(r["jobs"])
    for outcome, n in sums.items():
        total.add_metric([outcome], n)
    per = CounterMetricFamily(
        "pgq_finished_jobs",
        "Finished jobs by outcome since the install, of the busiest entrypoints (pgq.outcome_totals).",
        labels=["entrypoint", "outcome"],
    )
    for r in rows:
        if r["entrypoint"] in top:
            per.add_metric([r["entrypoint"], r["outcome"]], int(r["jobs"]))
    yield from (total, per)


def _stats_series(
    stats: list[dict[str, Any]], totals: list[dict[str, Any]], top: set[str]
) -> Iterator[Metric]:
    """Wait and run time of succeeded jobs as summaries: _count and _sum cumulative (from
    pgq.outcome_totals), quantiles over the last 5 minutes (from the outcome log; none when
    no job succeeded in that window)."""
    succeeded = {r["entrypoint"]: r for r in totals if r["outcome"] == "succeeded"}
    wait = Metric(
        "pgq_wait_seconds",
        "Wait (enqueued to started) of succeeded jobs: quantiles over the last 5 minutes,"
        " _count and _sum since the install.",
        "summary",
    )
    run = Metric(
        "pgq_run_seconds",
        "Run time (started to finished) of succeeded jobs: quantiles over the last 5 minutes,"
        " _count and _sum since the install.",
        "summary",
    )
    window = {r["entrypoint"]: r for r in stats}
    for ep in sorted(top & (succeeded.keys() | window.keys())):
        labels = {"entrypoint": ep}
        for metric, column in ((wait, "wait"), (run, "run")):
            w = window.get(ep)
            for q in ("50", "95", "99"):
                value = w.get(f"{column}_p{q}") if w else None
                if value is not None:
                    metric.add_sample(metric.name, {**labels, "quantile": f"0.{q}"}, value.total_seconds())
            t = succeeded.get(ep)
            metric.add_sample(metric.name + "_count", labels, int(t["jobs"]) if t else 0)
            metric.add_sample(metric.name + "_sum", labels, float(t[f"{column}_seconds"]) if t else 0.0)
    yield from (wait, run)


def _sweep_series(sweeps: list[dict[str, Any]]) -> Iterator[Metric]:
    """pgq.sweeps: a stopped pg_cron shows as a last run that no longer moves."""
    last = GaugeMetricFamily(
        "pgq_sweep_last_run_timestamp_seconds",
        "When the sweep last ran (Unix time; no sample: never).",
        labels=["sweep"],
    )
    late = GaugeMetricFamily(
        "pgq_sweep_late_seconds", "How far past its interval the sweep is (0: on time).", labels=["sweep"]
    )
    for w in sweeps:
        if w["last_run"] is not None:
            last.add_metric([w["sweep"]], w["last_run"].timestamp())
        late.add_metric([w["sweep"]], _seconds(w["late"]))
    yield from (last, late)


def render(db: Queries) -> tuple[bytes, str]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector(db))  # type: ignore[arg-type]
    return generate_latest(registry), CONTENT_TYPE_LATEST
