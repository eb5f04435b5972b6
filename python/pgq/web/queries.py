"""Every query of the dashboard, through pgq's public views and functions only.

The dashboard runs as the database role of its DSN: a role that may only read gets a
read-only dashboard (actions raise InsufficientPrivilege, shown on the page).

Counting a million queued jobs costs a scan, so the overview counts differently:
- queued and scheduled: exact up to COUNT_CAP through the claim index (pgq.jobs with
  status = 'queued' is an index-only scan of it), one range per priority (so due and
  scheduled jobs are counted without reading each other), above that the planner's estimate;
- running and waiting: their partial indexes, exact;
- oldest queued age: the first index entry of each distinct priority;
- dead: dead jobs have no index of their own, so their count is a sequential scan, run
  at most every DEAD_REFRESH seconds (or 50 times its duration) and cached;
- entrypoints: loose index scans, plus pgq.queues (which also lists entrypoints that only
  have settings; it reads the indexes only).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

COUNT_CAP = 10_000
MAX_PRIORITIES = 50  # distinct priorities walked one by one; with more, one capped scan
DEAD_REFRESH = 5.0
PAGE_SIZE = 50
LIVE = ("queued", "scheduled", "waiting", "running", "dead")
FINISHED = ("succeeded", "canceled", "failed")
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
# How far back the browser looks for finished jobs (the outcome log has BRIN indexes only).
FINISHED_WINDOWS = {"1h": "1 hour", "24h": "24 hours", "7d": "7 days"}


@dataclass
class Count:
    value: int
    estimated: bool = False
    floor: int = 0  # an estimated count is above this (what was counted exactly)


@dataclass
class Queue:
    entrypoint: str
    queued: Count = field(default_factory=lambda: Count(0))
    scheduled: Count = field(default_factory=lambda: Count(0))
    waiting: int = 0
    running: int = 0
    dead: int = 0
    oldest_queued_age: timedelta | None = None
    paused: bool = False
    per_second: float = 0.0
    succeeded: int = 0
    failed: int = 0
    dead_5m: int = 0
    canceled: int = 0
    wait_p50: timedelta | None = None
    wait_p99: timedelta | None = None
    run_p50: timedelta | None = None
    run_p99: timedelta | None = None


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


class Queries:
    def __init__(self, pool: ConnectionPool) -> None:
        self.pool = pool
        self._dead: dict[str, int] | None = None
        self._dead_at = 0.0
        self._dead_took = 0.0
        self._dead_lock = threading.Lock()
        self._dead_refreshing = False

    def _all(self, query: str, params: Any = None) -> list[dict[str, Any]]:
        with self.pool.connection() as conn:
            return conn.execute(query, params).fetchall()

    def _one(self, query: str, params: Any = None) -> dict[str, Any] | None:
        with self.pool.connection() as conn:
            return conn.execute(query, params).fetchone()

    def ping(self) -> bool:
        with self.pool.connection(timeout=2) as conn:
            return conn.execute("SELECT 1 AS one").fetchone()["one"] == 1

    # --- counts ------------------------------------------------------------------------

    def _queued(self, conn: Any, entrypoint: str) -> tuple[Count, Count, timedelta | None]:
        """Queued (due) and scheduled counts and the oldest due job's age of an entrypoint:
        per priority, index range scans of the claim index, capped; estimated above the cap."""
        p = {"ep": entrypoint, "cap": COUNT_CAP + 1, "most": MAX_PRIORITIES}
        r = conn.execute(_QUEUED, p).fetchone()
        complete = r["priorities"] < MAX_PRIORITIES
        due = self._count(conn, int(r["due"]), complete, "j.run_at <= now()", p)
        later = self._count(conn, int(r["later"]), complete, "j.run_at > now()", p)
        return due, later, r["age"]

    def _count(self, conn: Any, counted: int, complete: bool, cond: str, params: dict[str, Any]) -> Count:
        where = f"j.status = 'queued' AND j.entrypoint = %(ep)s AND {cond}"
        if not complete:  # too many priorities to walk: one capped scan instead
            counted = conn.execute(
                f"SELECT count(*) AS n FROM (SELECT 1 FROM pgq.jobs AS j WHERE {where} LIMIT %(cap)s) AS s",
                params,
            ).fetchone()["n"]
        if counted <= COUNT_CAP:
            return Count(counted)
        plan = conn.execute(f"EXPLAIN (FORMAT JSON) SELECT 1 FROM pgq.jobs AS j WHERE {where}", params)
        rows = plan.fetchone()["QUERY PLAN"][0]["Plan"]["Plan Rows"]
        return Count(max(int(rows), COUNT_CAP), estimated=True, floor=COUNT_CAP)

    def _dead_counts(self) -> dict[str, int]:
        """Dead jobs per entrypoint: a scan, cached; refreshed in the background once known."""
        now = time.monotonic()
        stale = now - self._dead_at > max(DEAD_REFRESH, 50 * self._dead_took)
        if self._dead is None:
            self._refresh_dead()
        elif stale:
            with self._dead_lock:
                start = not self._dead_refreshing
                self._dead_refreshing = True
            if start:
                threading.Thread(target=self._refresh_dead, daemon=True).start()
        return self._dead or {}

    def _refresh_dead(self) -> None:
        started = time.monotonic()
        try:
            rows = self._all(
                "SELECT j.entrypoint, count(*) AS n FROM pgq.jobs AS j WHERE j.status = 'dead' GROUP BY 1"
            )
            self._dead = {r["entrypoint"]: r["n"] for r in rows}
            self._dead_took = time.monotonic() - started
            self._dead_at = time.monotonic()
        finally:
            with self._dead_lock:
                self._dead_refreshing = False

    def forget_dead(self) -> None:
        """After an action that changes dead jobs: count them again on the next read."""
        self._dead_at = 0.0

    def entrypoints(self) -> list[str]:
        """Entrypoints with live jobs, workers, schedules or recent outcomes (index scans only)."""
        rows = self._all(
            """
            WITH RECURSIVE e AS (
                (SELECT j.entrypoint AS ep FROM pgq.jobs AS j WHERE j.status = 'queued'
                 ORDER BY j.entrypoint LIMIT 1)
                UNION ALL
                SELECT (SELECT j.entrypoint FROM pgq.jobs AS j
                        WHERE j.status = 'queued' AND j.entrypoint > e.ep ORDER BY j.entrypoint LIMIT 1)
                FROM e WHERE e.ep IS NOT NULL
            )
            SELECT ep FROM e WHERE ep IS NOT NULL
            UNION SELECT j.entrypoint FROM pgq.jobs AS j WHERE j.status = 'running'
            UNION SELECT j.entrypoint FROM pgq.jobs AS j WHERE j.status = 'waiting'
            UNION SELECT unnest(w.entrypoints) FROM pgq.workers AS w WHERE w.state = 'alive'
            UNION SELECT s.entrypoint FROM pgq.schedules AS s
            UNION SELECT o.entrypoint FROM pgq.outcomes AS o WHERE o.finished_at > now() - interval '1 hour'
            """
        )
        names = {r["ep"] for r in rows} | set(self._dead_counts())
        # pgq.queues also lists entrypoints that only have settings (paused, no jobs); it
        # reads the indexes only, so it is cheap at any size. (A role without SELECT on
        # pgq.queues, or EXECUTE on the function it counts with, still gets the rest.)
        with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
            names |= {r["entrypoint"] for r in self._all("SELECT q.entrypoint FROM pgq.queues AS q")}
        return sorted(names)

    def overview(self) -> list[Queue]:
        names = self.entrypoints()
        if not names:
            return []
        queues = {n: Queue(n) for n in names}
        dead = self._dead_counts()
        with self.pool.connection() as conn:
            for name, q in queues.items():
                q.queued, q.scheduled, q.oldest_queued_age = self._queued(conn, name)
                q.dead = dead.get(name, 0)
            for r in conn.execute(
                "SELECT j.entrypoint, count(*) FILTER (WHERE j.status = 'running') AS running,"
                " count(*) FILTER (WHERE j.status = 'waiting') AS waiting"
                " FROM pgq.jobs AS j WHERE j.status = 'running' OR j.status = 'waiting' GROUP BY 1"
            ):
                if r["entrypoint"] in queues:
                    queues[r["entrypoint"]].running = r["running"]
                    queues[r["entrypoint"]].waiting = r["waiting"]
            for r in conn.execute("SELECT * FROM pgq.settings(%s::text[])", (names,)):
                queues[r["entrypoint"]].paused = r["paused"]
            for r in conn.execute("SELECT * FROM pgq.stats('5 minutes')"):
                q = queues.get(r["entrypoint"])
                if q is None:
                    continue
                q.per_second = float(r["per_second"] or 0)
                q.succeeded, q.failed, q.dead_5m, q.canceled = (
                    r["succeeded"],
                    r["failed"],
                    r["dead"],
                    r["canceled"],
                )
                q.wait_p50, q.wait_p99 = r["wait_p50"], r["wait_p99"]
                q.run_p50, q.run_p99 = r["run_p50"], r["run_p99"]
        return list(queues.values())

    def series(self, window: str) -> dict[str, list[Any]]:
        """Throughput and latency of all entrypoints: per second over the last 5 minutes
        ('5m') or per minute over the last 24 hours ('24h'), for the charts."""
        unit, span, step = ("second", "5 minutes", 1) if window == "5m" else ("minute", "24 hours", 60)
        rows = self._all(
            f"""
            WITH buckets AS (
                SELECT extract(EPOCH FROM b)::bigint AS t FROM generate_series(
                    date_trunc('{unit}', now() - interval '{span}'), date_trunc('{unit}', now()),
                    interval '1 {unit}') AS b
            ), o AS (
                SELECT extract(EPOCH FROM date_trunc('{unit}', o.finished_at))::bigint AS t,
                    count(*) FILTER (WHERE o.outcome = 'succeeded') AS ok,
                    count(*) FILTER (WHERE o.outcome = 'failed') AS failed,
                    percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (
                        ORDER BY extract(EPOCH FROM o.started_at - o.enqueued_at))
                        FILTER (WHERE o.outcome = 'succeeded') AS wait_q,
                    percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (
                        ORDER BY extract(EPOCH FROM o.finished_at - o.started_at))
                        FILTER (WHERE o.outcome = 'succeeded') AS run_q
                FROM pgq.outcomes AS o
                WHERE o.finished_at >= date_trunc('{unit}', now() - interval '{span}')
                GROUP BY 1
            )
            SELECT b.t, coalesce(o.ok, 0) AS ok, coalesce(o.failed, 0) AS failed,
                o.wait_q, o.run_q
            FROM buckets AS b LEFT JOIN o ON o.t = b.t ORDER BY b.t
            """
        )
        keys = ("t", "ok", "failed", "wait50", "wait99", "run50", "run99")
        out: dict[str, list[Any]] = {k: [] for k in keys}
        for r in rows:
            out["t"].append(r["t"])
            out["ok"].append(r["ok"] / step)
            out["failed"].append(r["failed"] / step)
            wq, rq = r["wait_q"] or [None, None], r["run_q"] or [None, None]
            out["wait50"].append(wq[0])
            out["wait99"].append(wq[1])
            out["run50"].append(rq[0])
            out["run99"].append(rq[1])
        return out

    # --- jobs --------------------------------------------------------------------------

    def jobs(
        self,
        entrypoint: str = "",
        status: str = "",
        job_id: int | None = None,
        text: str = "",
        page: int = 1,
        window: str = "24h",
    ) -> tuple[list[dict[str, Any]], bool]:
        """One page of jobs, newest first, and whether there is a next page."""
        offset = (max(page, 1) - 1) * PAGE_SIZE
        params: dict[str, Any] = {"limit": PAGE_SIZE + 1, "offset": offset}
        where = ["TRUE"]
        if entrypoint:
            where.append("entrypoint = %(ep)s")
            params["ep"] = entrypoint
        if job_id is not None:
            where.append("id = %(id)s")
            params["id"] = job_id
        if status in FINISHED:
            if text:
                return [], False  # finished jobs keep no payload in the outcome log
            where = [w.replace("id =", "job_id =") for w in where]
            where.append("outcome = %(status)s AND finished_at > now() - %(window)s::interval")
            params.update(status=status, window=FINISHED_WINDOWS.get(window, "24 hours"))
            rows = self._all(
                "SELECT job_id AS id, entrypoint, outcome AS status, priority, attempt, deliveries,"
                " enqueued_at, finished_at AS at, error AS last_error FROM pgq.outcomes"
                f" WHERE {' AND '.join(where)}"
                " ORDER BY finished_at DESC, job_id DESC LIMIT %(limit)s OFFSET %(offset)s",
                params,
            )
        else:
            if status == "scheduled":
                where.append("status = 'queued' AND run_at > now()")
            elif status == "queued":
                where.append("status = 'queued' AND run_at <= now()")
            elif status in LIVE:
                where.append("status = %(status)s")
                params["status"] = status
            if text:
                where.append("strpos(payload::text, %(text)s) > 0")
                params["text"] = text
            rows = self._all(
                "SELECT id, entrypoint, CASE WHEN status = 'queued' AND run_at > now() THEN 'scheduled'"
                " ELSE status END AS status, priority, attempt, deliveries, enqueued_at, run_at AS at,"
                f" last_error FROM pgq.jobs WHERE {' AND '.join(where)}"
                " ORDER BY id DESC LIMIT %(limit)s OFFSET %(offset)s",
                params,
            )
        return rows[:PAGE_SIZE], len(rows) > PAGE_SIZE

    def job(self, job_id: int) -> dict[str, Any] | None:
        """A job's story: its live row, pgq.job's document (payload, headers and dependencies,
        kept for finished jobs too), every attempt in the outcome log, the jobs waiting for
        it. None when neither the hot table nor the log holds it."""
        with self.pool.connection() as conn:
            live = conn.execute("SELECT * FROM pgq.jobs WHERE id = %s", (job_id,)).fetchone()
            outcomes = conn.execute(
                "SELECT * FROM pgq.outcomes WHERE job_id = %s ORDER BY finished_at, attempt", (job_id,)
            ).fetchall()
            if live is None and not outcomes:
                return None
            dependents = conn.execute(
                "SELECT id, entrypoint, status FROM pgq.jobs"
                " WHERE status = 'waiting' AND depends_on @> ARRAY[%s::bigint] ORDER BY id",
                (job_id,),
            ).fetchall()
            # pgq.job keeps a finished job's payload, headers and dependencies (the outcome
            # log's terminal row), and says how each dependency ended.
            try:
                story = conn.execute("SELECT pgq.job(%s) AS s", (job_id,)).fetchone()["s"] or {}
            except psycopg.errors.InsufficientPrivilege:  # a role that may read the views only
                story = {
                    **(live or {}),
                    "depends_on": [{"id": d, "status": None} for d in (live or {}).get("depends_on") or []],
                }
            depends_on = [
                {"id": dep["id"], "status": dep["status"] or "unknown"}
                for dep in story.get("depends_on") or []
            ]
            held = [(live or {}).get("worker_id")] + [o["worker_id"] for o in outcomes]
            names = self._worker_names(conn, [w for w in held if w is not None])
        final = next((o for o in reversed(outcomes) if o["outcome"] != "failed"), None)
        return {
            # A job that is not running (dead, or queued for another attempt) has no start or
            # worker of its own: its last run's are in the outcome log.
            "last_run": outcomes[-1] if outcomes else None,
            "worker_names": names,
            "id": job_id,
            "live": live,
            "status": (live or {}).get("status") or (final or {}).get("outcome") or "unknown",
            "entrypoint": (live or outcomes[0])["entrypoint"],
            "outcomes": outcomes,
            "final": final,
            "depends_on": depends_on,
            "dependents": dependents,
            "payload": _pretty(story.get("payload")),
            "headers": _pretty(story.get("headers")),
            "result": _pretty(final["result"]) if final and final["result"] is not None else None,
        }

    @staticmethod
    def _worker_names(conn: Any, ids: list[Any]) -> dict[Any, str]:
        """Worker id -> name, for the ones pgq.workers still lists (histories show names)."""
        if not ids:
            return {}
        rows = conn.execute("SELECT id, name FROM pgq.workers WHERE id = ANY (%s::uuid[])", (ids,))
        return {r["id"]: r["name"] for r in rows}

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
            r["payload"] = _pretty(r["payload"])
        return rows

    def sweeps(self) -> list[dict[str, Any]]:
        """pgq.sweeps; empty for a role that may not read it (or a schema before it)."""
        try:
            return self._all("SELECT * FROM pgq.sweeps")
        except psycopg.Error:
            return []

    def settings(self) -> list[dict[str, Any]]:
        names = self.entrypoints()
        if not names:
            return []
        # SELECT * of protocol 2's form: its columns are fixed, and a later form's columns
        # show up here by moving to it, without another change.
        return self._all("SELECT * FROM pgq.settings(%s::text[], protocol => 2)", (names,))

    # --- actions (run as the DSN's role) -----------------------------------------------

    def retry(self, ids: list[int]) -> int:
        self.forget_dead()
        return self._one("SELECT pgq.retry(%s::bigint[]) AS n", (ids,))["n"]

    def cancel(self, ids: list[int]) -> int:
        self.forget_dead()
        return self._one("SELECT pgq.cancel(%s::bigint[]) AS n", (ids,))["n"]

    def dead_ids(self, entrypoint: str = "", limit: int = 1000) -> list[int]:
        rows = self._all(
            "SELECT id FROM pgq.jobs WHERE status = 'dead' AND (%(ep)s = '' OR entrypoint = %(ep)s)"
            " ORDER BY id LIMIT %(limit)s",
            {"ep": entrypoint, "limit": limit},
        )
        return [r["id"] for r in rows]

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

    def matching_ids(self, entrypoint: str, status: str, text: str, after: int, limit: int) -> list[int]:
        """Ids of the live jobs a filter of the jobs page matches, in id order after `after`:
        a bulk action on "all matching" walks them in chunks (each call takes 10000 ids at most)."""
        where = ["id > %(after)s"]
        params: dict[str, Any] = {"after": after, "limit": limit}
        if entrypoint:
            where.append("entrypoint = %(ep)s")
            params["ep"] = entrypoint
        if status == "scheduled":
            where.append("status = 'queued' AND run_at > now()")
        elif status == "queued":
            where.append("status = 'queued' AND run_at <= now()")
        elif status in LIVE:
            where.append("status = %(status)s")
            params["status"] = status
        if text:
            where.append("strpos(payload::text, %(text)s) > 0")
            params["text"] = text
        rows = self._all(
            f"SELECT id FROM pgq.jobs WHERE {' AND '.join(where)} ORDER BY id LIMIT %(limit)s", params
        )
        return [r["id"] for r in rows]

    def count_matching(self, entrypoint: str, status: str, text: str, cap: int = 1_000_000) -> int:
        n = 0
        after = 0
        while n < cap:
            ids = self.matching_ids(entrypoint, status, text, after, 10_000)
            if not ids:
                break
            n += len(ids)
            after = ids[-1]
        return n

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


# Walks the distinct priorities of an entrypoint's queued jobs (a loose index scan of the
# claim index, at most %(most)s of them); within a priority the index is ordered by run_at, so
# the due and the scheduled jobs are two ranges, counted up to %(cap)s each, and the first
# entry is the oldest.
_QUEUED = """
WITH RECURSIVE p AS (
    (SELECT j.priority AS pr FROM pgq.jobs AS j WHERE j.status = 'queued' AND j.entrypoint = %(ep)s
     ORDER BY -j.priority::bigint LIMIT 1)
    UNION ALL
    SELECT (SELECT j.priority FROM pgq.jobs AS j
            WHERE j.status = 'queued' AND j.entrypoint = %(ep)s AND -j.priority::bigint > -p.pr::bigint
            ORDER BY -j.priority::bigint LIMIT 1)
    FROM p WHERE p.pr IS NOT NULL
), per AS (
    SELECT
        (SELECT count(*) FROM (SELECT 1 FROM pgq.jobs AS j
            WHERE j.status = 'queued' AND j.entrypoint = %(ep)s AND -j.priority::bigint = -p.pr::bigint
              AND j.run_at <= now()
            LIMIT %(cap)s) AS s) AS due,
        (SELECT count(*) FROM (SELECT 1 FROM pgq.jobs AS j
            WHERE j.status = 'queued' AND j.entrypoint = %(ep)s AND -j.priority::bigint = -p.pr::bigint
              AND j.run_at > now()
            LIMIT %(cap)s) AS s) AS later,
        (SELECT j.run_at FROM pgq.jobs AS j
            WHERE j.status = 'queued' AND j.entrypoint = %(ep)s AND -j.priority::bigint = -p.pr::bigint
            ORDER BY -j.priority::bigint, j.run_at LIMIT 1) AS first_run_at
    FROM p WHERE p.pr IS NOT NULL
    LIMIT %(most)s
)
SELECT coalesce(sum(per.due), 0) AS due, coalesce(sum(per.later), 0) AS later, count(*) AS priorities,
    now() - min(per.first_run_at) FILTER (WHERE per.first_run_at <= now()) AS age
FROM per
"""


def _pretty(value: Any) -> str | None:
    return None if value is None else json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
