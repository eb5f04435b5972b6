"""`pgq bench` scenarios for pgq itself: raw limit, drain, enqueue, latency, backlog, held xmin."""

from __future__ import annotations

import contextlib
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from ..client import Client
from .app import ENTRYPOINT
from .db import (
    BenchError,
    Processes,
    Server,
    bench_dir,
    execute,
    note,
    pgbench,
    progress,
    settle,
    wait_for,
)
from .drain import Probes, measure_drain, pgbench_drain, sampled_cpu

PAYLOAD = '{"n": 1}'

PGQ_PROBES = Probes(
    started=(
        "SELECT EXISTS (SELECT 1 FROM pgq._jobs AS j WHERE j.status = 'running')"
        " OR EXISTS (SELECT 1 FROM pgq._outcomes AS o)"
    ),
    busy=(
        f"SELECT EXISTS (SELECT 1 FROM pgq._jobs AS j WHERE j.entrypoint = '{ENTRYPOINT}'"
        " AND j.status = 'queued')"
        f" OR EXISTS (SELECT 1 FROM pgq._jobs AS j WHERE j.entrypoint = '{ENTRYPOINT}'"
        " AND j.status = 'running')"
    ),
    finished=(
        "SELECT count(*), min(o.started_at), max(o.finished_at) FROM pgq.outcomes AS o"
        f" WHERE o.entrypoint = '{ENTRYPOINT}' AND o.outcome = 'succeeded'"
    ),
    completed=(
        "SELECT sum(s.n_tup_ins) FROM pg_stat_user_tables AS s"
        " JOIN pg_inherits AS i ON i.inhrelid = s.relid WHERE i.inhparent = 'pgq._outcomes'::regclass"
    ),
)


def worker_argv(dsn: str, concurrency: int, batch_size: int, defaults: bool = False) -> list[str]:
    if defaults:  # no flags: the Worker's defaults, INFO lines (a summary every 10 s) to the log file
        return [sys.executable, "-m", "pgq", "worker", "pgq.bench.app:default_worker", "--dsn", dsn]
    return [
        *(sys.executable, "-m", "pgq", "worker", "pgq.bench.app:worker", "--dsn", dsn),
        *("--concurrency", str(concurrency), "--batch-size", str(batch_size)),
        *("--log-level", "warning"),  # measured without the INFO lines
    ]


# --- 1. the raw limit -------------------------------------------------------------------


def raw_limit(
    server: Server, *, jobs: int, seconds: int, batch_size: int, clients: int = 2
) -> dict[str, Any]:
    """pgq's claim -> complete cycle as plain SQL under pgbench; rows/s over the busy span."""
    with server.database("raw", pgq=False) as dsn:
        execute(dsn, (bench_dir() / "raw_setup.sql").read_text())
        fill_in_chunks(
            dsn,
            jobs,
            "INSERT INTO raw_jobs (entrypoint, payload)"
            f" SELECT '{ENTRYPOINT}', '{PAYLOAD}'::jsonb FROM generate_series(%s::bigint, %s::bigint)",
            "raw: filling",
        )
        settle(dsn, "raw_jobs")
        note(f"raw: pgbench, {clients} clients, batch {batch_size}, until drained (at most {seconds} s)")
        run = pgbench_drain(
            dsn,
            bench_dir() / "raw_cycle.sql",
            clients=clients,
            seconds=seconds,
            empty=(
                "SELECT NOT EXISTS (SELECT 1 FROM raw_jobs WHERE entrypoint = 'bench' AND status = 'queued')"
                " AND NOT EXISTS (SELECT 1 FROM raw_jobs WHERE entrypoint = 'bench' AND status = 'running')"
            ),
            completed="SELECT count(*) FROM raw_outcomes",
            defines={"batch": batch_size},
            log=server.log_dir / "raw-pgbench.log",
        )
        count, start, end, left = execute(
            dsn,
            "SELECT count(*), min(started_at), max(finished_at), (SELECT count(*) FROM raw_jobs)"
            " FROM raw_outcomes",
        )[0]
    span = (end - start).total_seconds()
    return {
        "rows": count,
        "seconds": round(span, 3),
        "rows_per_s": round(count / span, 1),
        "left": left,
        "clients": clients,
        "batch_size": batch_size,
        "drained": run["drained"],
        "cpu": run["cpu"],
    }


