"""Shared fixtures: a template database with pgq installed, built once per test session
and cloned per test module (CREATE DATABASE ... TEMPLATE is far faster than installing).

The server is the project's own cluster (`make db`); PGQ_TEST_DSN points at its
maintenance database.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from pgq import migrate

ADMIN_DSN = os.environ.get("PGQ_TEST_DSN", "postgresql://postgres@127.0.0.1:54329/postgres")


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
                " pgq._marks, pgq._mark_lows"
            )
