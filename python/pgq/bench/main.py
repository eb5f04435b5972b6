"""`pgq bench` (and `make bench`): pgq measured against the raw SQL limit and PgQueuer.

Every scenario runs in a fresh database (`bench_<name>`, dropped afterwards), all in one
invocation so the figures are comparable. Prints one aligned table and writes the
results as JSON (default .bench/results.json).

Scenarios: raw limit (pgq's claim -> complete cycle as plain SQL under pgbench); drain
(N pre-enqueued no-op jobs, W `pgq worker` processes); enqueue (one job per transaction
on 1 and 8 connections, and enqueue_batch of 1000, through pgbench and pgq.Client);
latency (commit -> handler start with an idle worker); backlog (10k, 100k, 1M queued);
held xmin (a drain while a REPEATABLE READ snapshot stays open); queues (reads of pgq.queues
with 1M jobs queued over 1 and 100 entrypoints); monitor (the dashboard's pages, searches
and /metrics with 5M queued, pgq.web read by its own code); and PgQueuer's drain, enqueue and latency
side by side.

The options and the report are this module's; the order the scenarios run in and the
gathering of their results are rounds.py's, the scenarios themselves scenarios/'s. It must
never measure anything itself.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from ..dsn import resolve_dsn
from .db import Server
from .report import render, targets
from .rounds import Rounds

SCENARIOS = [
    "raw",
    "sql",
    "spread",
    "drain",
    "defaults",
    "keyed",
    "bystander",
    "enqueue",
    "latency",
    "backlog",
    "xmin",
    "queues",
    "monitor",
    "peer",
]


def _sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(s.replace("_", "")) for s in text.split(",") if s.strip()})
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a comma-separated list of numbers") from None
    if not sizes or sizes[0] < 1:
        raise click.BadParameter("backlog sizes must be positive")
    return sizes


@click.command("bench")
@click.option("--dsn", envvar="PGQ_DSN", default=None, help="Maintenance database of the server under test.")
@click.option(
    "--jobs", type=click.IntRange(min=100), help="N: jobs per drain  [default: 100000; 10000 with --quick]"
)
@click.option(
    "--workers", type=click.IntRange(min=1), default=2, show_default=True, help="W: worker processes."
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    help="Handlers per worker process  [default: twice the batch size, at least 200]",
)
@click.option(
    "--batch-size",
    type=click.IntRange(1, 10000),
    help="Jobs per claim  [default: the batch size of PgQueuer's best trial (equal batch size), else 100]",
)
@click.option(
    "--seconds", type=click.IntRange(min=1), help="Length of timed runs  [default: 10; 2 with --quick]"
)
@click.option("--backlog-sizes", help="Queued jobs for the backlog scenario  [default: 10000,100000,1000000]")
@click.option(
    "--queues-size",
    type=click.IntRange(min=1),
    help="Queued jobs while pgq.queues is read  [default: 1000000; 100000 with --quick]",
)
@click.option(
    "--monitor-size",
    type=click.IntRange(min=100),
    help="Queued jobs while the dashboard is timed (monitor)  [default: 5000000; 100000 with --quick]",
)
@click.option("--latency-rate", type=click.FloatRange(min=1), default=50.0, show_default=True, help="Jobs/s.")
@click.option("--timeout", type=click.FloatRange(min=10), default=300.0, show_default=True, help="Per drain.")
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    help="Runs of each throughput measurement; the best counts  [default: 3; 1 with --quick]",
)
@click.option("--quick", is_flag=True, help="Small N, short runs, no 1M backlog, no PgQueuer.")
@click.option("--no-peer", is_flag=True, help="Skip PgQueuer.")
@click.option("--only", help=f"Comma-separated subset of: {','.join(SCENARIOS)}.")
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the results  [default: .bench/results.json; logs go beside it]",
)
@click.option("--db-prefix", default="bench_", hidden=True, help="Prefix of the throwaway databases.")
def bench_command(
    dsn: str | None,
    jobs: int | None,
    workers: int,
    concurrency: int | None,
    batch_size: int | None,
    seconds: int | None,
    backlog_sizes: str | None,
    queues_size: int | None,
    monitor_size: int | None,
    latency_rate: float,
    timeout: float,
    repeat: int | None,
    quick: bool,
    no_peer: bool,
    only: str | None,
    json_path: Path | None,
    db_prefix: str,
) -> None:
    """Benchmark pgq against the raw SQL limit and PgQueuer (takes minutes; --quick: seconds)."""
    selected = SCENARIOS if not only else [s.strip() for s in only.split(",") if s.strip()]
    unknown = set(selected) - set(SCENARIOS)
    if unknown:
        raise click.BadParameter(f"unknown scenarios {sorted(unknown)}", param_hint="--only")
    jobs = jobs or (10_000 if quick else 100_000)
    seconds = seconds or (2 if quick else 10)
    repeat = repeat or (1 if quick else 3)
    sizes = _sizes(backlog_sizes or ("10000,100000" if quick else "10000,100000,1000000"))
    queues_size = queues_size or (100_000 if quick else 1_000_000)
    monitor_size = monitor_size or (100_000 if quick else 5_000_000)
    out_dir = Path(".bench").resolve()
    json_path = (json_path or out_dir / "results.json").resolve()
    log_dir = json_path.parent / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    server = Server(resolve_dsn(dsn), out_dir, log_dir, prefix=db_prefix)

    argv = sys.argv[sys.argv.index("bench") + 1 :] if "bench" in sys.argv else []
    params = {
        "jobs": jobs,
        "workers": workers,
        "concurrency": concurrency,
        "batch_size": batch_size,
        "seconds": seconds,
        "backlog_sizes": sizes,
        "queues_size": queues_size,
        "monitor_size": monitor_size,
        "latency_rate": latency_rate,
        "repeat": repeat,
        "quick": quick,
    }
    results: dict[str, Any] = {
        "command": shlex.join(["pgq", "bench", *argv]),
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cores": os.cpu_count(), "postgres": server.settings()},
        "parameters": params,
        "scenarios": {},
    }
    began = time.monotonic()
    drain_args = {
        "workers": workers,
        "concurrency": concurrency,
        "batch_size": batch_size,
        "timeout": timeout,
    }
    peer_skip = "--quick" if quick else ("--no-peer" if no_peer else None)
    rounds = Rounds(server, selected, repeat)
    results["scenarios"] = rounds.run(
        jobs=jobs,
        seconds=seconds,
        sizes=sizes,
        queues_size=queues_size,
        monitor_size=monitor_size,
        latency_rate=latency_rate,
        drain_args=drain_args,
        peer_skip=peer_skip,
    )
    scenarios = results["scenarios"]
    # The batch size and concurrency the runs used (PgQueuer's trial may have chosen them).
    params.update(
        concurrency=drain_args["concurrency"],
        batch_size=drain_args["batch_size"],
        batch_from=rounds.batch_from,
    )
    results["wall_s"] = round(time.monotonic() - began, 1)
    results["targets"] = targets(scenarios)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(results, indent=2, default=str) + "\n")
    click.echo(render(results))
    click.echo(f"\nresults: {json_path}")
    if any("error" in s for s in scenarios.values()):
        sys.exit(1)
