"""`pgq doctor`'s checks of the queue at work: workers that died holding jobs, jobs past
their timeout, a long transaction holding back vacuum, dead rows and bloated indexes of
pgq._jobs, backlogs with their reason, tomorrow's outcome partition.

Each check reads and returns what it found, with thresholds from Limits; none may change
the database (the fixes are named for a person to run).
"""

from __future__ import annotations

from datetime import timedelta

import psycopg

from ..preflight import extension_version
from .base import Found, Limits, one, when


def check_workers(conn: psycopg.Connection, limits: Limits) -> Found:
    found: Found = []
    lost = conn.execute(
        "SELECT w.name, w.state, count(*) FROM pgq._jobs j JOIN pgq._workers w ON w.id = j.worker_id"
        " JOIN pgq.queues q ON q.entrypoint = j.entrypoint WHERE j.status = 'running'"
        " AND (w.state <> 'alive' OR w.heartbeat_at < now() - q.lease) GROUP BY 1, 2 ORDER BY 1"
    ).fetchall()
    for name, state, n in lost:
        state = "dead" if state == "alive" else state
        found.append(
            (
                f"worker {name} is {state} (no heartbeat within its lease) but holds {n} jobs",
                "the sweeps should re-queue them: SELECT pgq.reap(); check that pg_cron runs it",
            )
        )
    late = conn.execute(
        "SELECT j.entrypoint, count(*), max(now() - j.started_at) FROM pgq._jobs j"
        " JOIN pgq.queues q ON q.entrypoint = j.entrypoint WHERE j.status = 'running'"
        " AND j.started_at < now() - q.timeout GROUP BY 1 ORDER BY 1"
    ).fetchall()
    for entrypoint, n, age in late:
        found.append(
            (
                f"{n} {entrypoint} jobs running past their timeout (longest {age})",
                "see which worker holds them (pgq.jobs); cancel them or raise the timeout (pgq configure)",
            )
        )
    return found


def check_xmin_horizon(conn: psycopg.Connection, limits: Limits) -> Found:
    row = conn.execute(
        "SELECT pid, usename, now() - xact_start, age(backend_xmin), left(query, 200) FROM pg_stat_activity"
        " WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid() AND xact_start < now() - %s"
        " ORDER BY age(backend_xmin) DESC LIMIT 1",
        (limits.max_xact_age,),
    ).fetchone()
    if row is None:
        return []
    pid, user, age, xids, query = row
    return [
        (
            f"transaction of pid {pid} ({user}) open for {age} holds back the xmin horizon by {xids}"
            " transactions (vacuum cannot clean pgq's tables behind it, and sweeps slow down):"
            f" {' '.join(str(query).split())}",
            f"end it in its application, or SELECT pg_terminate_backend({pid})",
        )
    ]


def check_bloat(conn: psycopg.Connection, limits: Limits) -> Found:
    """Each partition of pgq._jobs on its own: autovacuum vacuums partitions, not the
    partitioned table."""
    rows = conn.execute(
        "SELECT s.relid::regclass::text, s.n_live_tup, s.n_dead_tup, s.last_autovacuum"
        " FROM pg_partition_tree('pgq._jobs') AS p JOIN pg_stat_all_tables AS s ON s.relid = p.relid"
        " WHERE p.isleaf ORDER BY 1"
    ).fetchall()
    return [
        (
            f"{table} has {dead} dead row versions for {live} live ones (last autovacuum {last})",
            f"look for a long transaction (see above) or stalled autovacuum; VACUUM {table}",
        )
        for table, live, dead, last in rows
        if dead > limits.max_dead_tuples and dead > limits.dead_tuple_ratio * (live + 1)
    ]


def check_backlog(conn: psycopg.Connection, limits: Limits) -> Found:
    """Entrypoints whose oldest due job has waited past limits.max_queue_age, each with
    why: paused (a forgotten `pgq pause`), no live worker serving it (registered with it
    and heartbeating within the lease), or workers that do not keep up. The counts are
    pgq.queues' (an estimate above its exact limit, shown with ~)."""
    rows = conn.execute(
        "SELECT q.entrypoint, q.queued, q.approximate, q.oldest_queued_age, q.paused,"
        "  q.concurrency IS NULL AND q.rate IS NULL,"
        "  (SELECT s.updated_at FROM pgq._queues AS s WHERE s.entrypoint = q.entrypoint),"
        "  (SELECT count(*) FROM pgq._workers AS w WHERE w.state = 'alive'"
        "     AND q.entrypoint = ANY (w.entrypoints) AND w.heartbeat_at > now() - q.lease)"
        " FROM pgq.queues AS q WHERE q.queued > 0 AND q.oldest_queued_age > %s ORDER BY 1",
        (limits.max_queue_age,),
    ).fetchall()
    found: Found = []
    # pgq.isolate refuses where pgq is the extension.
    may_isolate = extension_version(conn) is None
    for entrypoint, queued, approximate, age, paused, unlimited, since, workers in rows:
        backlog = (
            f"{entrypoint}: {'~' if approximate else ''}{queued} jobs due, the oldest waiting"
            f" {_age(age)} (over {_age(limits.max_queue_age)})"
        )
        if paused:
            found.append(
                (
                    f"{backlog}: paused (settings last changed {when(since)})",
                    f"`pgq resume {entrypoint}` if the pause is over (SELECT pgq.resume('{entrypoint}'))",
                )
            )
        elif not workers:
            found.append(
                (
                    f"{backlog}: no live worker serves it",
                    f"start a worker with a handler for {entrypoint} (pgq.workers lists the"
                    " entrypoints of each), or cancel its jobs if the name is wrong",
                )
            )
        else:
            more = (
                "add workers or concurrency, or check its concurrency and rate limits"
                f" (`pgq configure {entrypoint}`)"
            )
            # Limits cap what the workers may take: pages of its own would not raise that.
            sparse = _sparse(conn, entrypoint) if unlimited and may_isolate else None
            if sparse is None:
                found.append((f"{backlog}: its {workers} live workers do not keep up", more))
            else:
                found.append(
                    (
                        f"{backlog}: its {workers} live workers do not keep up, and its next jobs"
                        f" lie {sparse[0]:.0f} to a heap page of the shared partition, whose pages hold"
                        f" {sparse[1]:.0f} rows (claims and completions write a page per"
                        f" {sparse[0]:.0f} jobs)",
                        f"`pgq isolate {entrypoint}` (a partition of its own, where its jobs fill"
                        " their pages; the move locks the job table while it reads the shared"
                        " partition: 0.2 s for 10,000 jobs among a million, docs/scaling.md),"
                        f" or {more}",
                    )
                )
    return found


