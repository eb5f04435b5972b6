"""/metrics: Prometheus text of the queue as the database sees it (series pgq_*, label
entrypoint), collected on each scrape from the same queries as the overview."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

if TYPE_CHECKING:
    from .queries import Queries

STATES = ("queued", "scheduled", "waiting", "running", "dead")


def _seconds(value: timedelta | None) -> float:
    return float("nan") if value is None else value.total_seconds()


class QueueCollector:
    def __init__(self, db: Queries) -> None:
        self.db = db

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("pgq_up", "1 when the database answered this scrape.")
        try:
            queues = self.db.overview()
        except Exception:
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        jobs = GaugeMetricFamily(
            "pgq_jobs",
            "Live jobs by state (queued and scheduled counts above 10000 are planner estimates).",
            labels=["entrypoint", "state"],
        )
        oldest = GaugeMetricFamily(
            "pgq_oldest_queued_age_seconds", "How long the oldest due job has waited.", labels=["entrypoint"]
        )
        paused = GaugeMetricFamily("pgq_paused", "1 when the entrypoint is paused.", labels=["entrypoint"])
        rate = GaugeMetricFamily(
            "pgq_jobs_per_second", "Jobs succeeded per second over the last 5 minutes.", labels=["entrypoint"]
        )
        outcomes = GaugeMetricFamily(
            "pgq_outcomes_5m",
            "Outcomes over the last 5 minutes: succeeded, failed (attempts), dead, canceled.",
            labels=["entrypoint", "outcome"],
        )
        wait = GaugeMetricFamily(
            "pgq_wait_seconds",
            "Wait (enqueued to started) of jobs succeeded in the last 5 minutes, by quantile.",
            labels=["entrypoint", "quantile"],
        )
        run = GaugeMetricFamily(
            "pgq_run_seconds",
            "Run time (started to finished) of jobs succeeded in the last 5 minutes, by quantile.",
            labels=["entrypoint", "quantile"],
        )
        for q in queues:
            ep = q.entrypoint
            values = {
                "queued": q.queued.value,
                "scheduled": q.scheduled.value,
                "waiting": q.waiting,
                "running": q.running,
                "dead": q.dead,
            }
            for state in STATES:
                jobs.add_metric([ep, state], values[state])
            oldest.add_metric([ep], _seconds(q.oldest_queued_age) if q.oldest_queued_age else 0.0)
            paused.add_metric([ep], 1.0 if q.paused else 0.0)
            rate.add_metric([ep], q.per_second)
            for name, n in (
                ("succeeded", q.succeeded),
                ("failed", q.failed),
                ("dead", q.dead_5m),
                ("canceled", q.canceled),
            ):
                outcomes.add_metric([ep, name], n)
            for family, p50, p99 in ((wait, q.wait_p50, q.wait_p99), (run, q.run_p50, q.run_p99)):
                family.add_metric([ep, "0.5"], _seconds(p50))
                family.add_metric([ep, "0.99"], _seconds(p99))
        yield from (jobs, oldest, paused, rate, outcomes, wait, run)
        yield from self._sweeps()

    def _sweeps(self) -> Iterator[Metric]:
        """pgq.sweeps: a stopped pg_cron shows as a last run that no longer moves."""
        sweeps = self.db.sweeps()
        if not sweeps:
            return
        last = GaugeMetricFamily(
            "pgq_sweep_last_run_timestamp_seconds",
            "When the sweep last ran (Unix time; NaN: never).",
            labels=["sweep"],
        )
        late = GaugeMetricFamily(
            "pgq_sweep_late_seconds", "How far past its interval the sweep is (0: on time).", labels=["sweep"]
        )
        for w in sweeps:
            last.add_metric([w["sweep"]], w["last_run"].timestamp() if w["last_run"] else float("nan"))
            late.add_metric([w["sweep"]], _seconds(w["late"]) if w["late"] else 0.0)
        yield from (last, late)


def render(db: Queries) -> tuple[bytes, str]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector(db))  # type: ignore[arg-type]
    return generate_latest(registry), CONTENT_TYPE_LATEST
