"""pg_cron stopped: `pgq doctor` says so, and pgq.sweeps (status, dashboard, /metrics) shows
when each sweep last ran.

The report that started it: pg_cron's launcher could not start, no sweep ran for 75 s, and
doctor printed "healthy" (it looked only at cron.job rows and failed runs)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families
from psycopg.conninfo import make_conninfo

from conftest import ADMIN_DSN
from pgq import cron, migrate
from pgq.cli.main import main
from pgq.web.app import Config
from support.cluster import DB_SH, REPO
from support.dashboard_server import request, serve
from test_doctor import cron_cleanup, installed, sql  # noqa: F401 (fixtures)
from test_migrations import dbname


def doctor(dsn: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["doctor", "--dsn", dsn])
    return result.exit_code, result.output


def test_a_sweep_pg_cron_no_longer_runs_is_reported_with_its_last_run(installed: str) -> None:  # noqa: F811
    job = cron.job_name("reap", dbname(installed))
    with psycopg.connect(ADMIN_DSN, autocommit=True) as c:
        jobid = c.execute("SELECT jobid FROM cron.job WHERE jobname = %s", (job,)).fetchone()[0]
        # The real pg_cron, told to run it once a year: its last run stays ten minutes old.
        c.execute("SELECT cron.alter_job(%s, schedule => '0 0 1 1 *')", (jobid,))
        c.execute("DELETE FROM cron.job_run_details WHERE jobid = %s", (jobid,))
        c.execute(
            "INSERT INTO cron.job_run_details (jobid, runid, database, username, command, status,"
            " return_message, start_time, end_time)"
            " SELECT jobid, nextval('cron.runid_seq'), database, username, command, 'succeeded',"
            " 'SELECT 1', now() - interval '10 minutes', now() - interval '10 minutes'"
            " FROM cron.job WHERE jobid = %s",
            (jobid,),
        )
    code, out = doctor(installed)
    print(out)
    assert code == 1
    assert out.startswith("sweeps: pg_cron sweeps have not run for twice their interval:")
    assert f"{job} (every minute) last ran" in out and "reap last ran never" in out
    assert "server log" in out.split(" -> ")[1]
    # Once it runs again (here by hand, as pg_cron would), healthy.
    with psycopg.connect(ADMIN_DSN, autocommit=True) as c:
        c.execute("UPDATE cron.job_run_details SET start_time = now() WHERE jobid = %s", (jobid,))
    assert doctor(installed) == (0, "healthy: no problems found\n")


def test_pgq_sweeps_shows_when_each_sweep_last_ran(dsn: str, conn: psycopg.Connection) -> None:
    conn.execute("DELETE FROM pgq._maintenance")
    conn.execute("DELETE FROM pgq._schedules")
    rows = {r[0]: r[1:] for r in conn.execute("SELECT sweep, last_run, late FROM pgq.sweeps")}
    assert rows == {"reap": (None, None), "run_schedules": (None, None), "prune": (None, None)}
    conn.execute("SELECT pgq.reap()")
    conn.execute("SELECT pgq.prune()")
    rows = {r[0]: r[1:] for r in conn.execute("SELECT sweep, last_run IS NOT NULL, late FROM pgq.sweeps")}
    assert rows == {"reap": (True, None), "run_schedules": (False, None), "prune": (True, None)}
    # Late: a reap three minutes ago is two minutes late; a schedule due for five minutes.
    conn.execute("UPDATE pgq._maintenance SET last_run = now() - interval '3 minutes' WHERE task = 'reap'")
    conn.execute("SELECT pgq.schedule('sweeps_late', '* * * * *', 'sweeps_late')")
    conn.execute("UPDATE pgq._schedules SET next_run = now() - interval '5 minutes'")
    late = dict(conn.execute("SELECT sweep, extract(epoch FROM late)::int FROM pgq.sweeps").fetchall())
    assert late["reap"] == 120 and late["run_schedules"] == 240 and late["prune"] is None
    # pgq status, the dashboard's schedules page and /metrics show it.
    status = CliRunner().invoke(main, ["status", "--dsn", dsn])
    assert status.exit_code == 0, status.output
    table = status.output[status.output.index("sweeps") :]
    assert "reap" in table and "2m00s" in table and "never" not in table.split("run_schedules")[0]
    with serve(Config(dsn=dsn)) as served:
        _, page, _ = request(served.url + "/schedules")
        assert 'id="sweeps-table"' in page and '<tr class="late"><td>reap</td>' in page
        _, text, _ = request(served.url + "/metrics")
        families = {f.name: f for f in text_string_to_metric_families(text)}
        late_s = {s.labels["sweep"]: s.value for s in families["pgq_sweep_late_seconds"].samples}
        assert late_s["reap"] >= 120 and late_s["prune"] == 0
        last = {s.labels["sweep"]: s.value for s in families["pgq_sweep_last_run_timestamp_seconds"].samples}
        assert abs(last["reap"] - (time.time() - 180)) < 60
    conn.execute("SELECT pgq.unschedule('sweeps_late')")


# --- a private cluster of the real pg_cron, restarted without it and without its launcher ---


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def private_cluster() -> Iterator[tuple[str, Path]]:
    """A cluster of its own (scripts/db.sh, pg_cron preloaded) on a free port, shared by the
    tests below (each leaves pg_cron created and loaded, as it found it)."""
    base = REPO / ".pgdata" / f"doctor-cron-{os.getpid()}"
    env = {**os.environ, "PGQ_PGDATA": str(base), "PGQ_PORT": str(_free_port())}
    subprocess.run([str(DB_SH), "start"], env=env, check=True, capture_output=True, timeout=180)
    try:
        yield f"postgresql://postgres@127.0.0.1:{env['PGQ_PORT']}/postgres", base
    finally:
        subprocess.run([str(DB_SH), "stop"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(base, ignore_errors=True)


def _restart(base: Path, options: str) -> None:
    """Restart the private cluster with server options (-c name=value ...)."""
    pg_ctl = "/usr/lib/postgresql/15/bin/pg_ctl"
    owner = ["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []
    data = str(base / "data")
    subprocess.run([*owner, pg_ctl, "-D", data, "-m", "fast", "-w", "stop"], check=True, capture_output=True)
    log = str(base / "server.log")
    start = [*owner, pg_ctl, "-D", data, "-l", log, "-w", "-t", "60", "-o", options, "start"]
    subprocess.run(start, check=True, capture_output=True)


ROLE = "protocol_cron_installer"


def test_install_with_pg_cron_loaded_but_not_created(private_cluster: tuple[str, Path]) -> None:
    """`pgq install` where pg_cron is preloaded but its extension was not created in pg_cron's
    database (issue 35): it exited 0 with a warning, the sweeps unscheduled. A superuser's
    install creates the extension and schedules them; a role that may not create it gets an
    error and a non-zero exit, and nothing is changed."""
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
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE EXTENSION pg_cron")  # as the next test expects it
        c.execute("DROP DATABASE protocol_queue WITH (FORCE)")


def test_pg_cron_not_running_is_reported(private_cluster: tuple[str, Path]) -> None:
    dsn, base = private_cluster
    migrate.install(dsn, cron=True)
    assert doctor(dsn) == (0, "healthy: no problems found\n")

    # pg_cron left out of shared_preload_libraries: its jobs stay in cron.job, none runs.
    _restart(base, "-c shared_preload_libraries=''")
    code, out = doctor(dsn)
    print(out)
    assert code == 1
    assert out.startswith("sweeps: pg_cron is not loaded (shared_preload_libraries), but 3 pgq sweeps")
    assert "reap last ran" in out and "run_schedules last ran" in out

    # Loaded, but its launcher cannot start (here: no background worker slot for it).
    _restart(base, "-c max_worker_processes=0")
    with psycopg.connect(dsn, autocommit=True) as c:
        assert c.execute("SHOW shared_preload_libraries").fetchone()[0] == "pg_cron"
        launchers = "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_cron launcher'"
        assert c.execute(launchers).fetchone()[0] == 0
    code, out = doctor(dsn)
    print(out)
    assert code == 1
    assert out.startswith("sweeps: pg_cron is loaded but its launcher is not running: no sweep runs")

    # Back to normal: the launcher runs, doctor is content again.
    _restart(base, "-c max_worker_processes=32")
    with psycopg.connect(dsn, autocommit=True) as c:
        assert c.execute(launchers).fetchone()[0] == 1
    assert doctor(dsn) == (0, "healthy: no problems found\n")

    # pg_cron not logging its runs (cron.log_run off): the queue database's record of
    # pgq.reap is the witness. The real pg_cron, told to run the reap once a year.
    _restart(base, "-c cron.log_run=off")
    with psycopg.connect(dsn, autocommit=True) as c:
        job = cron.job_name("reap", "postgres")
        c.execute(
            "SELECT cron.alter_job(jobid, schedule => '0 0 1 1 *') FROM cron.job WHERE jobname = %s", (job,)
        )
        c.execute("DELETE FROM cron.job_run_details")
        c.execute("UPDATE pgq._migrations SET applied_at = now() - interval '1 hour'")
        c.execute("SELECT pgq.reap()")
        assert doctor(dsn) == (0, "healthy: no problems found\n")
        c.execute("UPDATE pgq._maintenance SET last_run = now() - interval '10 minutes' WHERE task = 'reap'")
        code, out = doctor(dsn)
        print(out)
        assert code == 1 and f"{job} (every minute) last ran" in out and "run-schedules" not in out


def test_the_heartbeat_writes_no_sweep_record(conn: psycopg.Connection) -> None:
    """Every worker's heartbeat runs the light sweep: a write there would serialize them."""
    conn.execute("SELECT pgq.schedule('sweeps_hb', '* * * * *', 'sweeps_hb')")
    worker = conn.execute("SELECT pgq.register_worker('hb', ARRAY['sweeps_hb'])").fetchone()[0]
    conn.execute("DELETE FROM pgq._maintenance")
    for _ in range(3):
        conn.execute("SELECT * FROM pgq.heartbeat(%s)", (worker,)).fetchall()
    assert conn.execute("SELECT count(*) FROM pgq._maintenance").fetchone()[0] == 0
    conn.execute("SELECT pgq.unregister_worker(%s)", (worker,))
    conn.execute("SELECT pgq.unschedule('sweeps_hb')")
