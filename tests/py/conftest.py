"""Shared fixtures: a template database with pgq installed, built once per test session
and cloned per test module (CREATE DATABASE ... TEMPLATE is far faster than installing).

The server is the project's own cluster (`make db`); PGQ_TEST_DSN points at its
maintenance database. The tests are in folders by area, the helpers in support/:
README.md here says which folder holds what.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from pgq import migrate
from support.cluster import restart_problem, wait_for_server
from support.workers import WorkerProcess

ADMIN_DSN = os.environ.get("PGQ_TEST_DSN", "postgresql://postgres@127.0.0.1:54329/postgres")

# The SQL-level modules: they only talk SQL to the server (psycopg, the client, an in-process
# Worker, the CLI run in-process), with no worker processes, browser, proxy, restart or
# PostgreSQL client tools. They carry the marker `sql_level`: `make test-versions` (and
# `PGQ_PG_MAJOR=17 make test`) runs them against every supported major with `-m sql_level`;
# the other modules run on Debian's 15. A new module that fits belongs here.
SQL_LEVEL_MODULES = frozenset(
    {
        "test_claim_marks",
        "test_claim_races",
        "test_claim_rows",
        "test_cli_job",
        "test_client",
        "test_doctor",
        "test_dsn",
        "test_empty_queue_plans",
        "test_extension",
        "test_example_handlers",
        "test_faults_sql",
        "test_held_snapshot",
        "test_hostile_input",
        "test_isolate",
        "test_keys",
        "test_least_privilege",
        "test_managed",
        "test_migrations",
        "test_model",
        "test_retention",
        "test_security",
        "test_server_version",
        "test_sql_claim_plan",
        "test_sql_concurrency",
        "test_sql_leases",
        "test_sql_notify",
        "test_tracing",
        "test_unique",
        "test_wait",
    }
)


# `make test` runs the modules in two processes at once (pytest-xdist), then, alone, the
# tests marked `alone`: those that restart the cluster (which needs nobody else connected);
# those that read what all its databases share, where another test's work would show
# (pg_cron's jobs, other sessions' transactions, what `pgq doctor` reports); the benchmark,
# which takes both cores; and the rate limits' test, which counts starts per second of wall
# time (another process's load skews it). These modules are such tests throughout;
# elsewhere, a test that takes one of ALONE_FIXTURES is one.
ALONE_MODULES = frozenset(
    {
        "test_bench",
        "test_doctor",
        "test_durability",
        "test_rate_limit",
        "test_restore",
        "test_soak",
        "test_sweeps_health",
    }
)
ALONE_FIXTURES = frozenset({"crashable", "cron_cleanup", "hostile_databases", "needs_cron"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module is not None else ""
        if module in SQL_LEVEL_MODULES:
            item.add_marker(pytest.mark.sql_level)
        if module in ALONE_MODULES or ALONE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.alone)


# Debian's client tools (pg_dump, pg_restore) are 15's; the servers of the other majors come
# without any (scripts/pg-servers.sh), and pg_dump refuses a newer server.
PG_DUMP = os.environ.get("PGQ_PG_DUMP", "/usr/lib/postgresql/15/bin/pg_dump")


@functools.cache
def server_major() -> int:
    with psycopg.connect(ADMIN_DSN) as c:
        return int(c.execute("SELECT current_setting('server_version_num')::int / 10000").fetchone()[0])


@functools.cache
def server_has_pg_cron() -> bool:
    with psycopg.connect(ADMIN_DSN) as c:
        return c.execute("SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_cron')").fetchone()[0]


@functools.cache
def client_tools_major() -> int | None:
    try:
        out = subprocess.run([PG_DUMP, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    found = re.search(r"(\d+)(?:\.\d+)?", out)
    return int(found.group(1)) if found else None


def skip_without_pg_cron() -> None:
    if not server_has_pg_cron():
        pytest.skip(
            f"needs pg_cron, which the PostgreSQL {server_major()} server under test lacks"
            " (only Debian's 15 has it here)"
        )


def skip_without_client_tools() -> None:
    """pg_dump reads servers of its own major and older ones, never newer ones."""
    client = client_tools_major()
    if client is None or client < server_major():
        pytest.skip(
            f"needs client tools of the server's version (or newer): {PG_DUMP} is PostgreSQL"
            f" {client}, the server under test is {server_major()}"
        )


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked needs_pg_cron / needs_client_tools skip, saying why, on a server without
    pg_cron or newer than the client tools (PGQ_PG_MAJOR, make test-versions)."""
    if item.get_closest_marker("needs_pg_cron"):
        skip_without_pg_cron()
    if item.get_closest_marker("needs_client_tools"):
        skip_without_client_tools()


def admin_execute(*statements: sql.Composable | str) -> None:
    with psycopg.connect(ADMIN_DSN, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def db_dsn(name: str) -> str:
    return make_conninfo(ADMIN_DSN, dbname=name)


def create_database(name: str, template: str | None = None) -> str:
    stmt = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template:
        stmt = sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(template)
        )
    admin_execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)), stmt)
    return db_dsn(name)


def drop_database(name: str) -> None:
    admin_execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(scope="session")
def template_db() -> Iterator[str]:
    name = f"pgq_template_{os.getpid()}"
    migrate.install(create_database(name), cron=False)
    yield name
    drop_database(name)


@pytest.fixture(scope="module")
def dsn(request: pytest.FixtureRequest, template_db: str) -> Iterator[str]:
    """A database of this test module's own, with pgq installed."""
    module = re.sub(r"[^a-z0-9_]", "_", request.module.__name__.rsplit(".", 1)[-1].lower())[:30]
    name = f"pgq_{module}_{os.getpid()}"
    yield create_database(name, template=template_db)
    drop_database(name)


@pytest.fixture
def fresh_db() -> Iterator[str]:
    """An empty database (no pgq), dropped after the test."""
    name = f"pgq_fresh_{uuid.uuid4().hex[:12]}"
    yield create_database(name)
    drop_database(name)


@pytest.fixture
def conn(dsn: str) -> Iterator[psycopg.Connection]:
    """An autocommit connection to the module's database."""
    with psycopg.connect(dsn, autocommit=True) as c:
        yield c


@pytest.fixture(autouse=True)
def _clean_queue(request: pytest.FixtureRequest) -> Iterator[None]:
    """Tests that use the module database start from an empty queue."""
    yield
    if "dsn" in request.fixturenames:
        dsn = request.getfixturevalue("dsn")
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute(
                "TRUNCATE pgq._jobs, pgq._outcomes, pgq._workers, pgq._queues, pgq._schedules,"
                " pgq._marks, pgq._mark_lows, pgq._steps, pgq._progress, pgq._batches, pgq._batch_members"
            )


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    """Where worker_app's handlers write what they did (workers.ledger_lines reads it)."""
    return tmp_path


@pytest.fixture
def spawn(dsn: str, ledger: Path) -> Iterator[Callable[..., WorkerProcess]]:
    """Starts real `pgq worker` processes on the module's database (or on worker_dsn); any
    still running when the test ends is killed."""
    started: list[WorkerProcess] = []

    def start(worker_dsn: str | None = None, *args: str, **env: str) -> WorkerProcess:
        proc = WorkerProcess(worker_dsn or dsn, ledger, *args, **env)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.proc.poll() is None:
            proc.kill()


@pytest.fixture
def crashable(dsn: str) -> Iterator[None]:
    """For a test that stops, restarts or crashes the cluster (cluster.py says when it may);
    the server is up again when the test ends."""
    problem = restart_problem(dsn)
    if problem:
        pytest.skip(problem)
    yield
    wait_for_server(dsn)
