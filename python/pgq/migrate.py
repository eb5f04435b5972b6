"""Install, upgrade and uninstall the pgq schema.

Tables change only through numbered migrations (migrations/NNNN_name.sql), each applied in
its own transaction and recorded in pgq._migrations. Functions, views and grants are code:
they are re-applied from sql/ (CREATE OR REPLACE) after the migrations, on every install
and upgrade. A fresh install runs sql/schema/ (the current tables) instead of replaying the
migrations; tests/py/test_migrations.py proves both paths give the same schema.
Every entry point holds a session advisory lock, so concurrent installs do not interleave.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg.conninfo import make_conninfo

from .errors import SchemaError
from .resources import Migration, code_files, migrations, schema_files

log = logging.getLogger("pgq.migrate")

# 'pgq' in ASCII, then 0 for schema changes (the sweep uses 1).
_LOCK = (7366513, 0)
_MARK = "pgq-sql job queue"

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


@contextmanager
def _locked(dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s, %s)", _LOCK)
        try:
            yield conn
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s, %s)", _LOCK)


def installed_version(conn: psycopg.Connection) -> int | None:
    """The newest applied migration, None when pgq is not installed.

    Raises SchemaError when a schema named pgq exists that pgq did not create (Skytools
    PgQ uses the same name): mixing with it would break both.
    """
    row = conn.execute(
        "SELECT obj_description(n.oid, 'pg_namespace'), to_regclass('pgq._migrations') IS NOT NULL"
        " FROM pg_namespace n WHERE n.nspname = 'pgq'"
    ).fetchone()
    if row is None:
        return None
    comment, tracked = row
    if comment != _MARK or not tracked:
        raise SchemaError(
            "database already has a schema named pgq that pgq-sql did not create"
            " (Skytools PgQ uses that name too); refusing to mix with it."
            " Install into another database, or drop that schema if it is unused."
        )
    version = conn.execute("SELECT max(version) FROM pgq._migrations").fetchone()[0]
    return version or 0


def _apply_code(conn: psycopg.Connection) -> None:
    for path in code_files():
        conn.execute(path.read_text())


def install(dsn: str, *, cron: bool = True) -> list[str]:
    """Install pgq, or bring an existing install up to date. Idempotent.

    Returns what was done, one line per action, for the CLI to print.
    """
    done: list[str] = []
    with _locked(dsn) as conn:
        version = installed_version(conn)
        if version is None:
            with conn.transaction():
                for path in schema_files():
                    conn.execute(path.read_text())
                for mig in migrations():
                    conn.execute(
                        "INSERT INTO pgq._migrations (version, name) VALUES (%s, %s)",
                        (mig.version, mig.name),
                    )
                _apply_code(conn)
            done.append(f"installed pgq schema version {migrations()[-1].version}")
        else:
            done += _upgrade(conn, version)
        if cron:
            done += schedule_sweeps(conn, dsn)
    return done


def upgrade(dsn: str) -> list[str]:
    """Apply pending migrations, then re-apply functions, views and grants."""
    with _locked(dsn) as conn:
        version = installed_version(conn)
        if version is None:
            raise SchemaError("pgq is not installed in this database; run `pgq install` first")
        return _upgrade(conn, version)


def _upgrade(conn: psycopg.Connection, version: int) -> list[str]:
    known = migrations()
    latest = known[-1].version if known else 0
    if version > latest:
        raise SchemaError(
            f"the database's pgq schema is version {version}, newer than this code ({latest});"
            " upgrade the pgq package instead"
        )
    done = []
    pending = [mig for mig in known if mig.version > version]
    for mig in pending[:-1]:
        with conn.transaction():
            _apply_migration(conn, mig)
        done.append(f"applied migration {mig.path.name}")
    # The last migration commits together with the new code, so that no client ever sees
    # a schema without the functions that go with it (a migration may drop an old one).
    with conn.transaction():
        if pending:
            _apply_migration(conn, pending[-1])
            done.append(f"applied migration {pending[-1].path.name}")
        _apply_code(conn)
    done.append(f"pgq schema is at version {latest}")
    return done


def _apply_migration(conn: psycopg.Connection, mig: Migration) -> None:
    conn.execute(mig.sql)
    conn.execute("INSERT INTO pgq._migrations (version, name) VALUES (%s, %s)", (mig.version, mig.name))


def replay_migrations(dsn: str) -> None:
    """Install by replaying every migration (for the fresh-vs-migrated schema test)."""
    with _locked(dsn) as conn:
        if installed_version(conn) is not None:
            raise SchemaError("pgq is already installed in this database")
        for mig in migrations():
            with conn.transaction():
                _apply_migration(conn, mig)
        with conn.transaction():
            _apply_code(conn)


def uninstall(dsn: str) -> list[str]:
    """Remove pgq's pg_cron jobs and the pgq schema with every job in it."""
    done: list[str] = []
    with _locked(dsn) as conn:
        if installed_version(conn) is None:
            return ["pgq is not installed; nothing to do"]
        done += unschedule_sweeps(conn, dsn)
        conn.execute("DROP SCHEMA pgq CASCADE")
        done.append("dropped schema pgq (roles pgq_producer, pgq_worker, pgq_admin are kept)")
    return done