def sql_cycle(
    server: Server, *, jobs: int, seconds: int, batch_size: int, clients: int = 2
) -> dict[str, Any]:
    """The same cycle through pgq.claim and pgq.complete under pgbench (no Python worker)."""
    with server.database("sql_cycle") as dsn:
        enqueue_jobs(dsn, jobs, "pgq SQL: enqueuing")
        settle(dsn, "pgq._jobs")
        for client in range(clients):  # pgbench's client ids 0..clients-1
            execute(
                dsn,
                "INSERT INTO pgq._workers (id, name, entrypoints) VALUES (md5(%s)::uuid, %s, %s)",
                params=(str(client), f"pgbench-{client}", [ENTRYPOINT]),
            )
        note(f"pgq SQL: pgbench, {clients} clients, batch {batch_size}, until drained (at most {seconds} s)")
        run = pgbench_drain(
            dsn,
            bench_dir() / "pgq_cycle.sql",
            clients=clients,
            seconds=seconds,
            empty=f"SELECT NOT ({PGQ_PROBES.busy.removeprefix('SELECT ')})",
            completed=f"SELECT count(*) FROM pgq.outcomes WHERE entrypoint = '{ENTRYPOINT}'",
            defines={"batch": batch_size},
            log=server.log_dir / "pgq-sql-pgbench.log",
        )
        count, start, end = execute(dsn, PGQ_PROBES.finished)[0]
    span = (end - start).total_seconds()
    return {
        "jobs": count,
        "seconds": round(span, 3),
        "jobs_per_s": round(count / span, 1),
        "clients": clients,
        "batch_size": batch_size,
        "drained": run["drained"],
        "cpu": run["cpu"],
    }


def fill_in_chunks(dsn: str, jobs: int, statement: str, label: str, chunk: int = 100_000) -> None:
    """Run `statement` with (first, last) of consecutive ranges, one transaction each."""
    with psycopg.connect(dsn, autocommit=True) as conn, progress(jobs, label) as bar:
        for lo in range(0, jobs, chunk):
            hi = min(lo + chunk, jobs)
            conn.execute(statement, (lo, hi - 1))
            bar.update(hi - lo)


def enqueue_jobs(dsn: str, jobs: int, label: str, keys: int = 0) -> None:
    """N jobs through pgq.enqueue_batch, 10000 per call; with `keys`, each job gets one of
    that many concurrency keys, in turn (the claims then take the keyed, fair path)."""
    with psycopg.connect(dsn, autocommit=True) as conn, progress(jobs, label) as bar:
        for lo in range(0, jobs, 10_000):
            size = min(10_000, jobs - lo)
            conn.execute(
                "SELECT count(*) FROM pgq.enqueue_batch(%s::text, array_fill(%s::jsonb, ARRAY[%s::int]),"
                " concurrency_keys => CASE WHEN %s::int > 0 THEN"
                " ARRAY(SELECT 'tenant:' || (i %% %s::int) FROM generate_series(1, %s::int) AS i) END)",
                (ENTRYPOINT, PAYLOAD, size, keys, max(keys, 1), size),
            )
            bar.update(size)


# --- 2, 5, 6. drains ----------------------------------------------------------------------


def _ready(dsn: str, procs: Processes, workers: int) -> Callable[[], bool]:
    def check() -> bool:
        procs.check_alive()
        registered, listening = execute(
            dsn,
            "SELECT (SELECT count(*) FROM pgq.workers WHERE state = 'alive'),"
            " (SELECT count(*) FROM pg_stat_activity"
            "  WHERE datname = current_database() AND query = 'LISTEN pgq')",
        )[0]
        return registered >= workers and listening >= workers

    return check


