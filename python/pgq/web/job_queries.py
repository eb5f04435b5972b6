"""The jobs pages' queries: the jobs browser (live jobs and the outcome log), a job's
story, and the ids a bulk action on "all matching" walks.

Jobs are listed newest first with keyset pagination (a page starts below the last id of
the page before), so the thousandth page costs what the first does. A payload search reads
at most SEARCH_SPAN jobs per page (the newest first, below the page's start): it is bounded,
not indexed, and the page says where it stopped so that the next page goes on from there.
Only reads: the actions on jobs are pgq's functions, called from queries.Queries.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import psycopg

from .pool import Reader, pretty

PAGE_SIZE = 50
SEARCH_SPAN = 100_000  # jobs a payload search reads per page at most
LIVE = ("queued", "scheduled", "waiting", "running", "dead")
FINISHED = ("succeeded", "canceled", "failed")
# How far back the browser looks for finished jobs (the outcome log has BRIN indexes only).
FINISHED_WINDOWS = {"1h": "1 hour", "24h": "24 hours", "7d": "7 days"}


class JobQueries(Reader):
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
            "payload": pretty(story.get("payload")),
            "headers": pretty(story.get("headers")),
            "result": pretty(final["result"]) if final and final["result"] is not None else None,
            "progress": story.get("progress"),
            "steps": [{**s, "result": pretty(s.get("result"))} for s in story.get("steps") or []],
            "reasons": reasons,
        }

    @staticmethod
    def _worker_names(conn: Any, ids: list[Any]) -> dict[Any, str]:
        """Worker id -> name, for the ones pgq.workers still lists (histories show names)."""
        if not ids:
            return {}
        rows = conn.execute("SELECT id, name FROM pgq.workers WHERE id = ANY (%s::uuid[])", (ids,))
        return {r["id"]: r["name"] for r in rows}

    def dead_ids(self, entrypoint: str = "", limit: int = 1000) -> list[int]:
        rows = self._all(
            "SELECT id FROM pgq.jobs WHERE status = 'dead' AND (%(ep)s = '' OR entrypoint = %(ep)s)"
            " ORDER BY id LIMIT %(limit)s",
            {"ep": entrypoint, "limit": limit},
        )
        return [r["id"] for r in rows]

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


@dataclass
class JobPage:
    """A page of the jobs browser; `next`: the cursor of the next (older) page, or None."""

    rows: list[dict[str, Any]]
    next: str | None
    # A payload search that read a whole span of jobs without filling the page: how many
    # it read (the page says so; the next page searches further down).
    searched: int = 0
