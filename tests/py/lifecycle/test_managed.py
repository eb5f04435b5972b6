"""Managed PostgreSQL: a database owner that is no superuser (CREATEDB, CREATEROLE, no
pg_read_all_settings, no rights on pg_cron) installs pgq and runs workers, with real roles."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

import pgq
from conftest import ADMIN_DSN, admin_execute, drop_database
from pgq import cron, migrate

# Every test here installs with the pg_cron sweeps.
pytestmark = pytest.mark.needs_pg_cron


def ident(name: str) -> sql.Identifier:
    return sql.Identifier(name)


@pytest.fixture
def owner_db() -> Iterator[tuple[str, str]]:
    """(role, dsn): a CREATEDB CREATEROLE login role and an empty database it owns."""
    role = f"mgd_{uuid.uuid4().hex[:10]}"
    db = f"pgq_{role}"
    admin_execute(
        sql.SQL("CREATE ROLE {} LOGIN CREATEDB CREATEROLE").format(ident(role)),
        sql.SQL("CREATE DATABASE {} OWNER {}").format(ident(db), ident(role)),
    )
    try:
        yield role, make_conninfo(ADMIN_DSN, dbname=db, user=role)
    finally:
        with psycopg.connect(ADMIN_DSN, autocommit=True) as c:
            c.execute("SELECT cron.unschedule(jobid) FROM cron.job WHERE username = %s", (role,))
            c.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(ident(role)))
        drop_database(db)
        admin_execute(sql.SQL("DROP ROLE {}").format(ident(role)))


def test_a_database_owner_installs_and_runs_workers(owner_db: tuple[str, str]) -> None:
    role, dsn = owner_db
    done = migrate.install(dsn, cron=True)
    sweeps = [line for line in done if "sweeps not scheduled" in line]
    assert len(sweeps) == 1, done
    assert f'GRANT EXECUTE ON FUNCTION {cron.SCHEDULE_IN_DATABASE} TO "{role}";' in sweeps[0]
    assert f'GRANT USAGE ON SCHEMA cron TO "{role}";' in sweeps[0]
    with psycopg.connect(dsn, autocommit=True) as c:
        owners = c.execute(
            "SELECT DISTINCT proowner::regrole::text FROM pg_proc WHERE pronamespace = 'pgq'::regnamespace"
        ).fetchall()
        assert owners == [("pgq_owner",)], "SECURITY DEFINER functions run as pgq_owner"
        assert (
            c.execute("SELECT rolcanlogin FROM pg_roles WHERE rolname = 'pgq_owner'").fetchone()[0] is False
        )
        # A worker login role of the owner's making runs jobs.
        worker_role = f"{role}_w"
        c.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE pgq_worker").format(ident(worker_role)))
        job = c.execute("SELECT pgq.enqueue('managed')").fetchone()[0]
    try:
        with psycopg.connect(make_conninfo(dsn, user=worker_role), autocommit=True) as w:
            wid = w.execute("SELECT pgq.register_worker('w', ARRAY['managed'])").fetchone()[0]
            assert [r[0] for r in w.execute("SELECT id FROM pgq.claim(%s, ARRAY['managed'])", (wid,))] == [
                job
            ]
            assert w.execute("SELECT pgq.complete(%s, ARRAY[%s]::bigint[])", (wid, job)).fetchall() == [
                (job,)
            ]
            w.execute("SELECT pgq.unregister_worker(%s)", (wid,))
    finally:
        admin_execute(sql.SQL("DROP ROLE {}").format(ident(worker_role)))

    # Once granted the rights the line names, an upgrade schedules the sweeps as the owner.
    with psycopg.connect(ADMIN_DSN, autocommit=True) as c:
        c.execute(sql.SQL("GRANT USAGE ON SCHEMA cron TO {}").format(ident(role)))
        c.execute(
            sql.SQL("GRANT EXECUTE ON FUNCTION {} TO {}").format(
                sql.SQL(cron.SCHEDULE_IN_DATABASE), ident(role)
            )
        )
    try:
        done = migrate.upgrade(dsn)
        assert not any("not scheduled" in line for line in done), done
        with psycopg.connect(ADMIN_DSN) as c:
            jobs = c.execute(
                "SELECT command, username FROM cron.job WHERE username = %s ORDER BY 1", (role,)
            ).fetchall()
        assert {cmd for cmd, _ in jobs} >= {command for _, _, command in cron.CRON_JOBS}
        # The sweep's command runs as the owner: it may.
        with psycopg.connect(dsn, autocommit=True) as c:
            for _, _, command in cron.CRON_JOBS:
                c.execute(command)
    finally:
        with psycopg.connect(ADMIN_DSN, autocommit=True) as c:
            c.execute(sql.SQL("REVOKE USAGE ON SCHEMA cron FROM {}").format(ident(role)))
            c.execute(
                sql.SQL("REVOKE EXECUTE ON FUNCTION {} FROM {}").format(
                    sql.SQL(cron.SCHEDULE_IN_DATABASE), ident(role)
                )
            )


def test_missing_rights_are_reported_before_anything_changes(owner_db: tuple[str, str]) -> None:
    role, dsn = owner_db
    admin_execute(sql.SQL("ALTER ROLE {} NOCREATEROLE").format(ident(role)))
    with pytest.raises(pgq.SchemaError, match="nothing was changed") as err:
        migrate.install(dsn, cron=True)
    assert "CREATEROLE" in str(err.value)
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT to_regnamespace('pgq')").fetchone()[0] is None
