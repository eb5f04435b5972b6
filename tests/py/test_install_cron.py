"""`pgq install` where pg_cron is preloaded but its extension was not created in pg_cron's
database (issue 35, point 7): it used to exit 0 with a warning, the sweeps unscheduled. Now a
superuser's install creates the extension and schedules the sweeps; a role that may not
create it gets an error and a non-zero exit, and nothing is changed.

A cluster of its own (tests/py/test_sweeps_health.py's fixture): the extension is dropped
there, which the shared cluster's other tests must not see."""

from __future__ import annotations

from pathlib import Path

import psycopg
from click.testing import CliRunner
from psycopg.conninfo import make_conninfo

from pgq.cli.main import main
from test_sweeps_health import private_cluster  # noqa: F401 (fixture)

ROLE = "protocol_cron_installer"


def test_install_with_pg_cron_loaded_but_not_created(private_cluster: tuple[str, Path]) -> None:  # noqa: F811
    dsn, _ = private_cluster
    queue = make_conninfo(dsn, dbname="protocol_queue")
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("DROP EXTENSION IF EXISTS pg_cron")
        c.execute("CREATE DATABASE protocol_queue")
    runner = CliRunner()

    # A superuser: the extension is created in pg_cron's database, the sweeps scheduled.
    first = runner.invoke(main, ["install", "--dsn", queue])
    print(first.output)
    assert first.exit_code == 0, first.output
    assert "created extension pg_cron in database 'postgres'" in first.output
    with psycopg.connect(dsn, autocommit=True) as c:
        jobs = c.execute("SELECT count(*) FROM cron.job WHERE database = 'protocol_queue'").fetchone()[0]
        assert jobs == 3
        # A role that runs the install again (a member of the install's roles, owner of the
        # database) but may not create the extension, which is gone again.
        c.execute("DROP EXTENSION pg_cron")
        c.execute(f"CREATE ROLE {ROLE} LOGIN IN ROLE pgq_owner, pgq_admin")
        c.execute(f"ALTER DATABASE protocol_queue OWNER TO {ROLE}")
    second = runner.invoke(main, ["install", "--dsn", make_conninfo(queue, user=ROLE)])
    print(second.output)
    assert second.exit_code == 1, second.output
    assert "pg_cron is loaded in this server but its extension is not created in database 'postgres'" in (
        second.output
    )
    assert "CREATE EXTENSION pg_cron" in second.output and "--no-cron" in second.output
    with psycopg.connect(dsn, autocommit=True) as c:
        assert c.execute("SELECT count(*) FROM pg_extension WHERE extname = 'pg_cron'").fetchone()[0] == 0
    # --no-cron still installs without the sweeps.
    third = runner.invoke(main, ["install", "--dsn", make_conninfo(queue, user=ROLE), "--no-cron"])
    assert third.exit_code == 0, third.output