def drain(
    server: Server,
    name: str,
    *,
    fill: Callable[[str], None],
    jobs: int,
    workers: int,
    concurrency: int,
    batch_size: int,
    timeout: float,
    hold_xmin: bool = False,
    defaults: bool = False,
    bystander: bool = False,
) -> dict[str, Any]:
    """Drain `jobs` jobs of the bench entrypoint with `workers` pgq worker processes (run
    with no flags at all when `defaults`).

    The entrypoint is paused while the workers start and resumed when all of them listen,
    so the clock starts with every worker ready. With hold_xmin, a REPEATABLE READ
    transaction holds its snapshot from before the first claim until the end.
    """
    with server.database(name) as dsn:
        fill(dsn)
        settle(dsn, "pgq._jobs")
        execute(dsn, f"SELECT pgq.pause('{ENTRYPOINT}')")
        holder = None
        if hold_xmin:
            holder = psycopg.connect(dsn)
            holder.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            holder.execute("SELECT 1")
        try:
            with Processes(server.log_dir, name) as procs:
                procs.start(worker_argv(dsn, concurrency, batch_size, defaults), count=workers)
                wait_for(f"{workers} pgq workers", _ready(dsn, procs, workers), timeout=60)
                with contextlib.ExitStack() as stack:
                    other = stack.enter_context(Bystander(dsn)) if bystander else None
                    if other is not None:
                        time.sleep(3.0)  # its latency with the queue idle

                    def release() -> None:
                        if other is not None:
                            other.phase = "drain"
                        execute(dsn, f"SELECT pgq.resume('{ENTRYPOINT}')")

                    result = measure_drain(
                        dsn,
                        jobs,
                        PGQ_PROBES,
                        procs,
                        release=release,
                        timeout=timeout,
                        label=f"{name}: draining",
                    )
                if other is not None:
                    result["bystander"] = other.summary()
                if not result["timed_out"]:
                    left = execute(
                        dsn,
                        "SELECT coalesce(sum(queued + running), 0) FROM pgq.queues WHERE entrypoint = %s",
                        params=(ENTRYPOINT,),
                    )[0][0]
                    if left:
                        raise BenchError(f"{name}: pgq.queues still shows {left} jobs queued or running")
        finally:
            if holder is not None:
                holder.close()
    if result["jobs"] < jobs and not result["timed_out"]:
        raise BenchError(f"{name}: {result['jobs']} of {jobs} jobs completed")
    if defaults:  # the Worker's own: 500 slots for async handlers, batches of up to 500
        return {**result, "workers": workers, "concurrency": "default", "batch_size": "default"}
    return {**result, "workers": workers, "concurrency": concurrency, "batch_size": batch_size}


class Bystander:
    """Another application on the same server: one connection updating a row of a small
    table of its own, `rate` times a second, each statement its own transaction; its
    latencies (ms) are kept per phase ("idle", "drain")."""

    def __init__(self, dsn: str, rate: float = 200.0) -> None:
        self.dsn, self.rate = dsn, rate
        self.phase = "idle"
        self.latencies: dict[str, list[float]] = {"idle": [], "drain": []}
        self._stop = threading.Event()
        execute(
            dsn,
            "CREATE TABLE IF NOT EXISTS bystander (id integer PRIMARY KEY, n bigint NOT NULL DEFAULT 0)",
            "INSERT INTO bystander (id) SELECT g FROM generate_series(1, 1000) AS g ON CONFLICT DO NOTHING",
        )
        self._thread = threading.Thread(target=self._run, name="bystander", daemon=True)

    def __enter__(self) -> Bystander:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            n, next_at = 0, time.perf_counter()
            while not self._stop.is_set():
                n += 1
                t0 = time.perf_counter()
                conn.execute("UPDATE bystander SET n = n + 1 WHERE id = %s", (n % 1000 + 1,))
                self.latencies[self.phase].append((time.perf_counter() - t0) * 1000)
                next_at += 1 / self.rate
                self._stop.wait(max(0.0, next_at - time.perf_counter()))

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rate": self.rate}
        for phase, values in self.latencies.items():
            if len(values) >= 2:
                q = statistics.quantiles(values, n=100)
                out[phase] = {"samples": len(values), "p50_ms": round(q[49], 2), "p99_ms": round(q[98], 2)}
        return out


