"""`pgq bench` scenarios for pgq itself: raw limit, drain, enqueue, latency, backlog, held xmin.

One module per family: cycle (the SQL alone under pgbench), drains (real workers: drain,
defaults, keyed, held xmin, backlog, bystander), enqueue, latency, queues (pgq.queues at
scale); common holds the fills and probes they share. Each scenario works in a throwaway
database of its own and must never touch another.
"""

from __future__ import annotations

from .common import PAYLOAD, PGQ_PROBES, enqueue_jobs, fill_in_chunks, worker_argv
from .cycle import raw_limit, sql_cycle
from .drains import Bystander, backlog_fill, bystander, drain
from .enqueue import ENQUEUE_CASES, client_enqueue, enqueue_case
from .latency import latency, latency_summary
from .queues import queues_read

__all__ = [
    "ENQUEUE_CASES",
    "PAYLOAD",
    "PGQ_PROBES",
    "Bystander",
    "backlog_fill",
    "bystander",
    "client_enqueue",
    "drain",
    "enqueue_case",
    "enqueue_jobs",
    "fill_in_chunks",
    "latency",
    "latency_summary",
    "queues_read",
    "raw_limit",
    "sql_cycle",
    "worker_argv",
]
