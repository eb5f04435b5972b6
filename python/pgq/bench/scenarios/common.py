"""What the `pgq bench` scenarios share: the bench entrypoint's payload, the probes of a pgq
drain, the worker's command line, the fills (raw INSERTs in chunks, pgq.enqueue_batch) and
the wait until every worker listens.

It measures nothing itself and must never touch a database but the scenario's own.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import psycopg

from ..app import ENTRYPOINT
from ..db import Processes, execute, progress
from ..drain import Probes

PAYLOAD = '{"n": 1}'


def pgq_probes(entrypoints: list[str]) -> Probes:
    """The probes of a drain of these entrypoints' jobs. Busy tests each status apart, each
    on its partial index (one test of both statements would scan the table)."""
    names = ", ".join(f"'{n}'" for n in entrypoints)
    return Probes(
        started=(
            "SELECT EXISTS (SELECT 1 FROM pgq._jobs AS j WHERE j.status = 'running')"
            " OR EXISTS (SELECT 1 FROM pgq._outcomes AS o)"
        ),
        busy=(
            f"SELECT EXISTS (SELECT 1 FROM pgq._jobs AS j WHERE j.entrypoint IN ({names})"
            " AND j.status = 'queued')"
            f" OR EXISTS (SELECT 1 FROM pgq._jobs AS j WHERE j.entrypoint IN ({names})"
            " AND j.status = 'running')"
        ),
        finished=(
            "SELECT count(*), min(o.started_at), max(o.finished_at) FROM pgq.outcomes AS o"
            f" WHERE o.entrypoint IN ({names}) AND o.outcome = 'succeeded'"
        ),
        completed=(
            "SELECT sum(s.n_tup_ins) FROM pg_stat_user_tables AS s"
            " JOIN pg_inherits AS i ON i.inhrelid = s.relid WHERE i.inhparent = 'pgq._outcomes'::regclass"
        ),
    )


PGQ_PROBES = pgq_probes([ENTRYPOINT])


def worker_argv(dsn: str, concurrency: int, batch_size: int, defaults: bool = False) -> list[str]:
    if defaults:  # no flags: the Worker's defaults, INFO lines (a summary every 10 s) to the log file
        return [sys.executable, "-m", "pgq", "worker", "pgq.bench.app:default_worker", "--dsn", dsn]
    return [
        *(sys.executable, "-m", "pgq", "worker", "pgq.bench.app:worker", "--dsn", dsn),
        *("--concurrency", str(concurrency), "--batch-size", str(batch_size)),
        *("--log-level", "warning"),  # measured without the INFO lines
    ]


def fill_in_chunks(dsn: str, jobs: int, statement: str, label: str, chunk: int = 100_000) -> None:
    """Run `statement` with (first, last) of consecutive ranges, one transaction each."""
    with psycopg.connect(dsn, autocommit=True) as conn, progress(jobs, label) as bar:
        for lo in range(0, jobs, chunk):
            hi = min(lo + chunk, jobs)
            conn.execute(statement, (lo, hi - 1))
            bar.update(hi - lo)


def enqueue_jobs(dsn: str, jobs: int, label: str, keys: int = 0, entrypoint: str = ENTRYPOINT) -> None:
    """N jobs of `entrypoint` through pgq.enqueue_batch, 10000 per call; with `keys`, each job
    gets one of that many concurrency keys, in turn (the claims then take the keyed, fair path)."""
    with psycopg.connect(dsn, autocommit=True) as conn, progress(jobs, label) as bar:
        for lo in range(0, jobs, 10_000):
            size = min(10_000, jobs - lo)
            conn.execute(
                "SELECT count(*) FROM pgq.enqueue_batch(%s::text, array_fill(%s::jsonb, ARRAY[%s::int]),"
                " concurrency_keys => CASE WHEN %s::int > 0 THEN"
                " ARRAY(SELECT 'tenant:' || (i %% %s::int) FROM generate_series(1, %s::int) AS i) END)",
                (entrypoint, PAYLOAD, size, keys, max(keys, 1), size),
            )
            bar.update(size)


def ready(dsn: str, procs: Processes, workers: int) -> Callable[[], bool]:
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
