"""Install, upgrade and uninstall the pgq schema.

Tables change only through numbered migrations (migrations/NNNN_name.sql), recorded in
pgq._migrations. Roles, functions, views, triggers and grants are code: on every install
and upgrade they are re-applied from sql/, and whatever an earlier version left in schema
pgq that the code no longer defines is dropped (sql/reconcile.sql), so the database ends
exactly at the current schema. A fresh install runs sql/schema/ (the current tables)
instead of replaying the migrations; tests/py/lifecycle/test_migrations.py proves both
paths give the same schema.

An install or upgrade is one transaction: the pending migrations and the code commit
together or not at all. The rights it needs are checked before anything changes. Every
entry point holds a session advisory lock, so concurrent installs do not interleave. The
pg_cron sweeps (pgq.cron) are scheduled after the commit; they are idempotent.

An install has roles of its own when asked (`roles=`, a prefix: pgq.roles says how); the
prefix is recorded in the database at the first install and every later run uses it.

The checks made before anything changes (server, installed version, roles, rights) are
pgq.preflight's; this module is the ladder that applies the changes, and never applies one
outside the advisory lock and the install's single transaction.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql

from . import cron as pgcron
from . import roles as pgroles
from ._version import __version__
from .cron import CRON_JOBS, CRON_LOG_JOB
from .cron import job_name as _job_name
from .errors import SchemaError
from .preflight import (
    check_privileges,
    check_server,
    extension_version,
    install_kind,
    installed_version,
    refuse_extension,
    role_prefix,
)
from .resources import Migration, code_files, lock_key, migrations, schema_files

__all__ = [
    "CRON_JOBS",
    "CRON_LOG_JOB",
    "_job_name",
    "extension_version",
    "install",
    "install_kind",
    "installed_version",
    "uninstall",
    "upgrade",
]

log = logging.getLogger("pgq.migrate")

# An upgrade's wait for its locks (_lock_schema), and how often it tries before it gives up.
_LOCK_WAIT = "500ms"
_LOCK_TRIES = 100
# The schema lock (sql/functions/_lock_key.sql says what each of pgq's locks guards).
_LOCK = lock_key("schema")
# The roles of an install with the default prefix (pgq.roles.names(prefix) for another).
ROLES = pgroles.names()


@contextmanager
def _locked(dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s, %s)", _LOCK)
        try:
            yield conn
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s, %s)", _LOCK)


def _apply_code(conn: psycopg.Connection, prefix: str = pgroles.DEFAULT_PREFIX) -> None:
    for path in code_files():
        conn.execute(pgroles.render(path.read_text().replace("@PGQ_VERSION@", __version__), prefix))


def _prepare(
    conn: psycopg.Connection, dsn: str, want_cron: bool, roles: str | None = None
) -> tuple[int | None, pgcron.CronPlan | None, str]:
    """Everything read before a change: the server, the installed version, the roles, the
    rights, pg_cron."""
    check_server(conn)
    refuse_extension(conn, "install")
    version = installed_version(conn)
    if version is not None:
        _check_not_newer(version)
    prefix = role_prefix(conn, version is not None, roles)
    check_privileges(conn, installed=version is not None, prefix=prefix)
    plan = pgcron.inspect(conn, dsn) if want_cron else None
    if plan is not None and plan.uncreated is not None and not plan.may_create:
        # pg_cron is loaded, so the sweeps are expected on a timer: refuse rather than
        # succeed with a warning that is easy to miss. Nothing was changed yet.
        raise SchemaError(f"{plan.problem}; nothing was changed")
    return version, plan, prefix


def install(dsn: str, *, cron: bool = True, roles: str | None = None) -> list[str]:
    """Install pgq, or bring an existing install up to date. Idempotent.

    roles: the prefix of the install's own roles (e.g. "app1_" for app1_owner,
    app1_producer, app1_worker, app1_admin); default pgq_, the roles every default install
    of the cluster shares. An existing install keeps the prefix it was installed with.
    Returns what was done, one line per action, for the CLI to print.
    """
    done: list[str] = []
    with _locked(dsn) as conn:
        version, plan, prefix = _prepare(conn, dsn, cron, roles)
        if version is None:
            with conn.transaction():
                for path in schema_files():
                    conn.execute(path.read_text())
                conn.execute("UPDATE pgq._install SET role_prefix = %s", (prefix,))
                for mig in migrations():
                    _record(conn, mig)
                _apply_code(conn, prefix)
            done.append(f"installed pgq schema version {migrations()[-1].version} (pgq {__version__})")
            if prefix != pgroles.DEFAULT_PREFIX:
                done.append(f"roles of this install: {', '.join(pgroles.names(prefix))}")
        else:
            done += _upgrade(conn, version, prefix)
        if plan is not None:
            done += _schedule(conn, dsn, plan)
    return done


def upgrade(dsn: str, *, cron: bool = True, roles: str | None = None) -> list[str]:
    """Apply pending migrations and the current code in one transaction; ensure the sweeps.
    The install's roles are the ones it recorded (roles, if given, must name the same)."""
    with _locked(dsn) as conn:
        check_server(conn)
        refuse_extension(conn, "upgrade")
        version = installed_version(conn)
        if version is None:
            raise SchemaError("pgq is not installed in this database; run `pgq install` first")
        version, plan, prefix = _prepare(conn, dsn, cron, roles)
        assert version is not None
        done = _upgrade(conn, version, prefix)
        if plan is not None:
            done += _schedule(conn, dsn, plan)
        return done


