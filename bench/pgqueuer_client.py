"""The producer side of PgQueuer for `pgq bench`, run by .bench/pgqueuer-venv's python.

  fill --jobs N                      N jobs, Queries.enqueue with lists of 10000
  enqueue --connections C --per-call K --seconds S
                                     C connections, each calling Queries.enqueue in a loop
                                     (one job, or lists of K) until S seconds pass
  latency --rate R --seconds S       one job per call at R/s; prints {job id: commit time}

Prints one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

import asyncpg
from pgqueuer.db import AsyncpgDriver
from pgqueuer.queries import Queries

PAYLOAD = b'{"n": 1}'


async def queries(dsn: str) -> Queries:
    return Queries(AsyncpgDriver(await asyncpg.connect(dsn)))


async def fill(args: argparse.Namespace) -> dict[str, object]:
    q = await queries(args.dsn)
    done = 0
    while done < args.jobs:
        size = min(10_000, args.jobs - done)
        await q.enqueue(["bench"] * size, [PAYLOAD] * size, [0] * size)
        done += size
        print(f"progress {done}", file=sys.stderr, flush=True)
    return {"jobs": done}


async def enqueue(args: argparse.Namespace) -> dict[str, object]:
    clients = [await queries(args.dsn) for _ in range(args.connections)]
    k = args.per_call
    counts = [0] * len(clients)
    stop = time.monotonic() + args.seconds

    async def loop(slot: int, q: Queries) -> None:
        while time.monotonic() < stop:
            if k == 1:
                await q.enqueue("bench", PAYLOAD)
            else:
                await q.enqueue(["bench"] * k, [PAYLOAD] * k, [0] * k)
            counts[slot] += k

    start = time.monotonic()
    await asyncio.gather(*(loop(i, q) for i, q in enumerate(clients)))
    elapsed = time.monotonic() - start
    return {"jobs": sum(counts), "seconds": elapsed, "jobs_per_s": sum(counts) / elapsed}


async def latency(args: argparse.Namespace) -> dict[str, object]:
    q = await queries(args.dsn)
    committed: dict[int, float] = {}
    total = max(1, int(args.rate * args.seconds))
    start = time.monotonic()
    for i in range(total):
        pause = start + i / args.rate - time.monotonic()
        if pause > 0:
            await asyncio.sleep(pause)
        (job_id,) = await q.enqueue("bench", PAYLOAD)
        committed[int(job_id)] = time.time()
    return {"committed": committed}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["fill", "enqueue", "latency"])
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--jobs", type=int, default=0)
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--per-call", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rate", type=float, default=50.0)
    args = parser.parse_args()
    result = asyncio.run({"fill": fill, "enqueue": enqueue, "latency": latency}[args.command](args))
    print(json.dumps(result))
