"""The pytest plugin (entry point `pgq`, loaded wherever pgq-sql is installed).

It only adds options and fixtures: nothing connects to a database until a test asks for a
pgq_* fixture, so test suites that do not use them run as before.

    pgq_dsn      a fresh database with pgq installed, for this test; dropped after it
    pgq_client   a pgq.Client on it

The server is given by --pgq-dsn, else $PGQ_TEST_DSN, else the `pgq_dsn` ini option: a DSN
of a role that may create databases (e.g. postgresql://postgres@localhost/postgres).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..client import Client
    from .databases import Databases

ENV = "PGQ_TEST_DSN"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pgq", "pgq test databases")
    group.addoption(
        "--pgq-dsn",
        dest="pgq_dsn",
        default=None,
        help=f"admin DSN of the server where pgq fixtures create test databases (or ${ENV})",
    )
    group.addoption(
        "--pgq-db-prefix",
        dest="pgq_db_prefix",
        default=None,
        help="prefix of the test databases' names (default pgqtest)",
    )
    parser.addini("pgq_dsn", f"admin DSN for the pgq fixtures (--pgq-dsn and ${ENV} win)", default="")
    parser.addini("pgq_db_prefix", "prefix of the pgq test databases' names", default="pgqtest")


def admin_dsn(config: pytest.Config) -> str | None:
    """The admin DSN the fixtures use: --pgq-dsn, $PGQ_TEST_DSN, ini pgq_dsn; None if none."""
    value = config.getoption("pgq_dsn") or os.environ.get(ENV) or config.getini("pgq_dsn")
    return str(value) if value else None


@pytest.fixture(scope="session")
def pgq_databases(pytestconfig: pytest.Config) -> Iterator[Databases]:
    """The template with pgq installed (built once per test process) and the clones."""
    from .databases import Databases

    dsn = admin_dsn(pytestconfig)
    if dsn is None:
        raise pytest.UsageError(
            "the pgq fixtures need a PostgreSQL server where they may create databases:"
            f" pass --pgq-dsn, set ${ENV}, or set pgq_dsn in the pytest ini file"
        )
    prefix = pytestconfig.getoption("pgq_db_prefix") or pytestconfig.getini("pgq_db_prefix")
    databases = Databases(dsn, prefix=str(prefix))
    databases.open()
    try:
        yield databases
    finally:
        databases.close()


@pytest.fixture
def pgq_dsn(pgq_databases: Databases) -> Iterator[str]:
    """The DSN of a database of this test's own, with pgq installed (no pg_cron jobs: a
    worker, or drain(), does the sweeps). Dropped after the test."""
    name = pgq_databases.create()
    try:
        yield pgq_databases.dsn(name)
    finally:
        pgq_databases.drop(name)


@pytest.fixture
def pgq_client(pgq_dsn: str) -> Iterator[Client]:
    """A pgq.Client on this test's database."""
    from ..client import Client

    with Client(pgq_dsn) as client:
        yield client
