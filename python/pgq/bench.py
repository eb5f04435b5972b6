"""`pgq bench` (and `make bench`): pgq measured against the raw SQL limit and PgQueuer.

Every scenario runs in a fresh database (`bench_<name>`, dropped afterwards), all in one
invocation so the figures are comparable. Prints one aligned table and writes the
results as JSON (default .bench/results.json).

Scenarios: raw limit (pgq's claim -> complete cycle as plain SQL under pgbench); drain
(N pre-enqueued no-op jobs, W `pgq worker` processes); enqueue (one job per transaction
on 1 and 8 connections, and enqueue_batch of 1000, through pgbench and pgq.Client);
latency (commit -> handler start with an idle worker); backlog (10k, 100k, 1M queued);
held xmin (a drain while a REPEATABLE READ snapshot stays open); and PgQueuer's drain,
enqueue and latency side by side.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
import traceback
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from . import bench_pgq
from .bench_db import BenchError, Server, note
from .bench_peer import Peer, PeerUnavailable
from .bench_report import render, targets
from .dsn import resolve_dsn

SCENARIOS = ["raw", "drain", "enqueue", "latency", "backlog", "xmin", "peer"]


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
@click.option("--concurrency", type=click.IntRange(min=1), default=200, show_default=True)
@click.option("--batch-size", type=click.IntRange(1, 10000), default=100, show_default=True)
@click.option(
    "--seconds", type=click.IntRange(min=1), help="Length of timed runs  [default: 10; 2 with --quick]"
)
@click.option("--backlog-sizes", help="Queued jobs for the backlog scenario  [default: 10000,100000,1000000]")
@click.option("--latency-rate", type=click.FloatRange(min=1), default=50.0, show_default=True, help="Jobs/s.")
@click.option("--timeout", type=click.FloatRange(min=10), default=300.0, show_default=True, help="Per drain.")
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
    concurrency: int,
    batch_size: int,
    seconds: int | None,
    backlog_sizes: str | None,
    latency_rate: float,
    timeout: float,
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
    sizes = _sizes(backlog_sizes or ("10000,100000" if quick else "10000,100000,1000000"))
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
        "latency_rate": latency_rate,
        "quick": quick,
    }
    results: dict[str, Any] = {
        "command": shlex.join(["pgq", "bench", *argv]),
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cores": os.cpu_count(), "postgres": server.settings()},
        "parameters": params,
        "scenarios": {},
    }
    scenarios: dict[str, Any] = results["scenarios"]
    began = time.monotonic()

    def run(name: str, fn: Callable[[], dict[str, Any]]) -> None:
        if name not in selected:
            scenarios[name] = {"skipped": "not selected (--only)"}
            return
        note(f"--- {name}")
        t0 = time.monotonic()
        try:
            scenarios[name] = fn()
        except (BenchError, OSError) as exc:
            scenarios[name] = {"error": str(exc)}
            note(f"{name}: error: {exc}")
        except Exception as exc:  # a bug in one scenario must not lose the others' figures
            scenarios[name] = {"error": f"{type(exc).__name__}: {exc}"}
            note(traceback.format_exc())
        scenarios[name]["wall_s"] = round(time.monotonic() - t0, 1)

    drain_args = {
        "workers": workers,
        "concurrency": concurrency,
        "batch_size": batch_size,
        "timeout": timeout,
    }
    run("raw", lambda: bench_pgq.raw_limit(server, jobs=jobs, seconds=seconds, batch_size=batch_size))
    run(
        "drain",
        lambda: bench_pgq.drain(
            server,
            "drain",
            fill=lambda d: bench_pgq.enqueue_jobs(d, jobs, "drain: enqueuing"),
            jobs=jobs,
            **drain_args,
        ),
    )
    run("enqueue", lambda: bench_pgq.enqueue(server, seconds=seconds))
    run("latency", lambda: bench_pgq.latency(server, seconds=seconds, rate=latency_rate))
    run("backlog", lambda: _backlog(server, sizes, drain_args))
    run(
        "xmin",
        lambda: bench_pgq.drain(
            server,
            "xmin",
            fill=lambda d: bench_pgq.enqueue_jobs(d, jobs, "xmin: enqueuing"),
            jobs=jobs,
            hold_xmin=True,
            **drain_args,
        ),
    )
    if quick or no_peer:
        scenarios["peer"] = {"skipped": "--quick" if quick else "--no-peer"}
    else:
        run("peer", lambda: _peer(server, jobs=jobs, seconds=seconds, rate=latency_rate, timeout=timeout))

    results["wall_s"] = round(time.monotonic() - began, 1)
    results["targets"] = targets(scenarios)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(results, indent=2, default=str) + "\n")
    click.echo(render(results))
    click.echo(f"\nresults: {json_path}")
    if any("error" in s for s in scenarios.values()):
        sys.exit(1)


def _backlog(server: Server, sizes: list[int], drain_args: dict[str, Any]) -> dict[str, Any]:
    """Drain the same sample (the smallest size) of one entrypoint with `size` jobs queued
    in all, spread over size/sample entrypoints; workers take only the sample's."""
    sample = sizes[0]
    out: dict[str, Any] = {"sample": sample, "runs": {}}
    for size in sizes:
        spread = max(1, size // sample)
        sample_jobs = -(-size // spread)
        r = bench_pgq.drain(
            server,
            f"backlog_{size}",
            fill=bench_pgq.backlog_fill(size, sample),
            jobs=sample_jobs,
            **drain_args,
        )
        out["runs"][str(size)] = {**r, "queued": size, "entrypoints": spread}
    base = out["runs"][str(sample)]["jobs_per_s"]
    for run in out["runs"].values():
        run["ratio_to_smallest"] = round(run["jobs_per_s"] / base, 3) if base else None
    return out


def _peer(server: Server, *, jobs: int, seconds: int, rate: float, timeout: float) -> dict[str, Any]:
    peer = Peer(server)
    try:
        version = peer.install()
    except PeerUnavailable as exc:
        note(f"peer: skipped: {exc}")
        return {"skipped": str(exc)}
    out: dict[str, Any] = {"version": version}

    def part(name: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        try:
            out[name] = fn()
        except BenchError as exc:
            out[name] = {"error": str(exc)}
            note(f"peer {name}: error: {exc}")
        return out[name]

    drain = part(
        "drain", lambda: peer.tuned_drain(jobs=jobs, trial_jobs=max(1000, jobs // 4), timeout=timeout)
    )
    part("enqueue", lambda: peer.enqueue(seconds=seconds))
    part("latency", lambda: peer.latency(seconds=seconds, rate=rate, batch_size=drain.get("batch_size", 10)))
    errors = [f"{k}: {v['error']}" for k, v in out.items() if isinstance(v, dict) and "error" in v]
    if errors:
        out["error"] = "; ".join(errors)
    return out
