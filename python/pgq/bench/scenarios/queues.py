"""`pgq bench`'s reads of pgq.queues at scale: a million queued jobs over one or a hundred
entrypoints, timed fresh and after VACUUM. Reads only, in a throwaway database of its own.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import psycopg
from psycopg.rows import dict_row

from ..app import ENTRYPOINT
from ..db import Server, execute
from .common import PAYLOAD, fill_in_chunks

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