def bystander(server: Server, *, jobs: int, **drain_args: Any) -> dict[str, Any]:
    """A bystander's latency with the queue idle (workers started, nothing queued for them
    yet), then while N jobs drain (tuned workers)."""
    return drain(
        server,
        "bystander",
        fill=lambda d: enqueue_jobs(d, jobs, "bystander: enqueuing"),
        jobs=jobs,
        bystander=True,
        **drain_args,
    )


def backlog_fill(size: int, sample: int) -> Callable[[str], None]:
    """`size` queued jobs spread over size/sample entrypoints, interleaved in the heap;
    `sample` of them belong to the bench entrypoint. One INSERT ... SELECT per 100k rows."""
    spread = max(1, size // sample)

    def fill(dsn: str) -> None:
        fill_in_chunks(
            dsn,
            size,
            "INSERT INTO pgq._jobs (entrypoint, payload)"
            f" SELECT CASE WHEN i %% {spread} = 0 THEN '{ENTRYPOINT}'"
            f" ELSE '{ENTRYPOINT}_' || (i %% {spread}) END,"
            f" '{PAYLOAD}'::jsonb FROM generate_series(%s::bigint, %s::bigint) AS i",
            f"backlog {size}: loading",
        )

    return fill


# --- pgq.queues at scale -------------------------------------------------------------------


def queues_read(server: Server, *, size: int, entrypoints: int, reads: int = 9) -> dict[str, Any]:
    """`SELECT * FROM pgq.queues` with `size` queued jobs spread over `entrypoints`
    entrypoints (interleaved in the heap, as in the backlog scenario): the median of `reads`
    reads in one session, right after the fill and again after VACUUM (index-only scans
    skip the heap only for pages the visibility map marks all-visible)."""
    name = f"queues_{entrypoints}"
    with server.database(name) as dsn:
        fill_in_chunks(
            dsn,
            size,
            "INSERT INTO pgq._jobs (entrypoint, payload)"
            f" SELECT '{ENTRYPOINT}_' || (i %% {entrypoints}), '{PAYLOAD}'::jsonb"
            " FROM generate_series(%s::bigint, %s::bigint) AS i",
            f"{name}: loading {size:,} jobs",
        )
        result: dict[str, Any] = {"queued": size, "entrypoints": entrypoints, "reads": reads}
        result["fresh"] = _time_queues(dsn, reads)
        execute(dsn, "VACUUM (ANALYZE) pgq._jobs")
        result["vacuumed"] = _time_queues(dsn, reads)
    result["ms"] = max(result["fresh"]["median_ms"], result["vacuumed"]["median_ms"])
    return result


def _time_queues(dsn: str, reads: int) -> dict[str, Any]:
    """Median and worst of `reads` timed reads, after one untimed read (a new session's
    first statements also load its catalog caches and plans); what the last read showed."""
    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
        conn.execute("SELECT * FROM pgq.queues").fetchall()
        times = []
        for _ in range(reads):
            started = time.perf_counter()
            rows = conn.execute("SELECT * FROM pgq.queues").fetchall()
            times.append((time.perf_counter() - started) * 1000)
    return {
        "median_ms": round(statistics.median(times), 2),
        "max_ms": round(max(times), 2),
        "rows": len(rows),
        "queued_shown": sum(r["queued"] for r in rows),
        "approximate_rows": sum(bool(r.get("approximate")) for r in rows),
    }


# --- 3. enqueue ---------------------------------------------------------------------------


ENQUEUE_CASES = [
    # key, pgbench script, connections, jobs per call
    ("single_1conn", "pgq_enqueue.sql", 1, 1),
    ("single_8conn", "pgq_enqueue.sql", 8, 1),
    ("batch1000_1conn", "pgq_enqueue_batch.sql", 1, 1000),
]


def enqueue_case(
    server: Server, dsn: str, case: tuple[str, str, int, int], *, seconds: int
) -> dict[str, float]:
    """One enqueue case, jobs/s: through pgbench (the SQL alone) and pgq.Client (Python)."""
    key, script, clients, per_call = case
    execute(dsn, "TRUNCATE pgq._jobs CASCADE", "CHECKPOINT")
    note(f"enqueue: pgbench {script}, {clients} connection(s), {seconds} s")
    run = pgbench(
        dsn, bench_dir() / script, clients=clients, seconds=seconds, log=server.log_dir / f"enqueue-{key}.log"
    )
    execute(dsn, "TRUNCATE pgq._jobs CASCADE", "CHECKPOINT")
    note(f"enqueue: pgq.Client, {key}, {seconds} s")
    return {
        f"pgbench_{key}": round(run["tps"] * per_call, 1),
        f"client_{key}": client_enqueue(dsn, clients=clients, per_call=per_call, seconds=seconds),
    }


def client_enqueue(dsn: str, *, clients: int, per_call: int, seconds: float) -> float:
    """jobs/s through pgq.Client.enqueue (per_call 1) or enqueue_batch, one thread a connection."""
    counts = [0] * clients
    payloads = [{"n": 1}] * per_call
    with Client(dsn, min_size=clients, max_size=clients) as client:
        client.enqueue(ENTRYPOINT, {"n": 0})  # open the pool before the clock starts
        stop = time.monotonic() + seconds

        def loop(slot: int) -> None:
            while time.monotonic() < stop:
                if per_call == 1:
                    client.enqueue(ENTRYPOINT, {"n": 1})
                else:
                    client.enqueue_batch(ENTRYPOINT, payloads)
                counts[slot] += per_call

        start = time.monotonic()
        threads = [threading.Thread(target=loop, args=(i,)) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(seconds + 60)
        elapsed = time.monotonic() - start
    return round(sum(counts) / elapsed, 1)


# --- 4. latency ---------------------------------------------------------------------------


def latency(server: Server, *, seconds: int, rate: float) -> dict[str, Any]:
    """One idle worker; jobs enqueued one per transaction at `rate`/s; commit -> handler start.
    Also the CPU per job at this trickle (claims of one job, polls that find nothing): the
    worker process and every backend of the database, the producer's included."""
    ledger = server.log_dir / "latency-ledger.txt"
    ledger.parent.mkdir(parents=True, exist_ok=True)
    ledger.write_text("")
    committed: dict[int, float] = {}
    with server.database("latency") as dsn, Processes(server.log_dir, "latency") as procs:
        procs.start(worker_argv(dsn, 200, 100), env={"PGQ_BENCH_LEDGER": str(ledger)})
        wait_for("the pgq worker", _ready(dsn, procs, 1), timeout=60)
        time.sleep(0.5)  # idle: past its first empty claim
        total = max(1, int(seconds * rate))
        with (
            Client(dsn, min_size=1, max_size=1) as client,
            sampled_cpu(dsn, lambda: [p.pid for p in procs.procs]) as cpu,
            progress(total, "latency: enqueuing") as bar,
        ):
            client.job_status(0)  # connect before the clock starts
            start = time.monotonic()
            for i in range(total):
                pause = start + i / rate - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                job_id = client.enqueue(ENTRYPOINT, {"n": i})
                committed[job_id] = time.time()
                bar.update(1)
            wait_for("the handlers", lambda: len(_read_ledger(ledger)) >= total, timeout=30, interval=0.1)
            cpu_use = cpu.result(total)
    return {**latency_summary(committed, _read_ledger(ledger), rate), "cpu": cpu_use}


def _read_ledger(path: Path) -> dict[int, float]:
    started: dict[int, float] = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:
            started.setdefault(int(parts[0]), float(parts[1]))
    return started


def latency_summary(committed: dict[int, float], started: dict[int, float], rate: float) -> dict[str, Any]:
    """p50/p99/max of handler start minus commit, in ms (shared by pgq and the peer)."""
    samples = sorted((started[i] - t) * 1000 for i, t in committed.items() if i in started)
    if not samples:
        raise BenchError("latency: no handler ran")
    cuts = statistics.quantiles(samples, n=100, method="inclusive") if len(samples) > 1 else samples * 99
    return {
        "samples": len(samples),
        "rate": rate,
        "p50_ms": round(cuts[49], 2),
        "p99_ms": round(cuts[98], 2),
        "max_ms": round(samples[-1], 2),
    }
