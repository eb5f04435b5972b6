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
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from ..dsn import resolve_dsn
from . import scenarios as bench_pgq
from .db import BenchError, Server, note
from .peer import Peer, PeerUnavailable
from .report import render, targets

# Concurrency keys of the keyed drain (jobs take them in turn).
KEYS = 100
SCENARIOS = [
    "raw",
    "sql",
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
QUEUES_ENTRYPOINTS = (1, 100)


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


class Rounds:
    """Runs the scenarios in rounds: each round measures every throughput scenario once
    (raw limit, SQL cycle, pgq drain, PgQueuer drain, held xmin, backlogs), so that other
    load on the machine falls on all of them alike; the fastest run of each counts. The
    enqueue cases and the latency runs of pgq and PgQueuer run back to back."""

    def __init__(self, server: Server, selected: list[str], repeat: int) -> None:
        self.server = server
        self.selected = selected
        self.repeat = repeat
        self.runs: dict[str, list[dict[str, Any]]] = {}
        self.errors: dict[str, str] = {}
        self.batch_from = "--batch-size"  # where the drains' batch size came from

    def attempt(self, key: str, fn: Callable[[], Any]) -> Any:
        """Run one measurement; after a failure, that key is not tried again."""
        if key in self.errors:
            return None
        try:
            result = fn()
        except (BenchError, OSError) as exc:
            self.errors[key] = str(exc)
            note(f"{key}: error: {exc}")
            return None
        except Exception as exc:  # a bug in one scenario must not lose the others' figures
            self.errors[key] = f"{type(exc).__name__}: {exc}"
            note(traceback.format_exc())
            return None
        if isinstance(result, dict):
            self.runs.setdefault(key, []).append(result)
        return result

    def best(self, key: str, rate: str) -> dict[str, Any]:
        if key in self.errors:
            return {"error": self.errors[key]}
        results = self.runs.get(key, [])
        if not results:
            return {"skipped": "not run"}
        best = max(results, key=lambda r: r[rate])
        rates = [r[rate] for r in results]
        return {**best, "runs": rates, "median": statistics.median(rates)}

    def first(self, key: str) -> dict[str, Any]:
        """The result of a measurement run once (not a rate: no best of several)."""
        if key in self.errors:
            return {"error": self.errors[key]}
        return (self.runs.get(key) or [{"skipped": "not run"}])[0]

    def run(
        self,
        *,
        jobs: int,
        seconds: int,
        sizes: list[int],
        queues_size: int,
        monitor_size: int,
        latency_rate: float,
        drain_args: dict[str, Any],
        peer_skip: str | None,
    ) -> dict[str, Any]:
        server, on = self.server, self.selected.__contains__

        def pgq_drain(
            name: str, hold_xmin: bool = False, defaults: bool = False, keys: int = 0, n: int = jobs
        ) -> dict[str, Any]:
            return bench_pgq.drain(
                server,
                name,
                fill=lambda d: bench_pgq.enqueue_jobs(d, n, f"{name}: enqueuing", keys),
                jobs=n,
                hold_xmin=hold_xmin,
                defaults=defaults,
                **drain_args,
            )

        peer, peer_out, best_cfg = None, {}, None
        if on("peer") and peer_skip is None:
            note("--- peer: PgQueuer")
            peer = Peer(server)
            try:
                peer_out["version"] = peer.install()
            except PeerUnavailable as exc:
                note(f"peer: skipped: {exc}")
                peer, peer_skip = None, str(exc)
        if peer is not None:
            trials = self.attempt(
                "peer_tune",
                lambda: {"trials": peer.tune(trial_jobs=max(1000, jobs // 4), timeout=drain_args["timeout"])},
            )
            if trials:
                top = max(trials["trials"], key=lambda r: r["jobs_per_s"])
                best_cfg = {k: top[k] for k in ("processes", "managers", "batch_size")}
                peer_out["trials"] = trials["trials"]
        # pgq claims as many jobs per round trip as PgQueuer's best trial fetched (the
        # comparison is at equal batch size), unless told otherwise; twice as many slots,
        # so that a worker claims the next batch while it completes the last.
        if drain_args["batch_size"] is None:
            drain_args["batch_size"] = best_cfg["batch_size"] if best_cfg else 100
            self.batch_from = "PgQueuer's best trial" if best_cfg else "default"
        if drain_args["concurrency"] is None:
            drain_args["concurrency"] = max(200, 2 * drain_args["batch_size"])
        # A worker never claims more than its free slots.
        drain_args["batch_size"] = min(drain_args["batch_size"], drain_args["concurrency"])
        cycle = {"jobs": jobs, "seconds": seconds, "batch_size": drain_args["batch_size"]}

        sample = sizes[0]
        for n in range(self.repeat):
            note(f"=== round {n + 1} of {self.repeat}")
            if on("raw"):
                self.attempt("raw", lambda: bench_pgq.raw_limit(server, **cycle))
            if on("sql"):
                self.attempt("sql", lambda: bench_pgq.sql_cycle(server, **cycle))
            if on("drain"):
                self.attempt("drain", lambda: pgq_drain("drain"))
            if on("defaults"):
                self.attempt("defaults", lambda: pgq_drain("defaults", defaults=True))
            if on("bystander"):
                self.attempt("bystander", lambda: bench_pgq.bystander(server, jobs=jobs, **drain_args))
            if on("keyed"):
                # A fifth of N: fair claims among keys cost several times the plain claim.
                self.attempt("keyed", lambda: pgq_drain("keyed", keys=KEYS, n=max(100, jobs // 5)))
            if peer is not None and best_cfg is not None:
                self.attempt(
                    "peer_drain",
                    lambda cfg=best_cfg: peer.drain(
                        "peer_drain", jobs=jobs, timeout=drain_args["timeout"], **cfg
                    ),
                )
            if on("xmin"):
                self.attempt("xmin", lambda: pgq_drain("xmin", hold_xmin=True))
                if sizes[-1] > jobs:
                    # As many claimed under the snapshot as the largest backlog holds, and
                    # the same drain without it (its baseline: the size alone may change
                    # the rate), in turns so that neither always runs after the other.
                    pair = [("xmin_large", True), ("drain_large", False)]
                    for key, hold in pair if n % 2 == 0 else pair[::-1]:
                        if "xmin_large" not in self.errors:
                            self.attempt(key, lambda k=key, h=hold: pgq_drain(k, hold_xmin=h, n=sizes[-1]))
            for size in sizes if on("backlog") else []:
                spread = max(1, size // sample)
                self.attempt(
                    f"backlog_{size}",
                    lambda size=size, spread=spread: {
                        **bench_pgq.drain(
                            server,
                            f"backlog_{size}",
                            fill=bench_pgq.backlog_fill(size, sample),
                            jobs=-(-size // spread),
                            **drain_args,
                        ),
                        "queued": size,
                        "entrypoints": spread,
                    },
                )

        enqueue: dict[str, Any] = {}
        peer_enqueue: dict[str, Any] = {}
        if on("enqueue") or peer is not None:
            # Alternating pgq and PgQueuer in short runs; the best run of each counts.
            short = max(1, round(seconds / self.repeat))
            with contextlib.ExitStack() as stack:
                mine = stack.enter_context(server.database("enqueue")) if on("enqueue") else None
                theirs = stack.enter_context(peer.enqueue_database()) if peer is not None else None
                for n in range(self.repeat):
                    note(f"--- enqueue, round {n + 1} of {self.repeat}, {short} s per run")
                    for case in bench_pgq.ENQUEUE_CASES:
                        key, _, clients, per_call = case
                        if mine is not None:
                            rates = self.attempt(
                                "enqueue",
                                lambda c=case: bench_pgq.enqueue_case(server, mine, c, seconds=short),
                            )
                            for k, v in (rates or {}).items():
                                enqueue[k] = max(v, enqueue.get(k, 0.0))
                        if peer is not None and theirs is not None:
                            rate = self.attempt(
                                "peer_enqueue",
                                lambda k=key, c=clients, p=per_call: peer.enqueue_case(
                                    theirs, k, c, p, seconds=short
                                ),
                            )
                            if rate is not None:
                                peer_enqueue[f"client_{key}"] = max(
                                    rate, peer_enqueue.get(f"client_{key}", 0.0)
                                )

        if on("queues"):
            note("--- pgq.queues")
            for eps in QUEUES_ENTRYPOINTS:
                self.attempt(
                    f"queues_{eps}",
                    lambda eps=eps: bench_pgq.queues_read(server, size=queues_size, entrypoints=eps),
                )

        if on("monitor"):
            note("--- monitor (dashboard and /metrics)")
            # Imported here: it needs the dashboard extra (prometheus_client, psycopg_pool).
            from . import monitor as bench_monitor

            self.attempt("monitor", lambda: bench_monitor.monitor_reads(server, size=monitor_size))

        if on("latency"):
            note("--- latency")
            self.attempt("latency", lambda: bench_pgq.latency(server, seconds=seconds, rate=latency_rate))
        if peer is not None:
            batch = best_cfg["batch_size"] if best_cfg else 10
            self.attempt(
                "peer_latency", lambda: peer.latency(seconds=seconds, rate=latency_rate, batch_size=batch)
            )

        out: dict[str, Any] = {}
        for name, key, rate in [
            ("raw", "raw", "rows_per_s"),
            ("sql", "sql", "jobs_per_s"),
            ("drain", "drain", "jobs_per_s"),
            ("defaults", "defaults", "jobs_per_s"),
            ("keyed", "keyed", "jobs_per_s"),
            ("bystander", "bystander", "jobs_per_s"),
            ("xmin", "xmin", "jobs_per_s"),
            ("latency", "latency", "p50_ms"),
        ]:
            out[name] = self.best(key, rate) if on(name) else {"skipped": "not selected (--only)"}
        for name in ("xmin_large", "drain_large"):
            out[name] = self.best(name, "jobs_per_s") if on("xmin") else {"skipped": "not selected (--only)"}
        if on("latency") and "latency" in self.runs:
            out["latency"] = {**self.runs["latency"][0]}
        out["enqueue"] = (
            ({"error": self.errors["enqueue"]} if "enqueue" in self.errors else enqueue)
            if on("enqueue")
            else {"skipped": "not selected (--only)"}
        )
        if on("backlog"):
            runs = {str(size): self.best(f"backlog_{size}", "jobs_per_s") for size in sizes}
            base = runs[str(sample)].get("jobs_per_s")
            for r in runs.values():
                if base and "jobs_per_s" in r:
                    r["ratio_to_smallest"] = round(r["jobs_per_s"] / base, 3)
            errors = [f"{size}: {r['error']}" for size, r in runs.items() if "error" in r]
            out["backlog"] = {
                "sample": sample,
                "runs": runs,
                **({"error": "; ".join(errors)} if errors else {}),
            }
        else:
            out["backlog"] = {"skipped": "not selected (--only)"}
        if on("queues"):
            reads = {str(eps): self.first(f"queues_{eps}") for eps in QUEUES_ENTRYPOINTS}
            errors = [f"{eps} entrypoints: {r['error']}" for eps, r in reads.items() if "error" in r]
            out["queues"] = {"runs": reads, **({"error": "; ".join(errors)} if errors else {})}
        else:
            out["queues"] = {"skipped": "not selected (--only)"}
        out["monitor"] = self.first("monitor") if on("monitor") else {"skipped": "not selected (--only)"}
        if peer is None:
            out["peer"] = {"skipped": peer_skip or "not selected (--only)"}
        else:
            drain = self.best("peer_drain", "jobs_per_s")
            if "peer_tune" in self.errors:
                drain = {"error": self.errors["peer_tune"]}
            peer_out["drain"] = {**drain, "trials": peer_out.pop("trials", [])}
            peer_out["enqueue"] = (
                {"error": self.errors["peer_enqueue"]} if "peer_enqueue" in self.errors else peer_enqueue
            )
            peer_out["latency"] = (
                {"error": self.errors["peer_latency"]}
                if "peer_latency" in self.errors
                else {**(self.runs.get("peer_latency") or [{}])[0]}
            )
            failed = [
                f"{k}: {v['error']}" for k, v in peer_out.items() if isinstance(v, dict) and "error" in v
            ]
            if failed:
                peer_out["error"] = "; ".join(failed)
            out["peer"] = peer_out
        return out
