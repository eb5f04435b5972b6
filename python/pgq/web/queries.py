"""Every query of the dashboard, through pgq's public views and functions only.

The dashboard runs as the database role of its DSN: a role that may only read gets a
read-only dashboard (actions raise InsufficientPrivilege, shown on the page).

The queries of each page live by page: overview_queries (counts, stats, series),
job_queries (the jobs browser, a job's story), this module the rest (workers, schedules,
settings) and the actions, which call pgq's functions; pool.py runs them. Queries is the
one class the app uses, made of those parts.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from .job_queries import FINISHED, FINISHED_WINDOWS, LIVE, PAGE_SIZE, SEARCH_SPAN, JobPage, JobQueries
from .overview_queries import ENTRYPOINT_PAGE, EXACT_LIMIT, Count, Overview, OverviewQueries, Queue
from .pool import make_pool, pretty

__all__ = [
    "ACTIONS",
    "ENTRYPOINT_PAGE",
    "EXACT_LIMIT",
    "FINISHED",
    "FINISHED_WINDOWS",
    "LIVE",
    "PAGE_SIZE",
    "SEARCH_SPAN",
    "SETTINGS",
    "Count",
    "JobPage",
    "Overview",
    "Queries",
    "Queue",
    "make_pool",
]

# pgq's functions behind the dashboard's actions (Queries.may tells which the role may run).
ACTIONS = ("retry", "cancel", "run_now", "pause", "resume", "configure", "trigger_schedule")
# The settings the dashboard edits: pgq.configure's arguments and their SQL types.
SETTINGS = {
    "max_attempts": "integer",
    "backoff_base": "interval",
    "backoff_max": "interval",
    "lease": "interval",
    "timeout": "interval",
    "concurrency": "integer",
    "rate": "numeric",
    "retention": "interval",
    "max_deliveries": "integer",
    "key_concurrency": "integer",
    "max_snoozes": "integer",
}


class Queries(OverviewQueries, JobQueries):
    """Every query of the dashboard: the pages' (by part) and the actions."""

    def workers(self) -> list[dict[str, Any]]:
        return self._all("SELECT * FROM pgq.workers LIMIT 500")

    def running_by_worker(self) -> dict[Any, list[int]]:
        rows = self._all(
            "SELECT worker_id, array_agg(id ORDER BY id) AS ids FROM pgq.jobs"
            " WHERE status = 'running' GROUP BY worker_id"
        )
        return {r["worker_id"]: r["ids"][:20] for r in rows}

    def schedules(self) -> list[dict[str, Any]]:
        rows = self._all("SELECT * FROM pgq.schedules")
        for r in rows:
            r["payload"] = pretty(r["payload"])
        return rows

    def sweeps(self) -> list[dict[str, Any]]:
        """pgq.sweeps; empty for a role that may not read it (or a schema before it)."""
        try:
            return self._all("SELECT * FROM pgq.sweeps")
        except psycopg.Error:
            return []

    def settings(self, search: str = "", after: str = "") -> list[dict[str, Any]]:
        """The settings of a page of entrypoints (ENTRYPOINT_PAGE + 1 rows at most: one more
        than a page says that there is a next one)."""
        names = self.entrypoints(search, after, ENTRYPOINT_PAGE + 1)
        if not names:
            return []
        # SELECT * of protocol 2's form: its columns are fixed, and a later form's columns
        # show up here by moving to it, without another change.
        return self._all("SELECT * FROM pgq.settings(%s::text[], protocol => 2)", (names,))

    # --- actions (run as the DSN's role) -----------------------------------------------

    def retry(self, ids: list[int]) -> int:
        return self._one("SELECT pgq.retry(%s::bigint[]) AS n", (ids,))["n"]

    def cancel(self, ids: list[int]) -> int:
        return self._one("SELECT pgq.cancel(%s::bigint[]) AS n", (ids,))["n"]

    def run_now(self, ids: list[int]) -> int:
        return self._one("SELECT pgq.run_now(%s::bigint[]) AS n", (ids,))["n"]

    def trigger_schedule(self, name: str) -> int:
        return self._one("SELECT pgq.trigger_schedule(%s) AS id", (name,))["id"]

    def may(self) -> dict[str, bool]:
        """Which of pgq's actions the dashboard's role may run (EXECUTE on the function, any
        form of it): the pages offer only those. A role that may only read gets no buttons
        and no edit forms, and its POSTs are refused before any call."""
        rows = self._all(
            "SELECT p.proname AS name, bool_or(has_function_privilege(p.oid, 'EXECUTE')) AS ok"
            " FROM pg_catalog.pg_proc AS p"
            " WHERE p.pronamespace = 'pgq'::regnamespace AND p.proname = ANY (%s::text[]) GROUP BY 1",
            (list(ACTIONS),),
        )
        found = {r["name"]: r["ok"] for r in rows}
        return {name: bool(found.get(name)) for name in ACTIONS}

    def role(self) -> str:
        return self._one("SELECT current_user AS r")["r"]

    def entrypoint_settings(self, entrypoint: str) -> dict[str, Any] | None:
        rows = self._all("SELECT * FROM pgq.settings(ARRAY[%s]::text[], protocol => 2)", (entrypoint,))
        return rows[0] if rows else None

    def configure(self, entrypoint: str, changes: dict[str, str]) -> None:
        """pgq.configure with the named arguments given (as text, cast to their types)."""
        args = [sql.SQL("entrypoint => %s")]
        params: list[Any] = [entrypoint]
        for name, value in changes.items():
            args.append(sql.SQL("{} => %s::{}").format(sql.Identifier(name), sql.SQL(SETTINGS[name])))
            params.append(value)
        query = sql.SQL("SELECT pgq.configure({}) AS ok").format(sql.SQL(", ").join(args))
        with self.pool.connection() as conn:
            conn.execute(query, params)

    def worker(self, worker_id: str) -> dict[str, Any] | None:
        return self._one("SELECT * FROM pgq.workers WHERE id = %s::uuid", (worker_id,))

    def worker_history(self, worker_id: str, limit: int = 50) -> list[dict[str, Any]]:
        """The worker's last runs in the outcome log (the last day: the log has BRIN indexes only)."""
        return self._all(
            "SELECT job_id, entrypoint, outcome, attempt, started_at, finished_at, error FROM pgq.outcomes"
            " WHERE worker_id = %s::uuid AND finished_at > now() - interval '1 day'"
            " ORDER BY finished_at DESC LIMIT %s",
            (worker_id, limit),
        )

    def running_of(self, worker_id: str) -> list[dict[str, Any]]:
        return self._all(
            "SELECT id, entrypoint, started_at, attempt FROM pgq.jobs"
            " WHERE status = 'running' AND worker_id = %s::uuid ORDER BY id LIMIT 200",
            (worker_id,),
        )

    def schedules_of(self, entrypoint: str) -> list[dict[str, Any]]:
        return self._all("SELECT * FROM pgq.schedules WHERE entrypoint = %s ORDER BY name", (entrypoint,))

    def pause(self, entrypoint: str) -> None:
        self._one("SELECT pgq.pause(%s) AS ok", (entrypoint,))

    def resume(self, entrypoint: str) -> None:
        self._one("SELECT pgq.resume(%s) AS ok", (entrypoint,))
