"""Every query of the dashboard, through pgq's public views and functions only.

The dashboard runs as the database role of its DSN: a role that may only read gets a
read-only dashboard (actions raise InsufficientPrivilege, shown on the page).

Counts come from pgq.queues, as for `pgq status` and psql, so that every view of the queue
gives one number: exact up to pgq.queues_exact_limit per entrypoint and state (100,000 by
default), above it an estimate, marked as one (the row's `approximate`). pgq.queues reads
the partial indexes only (dead jobs have theirs, _jobs_dead_idx), so no count here scans
the job table and nothing is cached.

Entrypoint names are chosen by whoever enqueues, so there may be tens of thousands: pages
that list them show PAGE_SIZE at a time, by name, with a search (a substring).

Jobs are listed newest first with keyset pagination (a page starts below the last id of
the page before), so the thousandth page costs what the first does. A payload search reads
at most SEARCH_SPAN jobs per page (the newest first, below the page's start): it is bounded,
not indexed, and the page says where it stopped so that the next page goes on from there.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

EXACT_LIMIT = 100_000  # pgq.queues_exact_limit's default: counts up to it are exact
PAGE_SIZE = 50
ENTRYPOINT_PAGE = 100  # entrypoints per page of the overview and the settings
SEARCH_SPAN = 100_000  # jobs a payload search reads per page at most
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
    dead: Count = field(default_factory=lambda: Count(0))
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
    approximate: bool = False  # some count of the row is an estimate (pgq.queues)


@dataclass
class Overview:
    """One page of the overview: its queues, and what all entrypoints hold together."""

    queues: list[Queue]
    entrypoints: int  # how many entrypoints match (all pages)
    search: str = ""
    page: int = 1
    pages: int = 1
    totals: dict[str, int] = field(default_factory=dict)  # jobs by state, every entrypoint
    approximate: bool = False  # some total is an estimate
    oldest_queued_age: timedelta | None = None  # the oldest due job of any entrypoint


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

    def queues(self) -> tuple[list[dict[str, Any]], int]:
        """Every row of pgq.queues (counts and settings of each entrypoint with live jobs or
        settings), and the exact limit in force (counts above it may be estimates)."""
        with self.pool.connection() as conn:
            rows = conn.execute("SELECT * FROM pgq.queues").fetchall()
            setting = conn.execute("SELECT current_setting('pgq.queues_exact_limit', TRUE) AS s").fetchone()[
                "s"
            ]
        limit = int(setting) if setting and setting.strip().isdigit() else EXACT_LIMIT
        return rows, limit

    def entrypoints(self, search: str = "", after: str = "", limit: int | None = None) -> list[str]:
        """Entrypoints with live jobs or settings (pgq.queues), recent outcomes (pgq.stats),
        alive workers or schedules, by name: those containing `search`, after `after`, at
        most `limit` (None: all)."""
        # Names only: with a limit of 0, pgq.queues reads one index entry per entrypoint and
        # state instead of counting (the counts are not shown here).
        with self.pool.connection() as conn, conn.transaction():
            conn.execute("SET LOCAL pgq.queues_exact_limit = 0")
            names = {r["entrypoint"] for r in conn.execute("SELECT q.entrypoint FROM pgq.queues AS q")}
        names |= self._other_entrypoints()
        out = sorted(n for n in names if search in n and n > after)
        return out if limit is None else out[:limit]

    def _other_entrypoints(self) -> set[str]:
        """Entrypoints known without live jobs: recent outcomes, alive workers, schedules."""
        rows = self._all(
            "SELECT s.entrypoint AS ep FROM pgq.stats('1 hour') AS s"
            " UNION SELECT unnest(w.entrypoints) FROM pgq.workers AS w WHERE w.state = 'alive'"
            " UNION SELECT s.entrypoint FROM pgq.schedules AS s"
        )
        return {r["ep"] for r in rows}

    def overview(self, search: str = "", page: int = 1, size: int = ENTRYPOINT_PAGE) -> Overview:
        """A page of entrypoints (containing `search`), the busiest first (most live jobs,
        then by name), with their counts from pgq.queues and their last 5 minutes from
        pgq.stats; and the totals of all entrypoints. pgq.queues is read whole (it counts
        every entrypoint in one pass anyway), so the page is a slice in memory."""
        rows, limit = self.queues()
        by_name = {r["entrypoint"]: r for r in rows}
        stats = {r["entrypoint"]: r for r in self.stats()}
        names = [n for n in by_name.keys() | stats.keys() | self._other_entrypoints() if search in n]

        def live(name: str) -> int:
            r = by_name.get(name)
            return sum(int(r[s]) for s in ("queued", "scheduled", "waiting", "running", "dead")) if r else 0

        names.sort(key=lambda n: (-live(n), n))
        pages = max(1, -(-len(names) // size))
        page = min(max(page, 1), pages)
        result = Overview(
            queues=[
                _queue(n, by_name.get(n), stats.get(n), limit) for n in names[(page - 1) * size : page * size]
            ],
            entrypoints=len(names),
            search=search,
            page=page,
            pages=pages,
            totals={
                s: sum(int(r[s]) for r in rows) for s in ("queued", "scheduled", "waiting", "running", "dead")
            },
            approximate=any(r["approximate"] for r in rows),
            oldest_queued_age=max(
                (r["oldest_queued_age"] for r in rows if r["oldest_queued_age"]), default=None
            ),
        )
        return result

    def queue(self, name: str) -> Queue | None:
        """One entrypoint's row of the overview (its pgq.queues counts and last 5 minutes),
        None when neither knows it."""
        rows, limit = self.queues()
        row = next((r for r in rows if r["entrypoint"] == name), None)
        stats = next((r for r in self.stats() if r["entrypoint"] == name), None)
        if row is None and stats is None:
            return None
        return _queue(name, row, stats, limit)

    def stats(self, since: str = "5 minutes") -> list[dict[str, Any]]:
        """pgq.stats(since): per entrypoint, outcomes and latency percentiles of the window."""
        return self._all("SELECT * FROM pgq.stats(%s::interval)", (since,))

    def outcome_totals(self) -> list[dict[str, Any]]:
        """pgq.outcome_totals: finished jobs by entrypoint and outcome since the install
        (cumulative: never lower from one read to the next)."""
        return self._all("SELECT * FROM pgq.outcome_totals")

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
        before: str = "",
        window: str = "24h",
    ) -> JobPage:
        """One page of jobs, newest first, starting below the cursor `before` (keyset: the
        last row's id, or finished time and id, of the page before; '' for the first page)."""
        params: dict[str, Any] = {"limit": PAGE_SIZE + 1}
        where = ["TRUE"]
        if entrypoint:
            where.append("entrypoint = %(ep)s")
            params["ep"] = entrypoint
        if job_id is not None:
            where.append("id = %(id)s")
            params["id"] = job_id
        if status in FINISHED:
            if text:
                return JobPage([], None)  # finished jobs keep no payload in the outcome log
            where = [w.replace("id =", "job_id =") for w in where]
            where.append("outcome = %(status)s AND finished_at > now() - %(window)s::interval")
            params.update(status=status, window=FINISHED_WINDOWS.get(window, "24 hours"))
            at, _, last = before.rpartition(",")
            if at and last.isdigit():
                where.append("(finished_at, job_id) < (%(at)s::timestamptz, %(last)s::bigint)")
                params.update(at=at, last=int(last))
            rows = self._all(
                "SELECT job_id AS id, entrypoint, outcome AS status, priority, attempt, deliveries,"
                " enqueued_at, finished_at AS at, error AS last_error FROM pgq.outcomes"
                f" WHERE {' AND '.join(where)}"
                " ORDER BY finished_at DESC, job_id DESC LIMIT %(limit)s",
                params,
            )
            more = len(rows) > PAGE_SIZE
            rows = rows[:PAGE_SIZE]
            cursor = f"{rows[-1]['at'].isoformat()},{rows[-1]['id']}" if more else None
            return JobPage(rows, cursor)
        if status == "scheduled":
            where.append("status = 'queued' AND run_at > now()")
        elif status == "queued":
            where.append("status = 'queued' AND run_at <= now()")
        elif status in LIVE:
            where.append("status = %(status)s")
            params["status"] = status
        if before.isdigit():
            where.append("id < %(before)s")
            params["before"] = int(before)
        columns = (
            "id, entrypoint, CASE WHEN status = 'queued' AND run_at > now() THEN 'scheduled'"
            " ELSE status END AS status, priority, attempt, deliveries, enqueued_at, run_at AS at, last_error"
        )
        if not text:
            rows = self._all(
                f"SELECT {columns} FROM pgq.jobs WHERE {' AND '.join(where)}"
                " ORDER BY id DESC LIMIT %(limit)s",
                params,
            )
            more = len(rows) > PAGE_SIZE
            return JobPage(rows[:PAGE_SIZE], str(rows[PAGE_SIZE - 1]["id"]) if more else None)
        # A payload search reads at most SEARCH_SPAN jobs (newest first, an index scan of the
        # primary key), then says where it stopped: the next page goes on below that.
        params.update(text=text, span=SEARCH_SPAN)
        with self.pool.connection() as conn:
            span = conn.execute(
                "SELECT min(s.id) AS low, count(*) AS n FROM (SELECT j.id FROM pgq.jobs AS j"
                f" WHERE {' AND '.join(where)} ORDER BY j.id DESC LIMIT %(span)s) AS s",
                params,
            ).fetchone()
            if not span["n"]:
                return JobPage([], None)
            params["low"] = span["low"]
            rows = conn.execute(
                f"SELECT {columns} FROM pgq.jobs WHERE {' AND '.join(where)} AND id >= %(low)s"
                " AND strpos(payload::text, %(text)s) > 0 ORDER BY id DESC LIMIT %(limit)s",
                params,
            ).fetchall()
        if len(rows) > PAGE_SIZE:
            return JobPage(rows[:PAGE_SIZE], str(rows[PAGE_SIZE - 1]["id"]))
        if span["n"] < SEARCH_SPAN:  # the span reached the oldest job: no more pages
            return JobPage(rows, None)
        # The page searched a whole span: the next page searches the span below it.
        return JobPage(rows, str(span["low"]), searched=int(span["n"]))

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
            # Why a live job is not running now (pgq.explain), for a role that may ask.
            reasons: list[dict[str, Any]] = []
            if live is not None and story:
                with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
                    reasons = conn.execute(
                        "SELECT reason, detail, until FROM pgq.explain(%s)", (job_id,)
                    ).fetchall()
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
            "progress": story.get("progress"),
            "steps": [{**s, "result": _pretty(s.get("result"))} for s in story.get("steps") or []],
            "reasons": reasons,
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


@dataclass
class JobPage:
    """A page of the jobs browser; `next`: the cursor of the next (older) page, or None."""

    rows: list[dict[str, Any]]
    next: str | None
    # A payload search that read a whole span of jobs without filling the page: how many
    # it read (the page says so; the next page searches further down).
    searched: int = 0


def _queue(name: str, row: dict[str, Any] | None, stats: dict[str, Any] | None, limit: int) -> Queue:
    """A Queue of the overview from its pgq.queues row and pgq.stats row (either may be
    missing). In an approximate row, a count above the exact limit is the estimate."""
    q = Queue(name)
    if row is not None:
        approx = bool(row["approximate"])

        def count(value: int) -> Count:
            return Count(int(value), estimated=approx and value > limit, floor=limit)

        q.queued, q.scheduled, q.dead = count(row["queued"]), count(row["scheduled"]), count(row["dead"])
        q.waiting, q.running = int(row["waiting"]), int(row["running"])
        q.oldest_queued_age, q.paused, q.approximate = row["oldest_queued_age"], bool(row["paused"]), approx
    if stats is not None:
        q.per_second = float(stats["per_second"] or 0)
        q.succeeded, q.failed, q.dead_5m, q.canceled = (
            stats["succeeded"],
            stats["failed"],
            stats["dead"],
            stats["canceled"],
        )
        q.wait_p50, q.wait_p99 = stats["wait_p50"], stats["wait_p99"]
        q.run_p50, q.run_p99 = stats["run_p50"], stats["run_p99"]
    return q


def _pretty(value: Any) -> str | None:
    return None if value is None else json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