def _schedule(conn: psycopg.Connection, dsn: str, plan: pgcron.CronPlan) -> list[str]:
    return pgcron.schedule(conn, dsn, plan)


def _check_not_newer(version: int) -> None:
    known = migrations()
    latest = known[-1].version if known else 0
    if version > latest:
        raise SchemaError(
            f"the database's pgq schema is version {version}, newer than this code ({latest});"
            " upgrade the pgq package instead"
        )


def _lock_schema(conn: psycopg.Connection) -> None:
    """Take every lock the upgrade needs on pgq's tables and views, first and in one
    statement, waiting at most _LOCK_WAIT. Taken statement by statement (ALTER TABLE,
    CREATE OR REPLACE VIEW), the upgrade held one table while it waited for another that a
    worker's transaction held, and that worker then waited for the first: "deadlock
    detected", under running workers. Waiting here it holds nothing a worker needs for
    longer than _LOCK_WAIT, which is under deadlock_timeout's default 1 s, so a worker
    waiting behind it gets its lock before it would look for a deadlock."""
    names = [
        r[0]
        for r in conn.execute(
            "SELECT c.relname FROM pg_catalog.pg_class AS c"
            " WHERE c.relnamespace = 'pgq'::regnamespace AND c.relkind IN ('r', 'p', 'v')"
            " AND NOT c.relispartition ORDER BY c.relname"
        )
    ]
    if not names:
        return
    previous = conn.execute("SELECT current_setting('lock_timeout')").fetchone()[0]
    conn.execute("SELECT set_config('lock_timeout', %s, true)", (_LOCK_WAIT,))
    conn.execute(
        sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(
            sql.SQL(", ").join(sql.Identifier("pgq", n) for n in names)
        )
    )
    conn.execute("SELECT set_config('lock_timeout', %s, true)", (previous,))


def _upgrade(conn: psycopg.Connection, version: int, prefix: str = pgroles.DEFAULT_PREFIX) -> list[str]:
    _check_not_newer(version)
    known = migrations()
    pending = [mig for mig in known if mig.version > version]
    for attempt in range(1, _LOCK_TRIES + 1):
        done = []
        try:
            # One transaction: a failing migration leaves the database as it was, and no
            # client ever sees a schema without the functions that go with it.
            with conn.transaction():
                _lock_schema(conn)
                for mig in pending:
                    _apply_migration(conn, mig, prefix)
                    done.append(f"applied migration {mig.path.name}")
                _apply_code(conn, prefix)
            break
        except (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected) as exc:
            # Busy workers: give their tables back at once, let them go on, try again.
            if attempt == _LOCK_TRIES:
                raise SchemaError(
                    f"could not lock pgq's tables for the upgrade in {_LOCK_TRIES} tries (a long"
                    " transaction holds them?); nothing was changed. Try again."
                ) from exc
            log.info("upgrade: pgq's tables are busy (%s); trying again", str(exc).strip().splitlines()[0])
            time.sleep(min(0.02 * attempt, 1.0))
    latest = known[-1].version if known else 0
    done.append(f"pgq schema is at version {latest} (pgq {__version__})")
    return done


def _record(conn: psycopg.Connection, mig: Migration) -> None:
    conn.execute("INSERT INTO pgq._migrations (version, name) VALUES (%s, %s)", (mig.version, mig.name))


