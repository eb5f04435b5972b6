"""`pgq worker --metrics-port N`: the worker's own Prometheus metrics, on its own HTTP port.

The database-wide view (queue depths, latencies from the outcome log) is the dashboard's
/metrics; these are what only the process knows: how its handlers fared and how long they
took, and how many of its slots are busy.
"""

from __future__ import annotations

from ..job import Job
from ..worker import Worker

HANDLER_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)


def serve(worker: Worker, port: int, host: str = "0.0.0.0") -> None:
    """Start the exporter thread and hook the worker's outcomes into it."""
    try:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
    except ImportError:
        raise RuntimeError("--metrics-port needs prometheus_client: pip install 'pgq-sql[metrics]'") from None
    registry = CollectorRegistry()
    jobs = Counter(
        "pgq_worker_jobs",
        "Jobs this worker settled, by outcome (succeeded, failed, canceled).",
        ["entrypoint", "outcome"],
        registry=registry,
    )
    seconds = Histogram(
        "pgq_worker_handler_seconds",
        "How long handlers ran, until they returned, raised or timed out.",
        ["entrypoint"],
        buckets=HANDLER_BUCKETS,
        registry=registry,
    )
    busy = Gauge("pgq_worker_busy_slots", "Handlers holding a slot now.", registry=registry)
    busy.set_function(lambda: worker.busy)
    Gauge("pgq_worker_slots", "The worker's concurrency.", registry=registry).set_function(
        lambda: worker.concurrency
    )

    def observe(job: Job, outcome: str, duration: float) -> None:
        jobs.labels(job.entrypoint, outcome).inc()
        seconds.labels(job.entrypoint).observe(duration)

    try:
        start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise RuntimeError(f"--metrics-port {port}: {exc.strerror or exc}") from exc
    worker.observers.append(observe)
