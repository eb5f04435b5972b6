"""`pgq doctor`'s checks of the sweeps (pgq.cron): scheduled in pg_cron, its launcher
running, each run on time and without failing, no jobs left for dropped databases, and
sweeps left in cron.job while pg_cron is not loaded.

Each check reads and returns what it found; none may change the database or pg_cron's
jobs (pgq.cron schedules them, at install and upgrade).
"""

from __future__ import annotations

from datetime import timedelta

import psycopg

from .. import cron as pgcron
from .base import Found, Limits, one, when

# How often pg_cron runs each sweep (pgq.cron.CRON_JOBS): one that has not run for twice
# that is reported.
SWEEP_EVERY = {
    "reap": timedelta(minutes=1),
    "run-schedules": timedelta(minutes=1),
    "prune": timedelta(hours=1),
}
_RESTART_CRON = (
    "see the server log for why (pg_cron's launcher logs its errors there); check"
    " shared_preload_libraries and cron.database_name, then restart PostgreSQL; meanwhile"
    " running a `pgq worker` sweeps (or SELECT pgq.reap(), pgq.run_schedules())"
)


def _last_runs(conn: psycopg.Connection) -> str:
    """When the queue database last saw its sweeps run (pgq.sweeps), for the report."""
    try:
        rows = conn.execute("SELECT sweep, last_run FROM pgq.sweeps ORDER BY sweep").fetchall()
    except psycopg.Error:
        return "pgq.sweeps is missing: run `pgq upgrade`"
    return "; ".join(f"{sweep} last ran {when(last_run)}" for sweep, last_run in rows)


def _scheduled_without_cron(conn: psycopg.Connection, dsn: str) -> Found:
    """pg_cron not loaded: fine when the sweeps were never scheduled (the workers sweep),
    a problem when cron.job holds them: nothing runs them, whatever `cron.job` says."""
    dbname = conn.info.dbname
    names = [pgcron.job_name(name, dbname) for name, _, _ in pgcron.CRON_JOBS]
    for database in dict.fromkeys((dbname, "postgres")):
        try:
            with pgcron.cron_connection(conn, dsn, database) as c:
                if c is None:
                    continue
                n = c.execute(
                    "SELECT count(*) FROM cron.job WHERE jobname = ANY(%s) AND active", (names,)
                ).fetchone()[0]
        except psycopg.Error:
            continue
        if n:
            return [
                (
                    f"pg_cron is not loaded (shared_preload_libraries), but {n} pgq sweeps are"
                    f" scheduled in cron.job of database {database!r}: none runs"
                    f" ({_last_runs(conn)})",
                    "add pg_cron to shared_preload_libraries and restart PostgreSQL; meanwhile"
                    " running a `pgq worker` sweeps",
                )
            ]
    return []


def check_sweeps(conn: psycopg.Connection, limits: Limits, dsn: str = "") -> Found:
    plan = pgcron.inspect(conn, dsn)
    if plan.database is None:
        if pgcron.cron_database(conn) is None:  # not loaded (a role that may read the settings)
            return _scheduled_without_cron(conn, dsn)
        return []  # no usable pg_cron: the workers sweep (install said so)
    dbname = conn.info.dbname
    found: Found = []
    with pgcron.cron_connection(conn, dsn, plan.database) as c:
        assert c is not None
        names = [pgcron.job_name(name, dbname) for name, _, _ in pgcron.CRON_JOBS]
        have = {
            r[0]
            for r in c.execute("SELECT jobname FROM cron.job WHERE jobname = ANY(%s) AND active", (names,))
        }
        if set(names) - have:
            missing = ", ".join(sorted(set(names) - have))
            found.append((f"pg_cron sweeps not scheduled: {missing}", "run `pgq upgrade`"))
        launchers = c.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_cron launcher'"
        ).fetchone()[0]
        if have and not launchers:
            found.append(
                (
                    f"pg_cron is loaded but its launcher is not running: no sweep runs ({_last_runs(conn)})",
                    _RESTART_CRON,
                )
            )
        found += _late_sweeps(conn, c, dbname, have)
        failed = c.execute(
            "SELECT j.jobname, count(*), max(d.return_message) FROM cron.job_run_details d"
            " JOIN cron.job j ON j.jobid = d.jobid WHERE j.jobname = ANY(%s) AND d.status = 'failed'"
            " AND d.start_time > now() - interval '1 hour' GROUP BY 1 ORDER BY 1",
            (names,),
        ).fetchall()
        for job, n, message in failed:
            found.append(
                (
                    f"pg_cron job {job} failed {n} times in the last hour: {' '.join(str(message).split())}",
                    "run its command by hand to see why; `pgq doctor` lists other causes",
                )
            )
        orphans = [
            r[0]
            for r in c.execute(
                "SELECT jobname FROM cron.job WHERE jobname LIKE 'pgq-%%'"
                " AND database NOT IN (SELECT datname FROM pg_database) ORDER BY 1"
            )
        ]
        if orphans:
            found.append(
                (
                    f"pg_cron jobs of databases that no longer exist: {', '.join(orphans)}",
                    f"in database {plan.database!r}: SELECT cron.unschedule(jobid) FROM cron.job"
                    " WHERE jobname = ... (each one named)",
                )
            )
    return found


def _late_sweeps(conn: psycopg.Connection, c: psycopg.Connection, dbname: str, have: set[str]) -> Found:
    """Scheduled sweeps that have not started for twice their interval: by pg_cron's own
    log (cron.job_run_details; its rows of a job are visible to whoever sees the job), or,
    with cron.log_run off, by what pgq.reap and pgq.prune record in the queue database
    (run-schedules then has no record of its own and is left out). One never run counts
    from the install or the last upgrade."""
    since = one(conn, "SELECT max(applied_at) FROM pgq._migrations")
    logged = c.execute("SELECT current_setting('cron.log_run', true)").fetchone()[0] != "off"
    late: list[str] = []
    for name, _, _ in pgcron.CRON_JOBS:
        job = pgcron.job_name(name, dbname)
        if job not in have or (not logged and name not in ("reap", "prune")):
            continue
        if logged:
            last, now = c.execute(
                "SELECT max(d.start_time), now() FROM cron.job_run_details AS d"
                " JOIN cron.job AS j ON j.jobid = d.jobid WHERE j.jobname = %s",
                (job,),
            ).fetchone()
        else:
            last, now = conn.execute(
                "SELECT max(m.last_run), now() FROM pgq._maintenance AS m WHERE m.task = %s", (name,)
            ).fetchone()
        start = last or since
        if start is not None and now - start > 2 * SWEEP_EVERY[name]:
            every = "minute" if SWEEP_EVERY[name] == timedelta(minutes=1) else "hour"
            late.append(f"{job} (every {every}) last ran {when(last)}")
    if not late:
        return []
    return [
        (
            f"pg_cron sweeps have not run for twice their interval: {', '.join(late)} ({_last_runs(conn)})",
            _RESTART_CRON,
        )
    ]
