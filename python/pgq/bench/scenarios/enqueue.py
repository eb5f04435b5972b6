"""`pgq bench`'s enqueue: one job per transaction on 1 and 8 connections, and batches of
1000, through pgbench (the SQL alone) and pgq.Client (Python).
"""

from __future__ import annotations

import threading
import time

from ...client import Client
from ..app import ENTRYPOINT
from ..db import Server, bench_dir, execute, note, pgbench

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
