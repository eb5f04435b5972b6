"""How `pgq bench` runs its scenarios: in rounds, so that other load on the machine falls on
every throughput scenario alike, the best run of each counting; PgQueuer's trials first,
whose best batch size the drains then use; and the results gathered per scenario, an error
in one never losing the others' figures.

It runs the scenarios (pgq.bench.scenarios, peer, monitor) and must never measure anything
itself.
"""

from __future__ import annotations

import contextlib
import statistics
import traceback
from collections.abc import Callable
from typing import Any

from . import scenarios as bench_pgq
from .db import BenchError, Server, note
from .peer import Peer, PeerUnavailable

# Concurrency keys of the keyed drain (jobs take them in turn).
KEYS = 100
# Entrypoints of each worker in the spread SQL cycle: a fleet's worker usually serves several.
SPREAD_ENTRYPOINTS = 4
QUEUES_ENTRYPOINTS = (1, 100)


class Rounds:
    """Runs the scenarios in rounds: each round measures every throughput scenario once
    (raw limit, SQL cycles of workers of one and of several entrypoints, pgq drain, PgQueuer
    drain, held xmin, backlogs), so that other load on the machine falls on all of them
    alike; the fastest run of each counts. The enqueue cases and the latency runs of pgq and
    PgQueuer run back to back."""

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
            if on("spread"):
                self.attempt(
                    "spread", lambda: bench_pgq.sql_cycle(server, entrypoints=SPREAD_ENTRYPOINTS, **cycle)
                )
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
            # The largest backlog twice: in the shared partition, and with the drained
            # entrypoint in a partition of its own (pgq.isolate).
            backlogs = [(size, False) for size in sizes] + ([(sizes[-1], True)] if len(sizes) > 1 else [])
            for size, isolated in backlogs if on("backlog") else []:
                spread = max(1, size // sample)
                key = f"backlog_{size}" + ("_isolated" if isolated else "")
                self.attempt(
                    key,
                    lambda size=size, spread=spread, key=key, isolated=isolated: {
                        **bench_pgq.drain(
                            server,
                            key,
                            fill=bench_pgq.backlog_fill(size, sample, isolated=isolated),
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
            ("spread", "spread", "jobs_per_s"),
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
            isolated = (
                {str(sizes[-1]): self.best(f"backlog_{sizes[-1]}_isolated", "jobs_per_s")}
                if len(sizes) > 1
                else {}
            )
            base = runs[str(sample)].get("jobs_per_s")
            base_median = runs[str(sample)].get("median")
            for r in [*runs.values(), *isolated.values()]:
                if base and "jobs_per_s" in r:
                    r["ratio_to_smallest"] = round(r["jobs_per_s"] / base, 3)
                    # The drains of the sample take a fraction of a second: single runs
                    # spread by a fifth, and the medians' ratio is the steadier one.
                    r["median_ratio_to_smallest"] = round(r["median"] / base_median, 3)
            errors = [f"{size}: {r['error']}" for size, r in runs.items() if "error" in r]
            errors += [f"{size}, isolated: {r['error']}" for size, r in isolated.items() if "error" in r]
            out["backlog"] = {
                "sample": sample,
                "runs": runs,
                "isolated": isolated,
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
