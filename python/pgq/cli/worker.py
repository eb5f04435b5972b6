"""`pgq worker MODULE:ATTR`: run a pgq.Worker defined in the user's code."""

from __future__ import annotations

import gc
import importlib
import logging
import os
import sys

import click

from ..dsn import resolve_dsn
from ..worker import EVENT_LOOPS, Worker
from . import logs, worker_metrics
from .output import handle_errors


def tune_gc() -> None:
    """Tune Python's cyclic garbage collector for a worker process, once its code is loaded.

    Each job allocates a few container objects (the job, its run, its task and coroutine)
    that live for milliseconds and are freed by their reference counts. With the defaults
    of Python 3.11-3.13, a young collection ran every 700 net allocations and promoted the
    jobs in flight, so that now and then a full collection scanned everything loaded (about
    30 ms each, a pause for every job): together about a tenth of a no-op job's CPU. Here
    the leftovers of loading are collected, what remains is frozen out of the scans, and
    young collections wait for 10,000 net allocations, by which time most jobs seen by the
    last one are gone. Unreachable cycles (a failed handler's traceback, say) wait as long.
    A collector the application turned off (gc.disable(), or a threshold of 0) is left as
    it is; a higher threshold it set is kept."""
    young, middle, old = gc.get_threshold()
    if not gc.isenabled() or young == 0:
        return
    gc.collect()
    gc.freeze()
    gc.set_threshold(max(young, 10_000), middle, old)


def load_worker(spec: str) -> Worker:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise click.BadParameter("expected MODULE:ATTR, e.g. myapp.jobs:worker", param_hint="MODULE:ATTR")
    # Like `python -m`, let the current directory's modules be found.
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise click.BadParameter(f"cannot import {module_name!r}: {exc}", param_hint="MODULE:ATTR") from exc
    obj = getattr(module, attr, None)
    if not isinstance(obj, Worker):
        raise click.BadParameter(f"{spec} is not a pgq.Worker", param_hint="MODULE:ATTR")
    return obj


@click.command("worker")
@click.argument("spec", metavar="MODULE:ATTR")
@click.option("--dsn", envvar="PGQ_DSN", default=None, help="libpq connection string (default: $PGQ_DSN).")
@click.option(
    "--listen-dsn",
    envvar="PGQ_LISTEN_DSN",
    default=None,
    help="A direct connection for LISTEN when --dsn goes through a pooler such as PgBouncer.",
)
@click.option("--concurrency", type=click.IntRange(min=1), help="Handlers running at once.")
@click.option("--batch-size", type=click.IntRange(1, 10000), help="Jobs claimed per round trip.")
@click.option(
    "--grace-period", type=click.FloatRange(min=0), help="Seconds running jobs get to finish after SIGTERM."
)
@click.option(
    "--poll-interval", type=click.FloatRange(min=0.01), help="Seconds between polls when no NOTIFY comes."
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default="info",
    show_default=True,
    help="info: what the worker does, a summary every summary_interval (10 s by default) and"
    " failed jobs; warning: failures only.",
)
@click.option(
    "--log-jobs/--no-log-jobs",
    default=False,
    show_default=True,
    help="A line for every settled job at INFO, successes too (always at debug).",
)
@click.option(
    "--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True, help="Log lines."
)
@click.option(
    "--metrics-port",
    type=click.IntRange(1, 65535),
    help="Serve the worker's Prometheus metrics on this port (pgq_worker_*).",
)
@click.option(
    "--gc-tuning/--no-gc-tuning",
    default=True,
    show_default=True,
    help="Freeze the loaded code out of the garbage collector's scans and collect less often.",
)
@click.option(
    "--event-loop",
    type=click.Choice(EVENT_LOOPS),
    default="auto",
    show_default=True,
    help="auto: uvloop when installed (cheaper per job), else asyncio's.",
)
@handle_errors
def worker_command(
    spec: str,
    dsn: str | None,
    listen_dsn: str | None,
    concurrency: int | None,
    batch_size: int | None,
    grace_period: float | None,
    poll_interval: float | None,
    log_level: str,
    log_format: str,
    log_jobs: bool,
    metrics_port: int | None,
    gc_tuning: bool,
    event_loop: str,
) -> None:
    """Run the pgq.Worker at MODULE:ATTR until SIGTERM or SIGINT (then exit 0)."""
    worker = load_worker(spec)
    if worker.dsn is None or dsn:
        worker.dsn = resolve_dsn(dsn)
    if listen_dsn:
        worker.listen_dsn = listen_dsn
    if concurrency:
        worker.concurrency = concurrency
    if batch_size:
        worker.batch_size = batch_size
    if grace_period is not None:
        worker.grace_period = grace_period
    if poll_interval is not None:
        worker.poll_interval = poll_interval
    logs.configure(log_level, log_format, log_jobs)
    if metrics_port:
        worker_metrics.serve(worker, metrics_port)
    if gc_tuning:
        tune_gc()
    worker.run(event_loop)
    logging.shutdown()
    # A sync handler still running past the grace period cannot be interrupted; its job was
    # released, so do not let its thread hold the process open.
    os._exit(0)