def _apply_migration(conn: psycopg.Connection, mig: Migration, prefix: str = pgroles.DEFAULT_PREFIX) -> None:
    conn.execute(pgroles.render(mig.sql, prefix))
    _record(conn, mig)


def replay_migrations(dsn: str) -> None:
    """Install by replaying every migration (for the fresh-vs-migrated schema test)."""
    with _locked(dsn) as conn:
        if installed_version(conn) is not None:
            raise SchemaError("pgq is already installed in this database")
        with conn.transaction():
            for mig in migrations():
                _apply_migration(conn, mig)
            _apply_code(conn)


# Every dependency on an object of schema pgq, from an object that lives elsewhere. A view's
# dependency is recorded on its rewrite rule, a column default's on pg_attrdef: both are
# reported as the relation they belong to.
_DEPENDENTS = """
WITH dep AS (
    SELECT CASE WHEN d.classid IN ('pg_rewrite'::regclass, 'pg_attrdef'::regclass)
                THEN 'pg_class'::regclass ELSE d.classid END AS classid,
           coalesce(rw.ev_class, ad.adrelid, d.objid) AS objid
    FROM pg_depend AS d
    LEFT JOIN pg_rewrite AS rw ON d.classid = 'pg_rewrite'::regclass AND rw.oid = d.objid
    LEFT JOIN pg_attrdef AS ad ON d.classid = 'pg_attrdef'::regclass AND ad.oid = d.objid
    WHERE d.deptype = 'n' AND CASE d.refclassid
        WHEN 'pg_proc'::regclass THEN (SELECT p.pronamespace FROM pg_proc AS p WHERE p.oid = d.refobjid)
        WHEN 'pg_class'::regclass THEN (SELECT c.relnamespace FROM pg_class AS c WHERE c.oid = d.refobjid)
        WHEN 'pg_type'::regclass THEN (SELECT t.typnamespace FROM pg_type AS t WHERE t.oid = d.refobjid)
    END = 'pgq'::regnamespace
)
SELECT DISTINCT pg_describe_object(dep.classid, dep.objid, 0)
FROM dep
LEFT JOIN pg_class AS c ON dep.classid = 'pg_class'::regclass AND c.oid = dep.objid
LEFT JOIN pg_proc AS p ON dep.classid = 'pg_proc'::regclass AND p.oid = dep.objid
LEFT JOIN pg_trigger AS tg ON dep.classid = 'pg_trigger'::regclass AND tg.oid = dep.objid
LEFT JOIN pg_class AS tc ON tc.oid = tg.tgrelid
LEFT JOIN pg_constraint AS co ON dep.classid = 'pg_constraint'::regclass AND co.oid = dep.objid
LEFT JOIN pg_type AS ty ON dep.classid = 'pg_type'::regclass AND ty.oid = dep.objid
WHERE coalesce(c.relnamespace, p.pronamespace, tc.relnamespace, co.connamespace, ty.typnamespace, 0)
      <> 'pgq'::regnamespace
ORDER BY 1
"""


def dependents(conn: psycopg.Connection) -> list[str]:
    """Objects outside schema pgq that depend on something in it (e.g. a user's trigger
    that runs pgq.enqueue_trigger), described as PostgreSQL names them."""
    rows = conn.execute(_DEPENDENTS).fetchall()
    return [r[0] for r in rows]


def uninstall(dsn: str, *, cascade: bool = False) -> list[str]:
    """Remove pgq's pg_cron jobs and the pgq schema with every job in it.

    Refuses (SchemaError naming each) while objects outside schema pgq depend on it,
    unless cascade, which drops them too.
    """
    done: list[str] = []
    with _locked(dsn) as conn:
        if installed_version(conn) is None:
            return ["pgq is not installed; nothing to do"]
        refuse_extension(conn, "uninstall")
        kept = pgroles.names(pgroles.installed_prefix(conn) or pgroles.DEFAULT_PREFIX)
        found = dependents(conn)
        if found and not cascade:
            raise SchemaError(
                "objects outside schema pgq depend on it: "
                + "; ".join(found)
                + ". Drop them first, or pass --cascade to drop them with pgq"
            )
        with conn.transaction():
            conn.execute("DROP SCHEMA pgq CASCADE")
        done += pgcron.unschedule(conn, dsn)
        done += [f"dropped {obj}" for obj in found]
        done.append(f"dropped schema pgq (roles {', '.join(kept)} are kept: other databases may use them)")
    return done
