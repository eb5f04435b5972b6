"""The dashboard's connection pool and the base of its query classes: how each query runs
(as the DSN's role, autocommit, rows as dicts, a statement timeout that bounds a search).

It holds no query of a page (overview_queries, job_queries and queries do) and must never
run anything but pgq's public views and functions.
"""

from __future__ import annotations

import json
from typing import Any

from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool


def _configure(conn: Any) -> None:
    conn.execute("SET application_name = 'pgq-dashboard'")
    # A payload search scans the hot table: bound it so it cannot pile up.
    conn.execute("SET statement_timeout = '5s'")
    # Compiling these short queries costs more than running them.
    conn.execute("SET jit = off")


def make_pool(dsn: str) -> ConnectionPool:
    return ConnectionPool(
        dsn,
        min_size=1,
        max_size=4,
        kwargs={"autocommit": True, "row_factory": dict_row},
        configure=_configure,
        open=False,
        name="pgq-dashboard",
    )


class Reader:
    """A query class's access to the pool: one connection per call, returned at once."""

    def __init__(self, pool: ConnectionPool) -> None:
        self.pool = pool

    def _all(self, query: str, params: Any = None) -> list[dict[str, Any]]:
        with self.pool.connection() as conn:
            return conn.execute(query, params).fetchall()

    def _one(self, query: str, params: Any = None) -> dict[str, Any] | None:
        with self.pool.connection() as conn:
            return conn.execute(query, params).fetchone()

    def ping(self) -> bool:
        with self.pool.connection(timeout=2) as conn:
            return conn.execute("SELECT 1 AS one").fetchone()["one"] == 1


def pretty(value: Any) -> str | None:
    return None if value is None else json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
