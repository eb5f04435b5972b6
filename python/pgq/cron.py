"""The pg_cron sweeps of a queue database: find pg_cron, check the rights, (un)schedule.

pg_cron lives in one database of the server (`cron.database_name`, often `postgres`); the
sweeps of a queue in another database are scheduled there with cron.schedule_in_database.
Everything here is read before an install changes anything (`inspect`), so a missing right
is reported, not discovered half-way.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg
from psycopg.conninfo import make_conninfo

log = logging.getLogger("pgq.cron")

# The periodic sweeps pg_cron runs in a queue database: (name, schedule, command).
CRON_JOBS = [
    ("reap", "* * * * *", "SELECT pgq.reap()"),
    ("run-schedules", "* * * * *", "SELECT pgq.run_schedules()"),
    ("prune", "17 * * * *", "SELECT pgq.prune()"),
]
# pg_cron logs every run in cron.job_run_details, which grows without bound; this job, in
# pg_cron's own database, deletes the week-old log rows of pgq's jobs.
CRON_LOG_JOB = (
    "prune-cron-log",
    "47 * * * *",
    "DELETE FROM cron.job_run_details WHERE end_time < now() - interval '7 days'"
    " AND jobid IN (SELECT jobid FROM cron.job WHERE jobname LIKE 'pgq-%')",
)
SCHEDULE_IN_DATABASE = "cron.schedule_in_database(text, text, text, text, text, boolean)"


@dataclass(frozen=True)
class CronPlan:
    """What `inspect` found: the database pg_cron runs in (None: no usable pg_cron) and,
    when the sweeps cannot be scheduled, the one line that says why and how to fix it."""

    database: str | None
    problem: str | None = None
    # pg_cron is loaded but its extension is not created in this database (pg_cron's own):
    # install creates it when the role may (`may_create`: a superuser), else refuses.
    uncreated: str | None = None
    may_create: bool = False


def _privileged(conn: psycopg.Connection) -> bool:
    """May this role read shared_preload_libraries and cron.database_name?"""
    return conn.execute(
        "SELECT rolsuper OR pg_has_role(current_user, 'pg_read_all_settings', 'USAGE')"
        " FROM pg_roles WHERE rolname = current_user"
    ).fetchone()[0]


def cron_database(conn: psycopg.Connection) -> str | None:
    """The database pg_cron runs in, None when pg_cron is not loaded in this server.

    A role without pg_read_all_settings (a managed service's database owner) cannot read
    the settings; it looks for the extension in this database, else in `postgres`.
    """
    if _privileged(conn):
        loaded = conn.execute(
            "SELECT current_setting('shared_preload_libraries') ~ '(^|[ ,])pg_cron([ ,]|$)'"
        ).fetchone()[0]
        if not loaded:
            return None
        name = conn.execute("SELECT current_setting('cron.database_name', true)").fetchone()[0]
        return name or "postgres"
    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_cron'").fetchone():
        return conn.info.dbname
    return "postgres"


@contextmanager
def _connect_to(conn: psycopg.Connection, dsn: str, dbname: str) -> Iterator[psycopg.Connection]:
    """conn itself when it is in dbname, else a new autocommit connection there."""
    if conn.info.dbname == dbname:
        yield conn
        return
    with psycopg.connect(make_conninfo(dsn, dbname=dbname), autocommit=True) as other:
        yield other


@contextmanager
def cron_connection(conn: psycopg.Connection, dsn: str, cron_db: str) -> Iterator[psycopg.Connection | None]:
    """A connection to pg_cron's database, None when the extension is not created there."""
    if conn.info.dbname == cron_db:
        cron_conn = conn
    else:
        cron_conn = psycopg.connect(make_conninfo(dsn, dbname=cron_db), autocommit=True)
    try:
        has_ext = cron_conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_cron'").fetchone()
        yield cron_conn if has_ext else None
    finally:
        if cron_conn is not conn:
            cron_conn.close()


def grants_needed(role: str, cron_db: str) -> str:
    quoted = '"' + role.replace('"', '""') + '"'
    return (
        f"in database {cron_db!r} as a superuser: GRANT USAGE ON SCHEMA cron TO {quoted};"
        f" GRANT EXECUTE ON FUNCTION {SCHEDULE_IN_DATABASE} TO {quoted};"
    )


def inspect(conn: psycopg.Connection, dsn: str) -> CronPlan:
    """Can the sweeps be scheduled by this role? Changes nothing."""
    cron_db = cron_database(conn)
    if cron_db is None:
        return CronPlan(
            None,
            "warning: pg_cron is not loaded in this server; workers will run the sweeps"
            " themselves (add pg_cron to shared_preload_libraries to have them run on a timer)",
        )
    try:
        with cron_connection(conn, dsn, cron_db) as cron:
            if cron is None:
                superuser = conn.execute(
                    "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
                ).fetchone()
                return CronPlan(
                    None,
                    f"pg_cron is loaded in this server but its extension is not created in database"
                    f" {cron_db!r}, and this role may not create it: run CREATE EXTENSION pg_cron there"
                    f" as a superuser, then `pgq install` again (or pass --no-cron: the workers then"
                    f" run the sweeps)",
                    uncreated=cron_db,
                    may_create=bool(superuser and superuser[0]),
                )
            allowed = cron.execute(
                "SELECT has_schema_privilege('cron', 'USAGE') AND has_function_privilege(%s, 'EXECUTE')",
                (SCHEDULE_IN_DATABASE,),
            ).fetchone()[0]
            role = conn.execute("SELECT current_user").fetchone()[0]
    except psycopg.OperationalError as exc:
        return CronPlan(
            None,
            f"warning: sweeps not scheduled: cannot connect to pg_cron's database {cron_db!r}"
            f" ({str(exc).strip().splitlines()[-1]}); workers run the sweeps meanwhile",
        )
    if not allowed:
        return CronPlan(
            None,
            f"warning: sweeps not scheduled (workers run them meanwhile); to enable them, run"
            f" {grants_needed(role, cron_db)} then `pgq upgrade`",
        )
    return CronPlan(cron_db)


def job_name(name: str, dbname: str) -> str:
    """pg_cron job names are at most 63 bytes: a long database name is cut and hashed, so
    that two databases sharing a long prefix do not share (and overwrite) their jobs."""
    job = f"pgq-{name}:{dbname}"
    if len(job.encode()) <= 63:
        return job
    digest = hashlib.sha256(dbname.encode()).hexdigest()[:12]
    prefix = f"pgq-{name}:"
    room = 63 - len(prefix.encode()) - len(digest) - 1
    short = dbname.encode()[:room].decode(errors="ignore")
    return f"{prefix}{short}~{digest}"


def schedule(conn: psycopg.Connection, dsn: str, plan: CronPlan | None = None) -> list[str]:
    """Schedule (or re-schedule: idempotent) the sweeps of conn's database."""
    plan = plan or inspect(conn, dsn)
    created = []
    if plan.uncreated is not None and plan.may_create:
        # README promises sweeps on a timer wherever pg_cron is loaded: a superuser's
        # install creates the extension in pg_cron's database rather than going without.
        with _connect_to(conn, dsn, plan.uncreated) as cron_conn:
            cron_conn.execute("CREATE EXTENSION IF NOT EXISTS pg_cron")
        created.append(f"created extension pg_cron in database {plan.uncreated!r} (pg_cron's database)")
        plan = inspect(conn, dsn)
    if plan.database is None:
        log.warning(plan.problem)
        return [plan.problem or "warning: sweeps not scheduled"]
    dbname = conn.info.dbname
    done = []
    with cron_connection(conn, dsn, plan.database) as cron:
        assert cron is not None
        for name, when, command in CRON_JOBS:
            job = job_name(name, dbname)
            cron.execute("SELECT cron.schedule_in_database(%s, %s, %s, %s)", (job, when, command, dbname))
            done.append(f"pg_cron job {job!r} runs {command!r} at {when!r} in database {dbname!r}")
        name, when, command = CRON_LOG_JOB
        job = job_name(name, dbname)
        cron.execute("SELECT cron.schedule(%s, %s, %s)", (job, when, command))
        done.append(f"pg_cron job {job!r} prunes pgq's rows of cron.job_run_details in {plan.database!r}")
    return created + done


def unschedule(conn: psycopg.Connection, dsn: str) -> list[str]:
    """Remove the sweeps of conn's database (those this role can see)."""
    cron_db = cron_database(conn)
    if cron_db is None:
        return []
    dbname = conn.info.dbname
    done = []
    try:
        with cron_connection(conn, dsn, cron_db) as cron:
            if cron is None:
                return []
            names = [job_name(name, dbname) for name, _, _ in CRON_JOBS]
            rows = cron.execute(
                "SELECT jobid, jobname FROM cron.job WHERE jobname = ANY(%s) AND database = %s"
                " UNION ALL SELECT jobid, jobname FROM cron.job WHERE jobname = %s",
                (names, dbname, job_name(CRON_LOG_JOB[0], dbname)),
            ).fetchall()
            for jobid, jobname in rows:
                cron.execute("SELECT cron.unschedule(%s)", (jobid,))
                done.append(f"removed pg_cron job {jobname!r}")
    except psycopg.OperationalError:
        return []
    return done
