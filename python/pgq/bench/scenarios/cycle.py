"""`pgq bench` scenarios of the SQL alone, under pgbench: the raw limit (pgq's claim ->
complete cycle as plain SQL on tables of its own) and the same cycle through pgq.claim and
pgq.complete (no Python worker), by workers of one entrypoint and of several. Each runs in a
throwaway database of its own.
"""

from __future__ import annotations

from typing import Any

from ..app import ENTRYPOINT
from ..db import Server, bench_dir, execute, note, settle
from ..drain import pgbench_drain
from .common import PAYLOAD, enqueue_jobs, fill_in_chunks, pgq_probes

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
    server: Server, *, jobs: int, seconds: int, batch_size: int, clients: int = 2, entrypoints: int = 1
) -> dict[str, Any]:
    """The same cycle through pgq.claim and pgq.complete under pgbench (no Python worker).

    With `entrypoints` > 1, each client is a worker of that many entrypoints (the bench
    entrypoint and bench_1, bench_2, ...), and the jobs are spread evenly over them, each
    entrypoint's enqueued together: what one claim of a worker of several entrypoints costs
    (a fleet's usual worker), beside the claim of one entrypoint."""
    names = [ENTRYPOINT] + [f"{ENTRYPOINT}_{i}" for i in range(1, entrypoints)]
    name = "sql_cycle" if entrypoints == 1 else f"sql_cycle_{entrypoints}"
    label = "pgq SQL" if entrypoints == 1 else f"pgq SQL, {entrypoints} entrypoints"
    probes = pgq_probes(names)
    in_names = ", ".join(f"'{n}'" for n in names)
    with server.database(name) as dsn:
        for i, entrypoint in enumerate(names):
            share = jobs // entrypoints + (1 if i < jobs % entrypoints else 0)
            enqueue_jobs(dsn, share, f"{label}: enqueuing {entrypoint}", entrypoint=entrypoint)
        settle(dsn, "pgq._jobs")
        for client in range(clients):  # pgbench's client ids 0..clients-1
            execute(
                dsn,
                "INSERT INTO pgq._workers (id, name, entrypoints)"
                " VALUES (('00000000-0000-4000-8000-' || lpad(%s, 12, '0'))::uuid, %s, %s)",
                params=(str(client), f"pgbench-{client}", names),
            )
        note(f"{label}: pgbench, {clients} clients, batch {batch_size}, until drained (at most {seconds} s)")
        run = pgbench_drain(
            dsn,
            bench_dir() / "pgq_cycle.sql",
            clients=clients,
            seconds=seconds,
            empty=f"SELECT NOT ({probes.busy.removeprefix('SELECT ')})",
            completed=f"SELECT count(*) FROM pgq.outcomes WHERE entrypoint IN ({in_names})",
            defines={"batch": batch_size, "entrypoints": "{" + ",".join(names) + "}"},
            log=server.log_dir / ("pgq-sql-pgbench.log" if entrypoints == 1 else "pgq-spread-pgbench.log"),
        )
        count, start, end = execute(dsn, probes.finished)[0]
    span = (end - start).total_seconds()
    return {
        "jobs": count,
        "seconds": round(span, 3),
        "jobs_per_s": round(count / span, 1),
        "clients": clients,
        "entrypoints": entrypoints,
        "batch_size": batch_size,
        "drained": run["drained"],
        "cpu": run["cpu"],
    }
