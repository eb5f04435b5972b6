"""Backup and restore with the real pg_dump / pg_restore, and uninstall next to a user's
objects that depend on pgq."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

import pgq
import pgq.doctor
from conftest import ADMIN_DSN, admin_execute
from pgq import cron, migrate
from pgq.cli.main import main
from test_migrations import PG_DUMP, assert_real_dump, dbname, make_db, schema_diff, schema_dump  # noqa: F401

PG_RESTORE = str(Path(PG_DUMP).with_name("pg_restore"))
SAVED = "_saved_for_restore_test"


@pytest.mark.needs_client_tools
@pytest.mark.needs_pg_cron
def test_restore_into_a_cluster_without_the_roles_then_install_repairs_it(
    make_db,  # noqa: F811
    tmp_path: Path,
) -> None:
    source, target = make_db(), make_db()
    migrate.install(source, cron=False)
    with psycopg.connect(source, autocommit=True) as c:
        kept = c.execute("SELECT pgq.enqueue('restored', '{\"n\": 1}')").fetchone()[0]
        c.execute("SELECT pgq.schedule('nightly', '0 3 * * *', 'restored')")
    expected = schema_dump(source)
    archive = tmp_path / "pgq.dump"
    subprocess.run([PG_DUMP, "-Fc", "-f", str(archive), "--dbname", source], check=True, timeout=120)

    admin_execute(*(f"ALTER ROLE {r} RENAME TO {r}{SAVED}" for r in migrate.ROLES))
    try:
        restored = subprocess.run(
            [PG_RESTORE, "--dbname", target, str(archive)], capture_output=True, text=True, timeout=120
        )
        assert restored.returncode != 0 and 'role "pgq_worker" does not exist' in restored.stderr
        with psycopg.connect(target, autocommit=True) as c:
            # What the restore left: functions owned by whoever restored, open to PUBLIC.
            assert (
                c.execute(
                    "SELECT count(*) FROM pg_proc WHERE pronamespace = 'pgq'::regnamespace"
                    " AND has_function_privilege('public', oid, 'EXECUTE')"
                ).fetchone()[0]
                > 0
            )

        done = migrate.install(target, cron=True)
        assert any(line.startswith("pgq schema is at version") for line in done), done
        repaired = schema_dump(target)
        assert_real_dump(repaired)
        assert repaired == expected, schema_diff(expected, repaired)
        with psycopg.connect(target, autocommit=True) as c:
            assert c.execute("SELECT pgq.job_status(%s)", (kept,)).fetchone()[0] == "queued"
            assert c.execute("SELECT name FROM pgq.schedules").fetchall() == [("nightly",)]
            assert [str(p) for p in pgq.doctor.diagnose(target)] == []
        with psycopg.connect(ADMIN_DSN) as c:
            jobs = c.execute("SELECT command FROM cron.job WHERE database = %s", (dbname(target),)).fetchall()
        assert {j[0] for j in jobs} == {command for _, _, command in cron.CRON_JOBS}
    finally:
        migrate.uninstall(target)  # also its sweeps; the roles made by install are dropped next
        with psycopg.connect(ADMIN_DSN, autocommit=True) as c:
            c.execute(
                "SELECT cron.unschedule(jobid) FROM cron.job WHERE jobname = %s",
                (cron.job_name(cron.CRON_LOG_JOB[0], dbname(target)),),
            )
            for role in migrate.ROLES:
                if c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
                    c.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(role)))
                    c.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
                c.execute(f"ALTER ROLE {role}{SAVED} RENAME TO {role}")


TRIGGER = """
CREATE TABLE public.orders (id integer PRIMARY KEY);
CREATE TRIGGER orders_enqueue AFTER INSERT ON public.orders
FOR EACH ROW EXECUTE FUNCTION pgq.enqueue_trigger('order_created');
CREATE VIEW public.queue_depth AS SELECT entrypoint, queued FROM pgq.queues;
"""


def test_uninstall_refuses_while_user_objects_depend_on_pgq(fresh_db: str) -> None:
    migrate.install(fresh_db, cron=False)
    with psycopg.connect(fresh_db, autocommit=True) as c:
        c.execute(TRIGGER)
    with pytest.raises(pgq.SchemaError) as err:
        migrate.uninstall(fresh_db)
    assert "trigger orders_enqueue on table orders" in str(err.value)
    assert "view queue_depth" in str(err.value)
    with psycopg.connect(fresh_db) as c:
        assert migrate.installed_version(c) is not None, "a refused uninstall changed something"

    result = CliRunner().invoke(main, ["uninstall", "--dsn", fresh_db], input="y\n")
    assert result.exit_code == 1
    assert f"from database '{dbname(fresh_db)}'" in result.output, "the prompt names the database"
    assert "--cascade" in result.output

    result = CliRunner().invoke(main, ["uninstall", "--dsn", fresh_db, "--cascade"], input="y\n")
    assert result.exit_code == 0, result.output
    with psycopg.connect(fresh_db) as c:
        assert c.execute("SELECT to_regnamespace('pgq')").fetchone()[0] is None
        assert c.execute("SELECT to_regclass('public.queue_depth')").fetchone()[0] is None
        assert c.execute("SELECT count(*) FROM pg_trigger WHERE tgname = 'orders_enqueue'").fetchone()[0] == 0
        assert c.execute("SELECT to_regclass('public.orders')").fetchone()[0] is not None, "the table stays"
