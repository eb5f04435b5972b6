"""A PgQueuer worker process for `pgq bench`, run by .bench/pgqueuer-venv's python.

One entrypoint, `bench`, with a no-op async handler (with --ledger, it first appends
"job_id unix_time" to that file, for the latency scenario). --managers QueueManagers run
in this process, each on its own asyncpg connection. Runs until SIGTERM or SIGINT.
With --wait-for-go it connects, prints "ready" and waits for SIGUSR1 before it dequeues,
so that the benchmark can start every process at the same moment.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import time
from datetime import timedelta

import asyncpg
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job
from pgqueuer.qm import QueueManager
from pgqueuer.queries import Queries


def make_manager(conn: asyncpg.Connection, ledger: object | None) -> QueueManager:
    qm = QueueManager(Queries(AsyncpgDriver(conn)))
    if ledger is None:

        @qm.entrypoint("bench")
        async def bench(job: Job) -> None:
            return None

    else:
        write = ledger.write  # type: ignore[attr-defined]

        @qm.entrypoint("bench")
        async def bench_timed(job: Job) -> None:
            write(f"{job.id} {time.time():.6f}\n")

    return qm


async def main(args: argparse.Namespace) -> None:
    ledger = open(args.ledger, "a", buffering=1) if args.ledger else None  # noqa: SIM115
    conns = [await asyncpg.connect(args.dsn) for _ in range(args.managers)]
    managers = [make_manager(conn, ledger) for conn in conns]
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: [qm.shutdown.set() for qm in managers])
    if args.wait_for_go:
        go = asyncio.Event()
        loop.add_signal_handler(signal.SIGUSR1, go.set)
        print("ready", flush=True)
        await asyncio.wait_for(go.wait(), 600)
    try:
        await asyncio.gather(
            *(
                qm.run(
                    batch_size=args.batch_size,
                    max_concurrent_tasks=args.max_concurrent_tasks,
                    dequeue_timeout=timedelta(seconds=args.dequeue_timeout),
                )
                for qm in managers
            )
        )
    finally:
        for conn in conns:
            await conn.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--managers", type=int, default=1)
    parser.add_argument("--max-concurrent-tasks", type=int, default=None)
    parser.add_argument("--dequeue-timeout", type=float, default=30.0)
    parser.add_argument("--ledger")
    parser.add_argument("--uvloop", action="store_true")
    parser.add_argument("--wait-for-go", action="store_true")
    args = parser.parse_args()
    if args.uvloop:
        import uvloop

        uvloop.run(main(args))
    else:
        asyncio.run(main(args))