# --- pg_cron -----------------------------------------------------------------------------


def _cron_database(conn: psycopg.Connection) -> str | None:
    """The database pg_cron runs in, None when pg_cron is not loaded in this server."""
    loaded = conn.execute(
        "SELECT current_setting('shared_preload_libraries') ~ '(^|[ ,])pg_cron([ ,]|$)'"
    ).fetchone()[0]
    if not loaded:
        return None
    return conn.execute("SELECT current_setting('cron.database_name', true)").fetchone()[0] or "postgres"


@contextmanager
def _cron_conn(conn: psycopg.Connection, dsn: str, cron_db: str) -> Iterator[psycopg.Connection | None]:
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


def _job_name(name: str, dbname: str) -> str:
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


def schedule_sweeps(conn: psycopg.Connection, dsn: str) -> list[str]:
    """Schedule the sweeps with pg_cron, in the queue's database. Warns without pg_cron."""
    cron_db = _cron_database(conn)
    if cron_db is None:
        msg = (
            "warning: pg_cron is not loaded in this server; workers will run the sweeps"
            " themselves (add pg_cron to shared_preload_libraries to have them run on a timer)"
        )
        log.warning(msg)
        return [msg]
    dbname = conn.info.dbname
    done = []
    with _cron_conn(conn, dsn, cron_db) as cron:
        if cron is None:
            msg = (
                f"warning: pg_cron is loaded but its extension is not created in database"
                f" {cron_db!r}; run CREATE EXTENSION pg_cron there, then `pgq install` again"
            )
            log.warning(msg)
            return [msg]
        for name, schedule, command in CRON_JOBS:
            job = _job_name(name, dbname)
            cron.execute("SELECT cron.schedule_in_database(%s, %s, %s, %s)", (job, schedule, command, dbname))
            done.append(f"pg_cron job {job!r} runs {command!r} at {schedule!r} in database {dbname!r}")
        name, schedule, command = CRON_LOG_JOB
        job = _job_name(name, dbname)
        cron.execute("SELECT cron.schedule(%s, %s, %s)", (job, schedule, command))
        done.append(f"pg_cron job {job!r} prunes pgq's rows of cron.job_run_details in {cron_db!r}")
    return done


def unschedule_sweeps(conn: psycopg.Connection, dsn: str) -> list[str]:
    cron_db = _cron_database(conn)
    if cron_db is None:
        return []
    dbname = conn.info.dbname
    done = []
    with _cron_conn(conn, dsn, cron_db) as cron:
        if cron is None:
            return []
        names = [_job_name(name, dbname) for name, _, _ in CRON_JOBS]
        rows = cron.execute(
            "SELECT jobid, jobname FROM cron.job WHERE jobname = ANY(%s) AND database = %s"
            " UNION ALL SELECT jobid, jobname FROM cron.job WHERE jobname = %s",
            (names, dbname, _job_name(CRON_LOG_JOB[0], dbname)),
        ).fetchall()
        for jobid, jobname in rows:
            cron.execute("SELECT cron.unschedule(%s)", (jobid,))
            done.append(f"removed pg_cron job {jobname!r}")
    return done