def _sparse(conn: psycopg.Connection, entrypoint: str) -> tuple[float, float] | None:
    """(jobs of the entrypoint, rows) per heap page, for its next 1,000 due jobs in the
    shared partition, when it has that many there and they are under a quarter of the
    partition's rows per page (as ANALYZE last counted them): then each job costs a page
    (a full-page image in the WAL after every checkpoint), which a partition of its own
    would share among its neighbours (the bench: 0.6x of a lone backlog's rate against
    0.9x). Fewer jobs say little of the layout, and drain in moments either way."""
    row = conn.execute(
        "SELECT count(*)::float8 / count(DISTINCT (s.ctid::text::point)[0]),"
        "  (SELECT c.reltuples / nullif(c.relpages, 0) FROM pg_class AS c"
        "   WHERE c.oid = 'pgq._jobs_default'::regclass)"
        " FROM (SELECT j.ctid FROM pgq._jobs_default AS j WHERE j.entrypoint = %s AND j.status = 'queued'"
        "  ORDER BY j.entrypoint, -j.priority::bigint, j.run_at, j.id LIMIT 1000) AS s"
        " HAVING count(*) = 1000",
        (entrypoint,),
    ).fetchone()
    if row is None or row[1] is None or row[0] >= row[1] / 4:
        return None
    return row[0], row[1]


def _age(td: timedelta) -> str:
    """An age to the second: 1h02m03s, 4m00s, 12s."""
    secs = int(td.total_seconds())
    hours, rest = divmod(secs, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


# Room an index entry of pgq._jobs takes at most, generously (header, key columns, line
# pointer, half-empty pages after splits): what the live rows need is rows times this.
_INDEX_BYTES_PER_ROW = 200
_INDEX_MIN_BYTES = 64 * 1024


def check_index_bloat(conn: psycopg.Connection, limits: Limits) -> Found:
    """Indexes of pgq._jobs far larger than its live rows need. A B-tree keeps its size
    after a backlog drains (VACUUM only marks its empty pages reusable), and the claim
    scans its empty pages: a drained 5M backlog left a 424 MB claim index for zero rows.
    Measured without extensions: pg_relation_size of each index against the live rows
    (the larger of pg_class.reltuples and the statistics' n_live_tup, so that a stale
    estimate errs towards quiet)."""
    rows = conn.execute(
        "SELECT i.indexrelid::regclass::text, i.indrelid::regclass::text, pg_relation_size(i.indexrelid),"
        "  greatest(c.reltuples, s.n_live_tup, 0)::bigint"
        " FROM pg_partition_tree('pgq._jobs') AS p JOIN pg_index AS i ON i.indrelid = p.relid"
        " JOIN pg_class AS c ON c.oid = i.indrelid JOIN pg_stat_all_tables AS s ON s.relid = i.indrelid"
        " WHERE p.isleaf ORDER BY 3 DESC, 1"
    ).fetchall()
    found: Found = []
    for index, table, size, live in rows:
        need = _INDEX_MIN_BYTES + live * _INDEX_BYTES_PER_ROW
        if size - need > limits.max_index_excess:
            found.append(
                (
                    f"index {index} takes {_bytes(size)} for about {live} live rows of {table}"
                    f" (they need at most {_bytes(need)}): left from a backlog that drained;"
                    " claims and sweeps read its empty pages",
                    f"REINDEX INDEX CONCURRENTLY {index}",
                )
            )
    return found


def _bytes(n: int) -> str:
    """A size as PostgreSQL's pg_size_pretty would print it, roughly: 424.0 MB."""
    size = float(n)
    for unit in ("B", "kB", "MB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def check_partitions(conn: psycopg.Connection, limits: Limits) -> Found:
    name = one(conn, "SELECT 'pgq._outcomes_' || to_char((now() AT TIME ZONE 'UTC')::date + 1, 'YYYYMMDD')")
    if one(conn, "SELECT to_regclass(%s)", (name,)) is None:
        return [
            (
                f"tomorrow's outcome partition {name} is missing (prune has not run)",
                "SELECT pgq.prune(); check that pg_cron or a worker runs the sweeps",
            )
        ]
    return []
