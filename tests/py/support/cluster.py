"""Restarting the PostgreSQL cluster under test (the soak and the durability test do).

The cluster is the one scripts/db.sh manages with the PGQ_PORT / PGQ_PGDATA of this run
(defaults 54329 and the repo's .pgdata, as in db.sh). Before restarting anything, the tests
make sure that the DSN under test points at that cluster and that nobody else is using it.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict

from pgq.testing.databases import APPLICATION_NAME

REPO = Path(__file__).resolve().parents[3]
DB_SH = REPO / "scripts" / "db.sh"


def cluster_env() -> dict[str, str]:
    """The environment scripts/db.sh needs to act on the cluster under test."""
    return {
        **os.environ,
        "PGQ_PORT": os.environ.get("PGQ_PORT", "54329"),
        "PGQ_PGDATA": os.environ.get("PGQ_PGDATA", str(REPO / ".pgdata")),
    }


def restart_problem(dsn: str) -> str | None:
    """Why restarting the cluster behind dsn would be wrong, or None when it is safe:
    the DSN must be on db.sh's port, and no other client may be connected."""
    env = cluster_env()
    port = str(conninfo_to_dict(dsn).get("port") or "5432")
    if port != env["PGQ_PORT"]:
        return (
            f"the DSN under test uses port {port} but scripts/db.sh would restart the cluster on"
            f" port {env['PGQ_PORT']}: set PGQ_PORT (and PGQ_PGDATA) to match"
        )
    with psycopg.connect(dsn, autocommit=True) as conn:
        others = conn.execute(
            "SELECT count(*), string_agg(DISTINCT datname, ', ') FROM pg_stat_activity"
            " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
            # pgq.testing's idle session of this very test run: it reconnects after a restart.
            " AND application_name IS DISTINCT FROM %s",
            (APPLICATION_NAME,),
        ).fetchone()
    if others[0]:
        return (
            f"{others[0]} other clients are connected to the cluster on port {port} (databases"
            f" {others[1]}); restart tests need a cluster of their own: run them with"
            " PGQ_PORT / PGQ_PGDATA pointing at a private one"
        )
    return None


def db_sh(command: str, timeout: float = 120) -> str:
    """Run scripts/db.sh COMMAND (start, restart = stop -m fast, crash = stop -m immediate)."""
    done = subprocess.run(
        [str(DB_SH), command],
        env=cluster_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"scripts/db.sh {command} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def wait_for_server(dsn: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(dsn, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
