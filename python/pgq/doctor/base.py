"""What every check of `pgq doctor` shares: the thresholds (Limits), the shape of what a
check finds, and two small readers. It holds no check itself and must never change the
database: doctor only reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import psycopg


@dataclass(frozen=True)
class Limits:
    """Thresholds of the checks that measure something."""

    max_xact_age: timedelta = timedelta(minutes=5)
    max_dead_tuples: int = 100_000
    dead_tuple_ratio: float = 2.0
    # A due job waiting longer than this: its entrypoint is reported, with the reason.
    max_queue_age: timedelta = timedelta(minutes=5)
    # An index of pgq._jobs larger by this than its live rows need is reported.
    max_index_excess: int = 64 * 1024 * 1024


Found = list[tuple[str, str]]


def one(conn: psycopg.Connection, query: str, params: tuple = ()) -> object:
    row = conn.execute(query, params or None).fetchone()
    return row[0] if row else None


def when(moment: object) -> str:
    return "never" if moment is None else f"{moment:%Y-%m-%d %H:%M:%S %Z}".strip()
