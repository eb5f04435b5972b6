"""pgq supports PostgreSQL 14 to 18 (docs/install.md, "Supported PostgreSQL versions"). On an older
server every install path refuses before anything changes: sql/require_server.sql, the first
SQL that `pgq install` and `pgq upgrade` run and the first of both the schema and the code
files (what an install by hand with psql would run), raises PQ011 with the server's version
and a hint.

The `unsupported` tests need a real PostgreSQL 13 server: `make refuse-unsupported` (part of
`make test-versions` and `make tap-versions`) starts one from scripts/pg-servers.sh and points
PGQ_UNSUPPORTED_DSN at it. The other tests run on the server under test (any supported major).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql
from psycopg.conninfo import make_conninfo

import pgq
from pgq import migrate, resources
from pgq.cli.main import main

UNSUPPORTED_DSN = os.environ.get("PGQ_UNSUPPORTED_DSN")
unsupported = pytest.mark.skipif(
    UNSUPPORTED_DSN is None,
    reason="needs PGQ_UNSUPPORTED_DSN, a PostgreSQL 13 server (make refuse-unsupported starts one)",
)


def guard_sql() -> str:
    return (resources.sql_root() / "sql" / "require_server.sql").read_text()


def cluster_state(dsn: str) -> tuple[object, ...]:
    """What an install could leave behind: the cluster's roles, the database's schemas,
    relations, functions and types, and the server's own version."""
    with psycopg.connect(dsn) as c:
        return tuple(
            c.execute(query).fetchall()
            for query in (
                "SELECT rolname FROM pg_roles ORDER BY 1",
                "SELECT nspname FROM pg_namespace ORDER BY 1",
                "SELECT relnamespace::regnamespace::text, relname FROM pg_class"
                " WHERE relnamespace <> 'pg_catalog'::regnamespace"
                " AND relnamespace <> 'information_schema'::regnamespace"
                " AND relnamespace::regnamespace::text NOT LIKE 'pg_toast%' ORDER BY 1, 2",
                "SELECT pronamespace::regnamespace::text, proname FROM pg_proc"
                " WHERE pronamespace <> 'pg_catalog'::regnamespace"
                " AND pronamespace <> 'information_schema'::regnamespace ORDER BY 1, 2",
                "SELECT count(*) FROM pg_type",
                "SELECT current_setting('server_version')",
            )
        )


@pytest.fixture
def old_db() -> Iterator[str]:
    """An empty database on the unsupported server, dropped after the test."""
    assert UNSUPPORTED_DSN is not None
    name = f"pgq_refuse_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(UNSUPPORTED_DSN, autocommit=True) as c:
        c.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield make_conninfo(UNSUPPORTED_DSN, dbname=name)
    with psycopg.connect(UNSUPPORTED_DSN, autocommit=True) as c:
        c.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))


@unsupported
def test_unsupported_server_is_really_older_than_14() -> None:
    """Guard against proving the refusal on the wrong server."""
    with psycopg.connect(UNSUPPORTED_DSN) as c:
        assert c.info.server_version < 140000, c.info.server_version


@unsupported
@pytest.mark.parametrize("args", [["--no-cron"], []], ids=["no_cron", "with_cron"])
def test_unsupported_pgq_install_refuses_naming_the_version_and_changes_nothing(
    old_db: str, args: list[str]
) -> None:
    before = cluster_state(old_db)
    version = before[-1][0][0]

    result = CliRunner().invoke(main, ["install", "--dsn", old_db, *args])

    assert result.exit_code == 1, result.output
    assert f"pgq needs PostgreSQL 14 or newer; this server is PostgreSQL {version}" in result.output
    assert "(hint: " in result.output
    assert cluster_state(old_db) == before, "a refused install must change nothing"


@unsupported
def test_unsupported_install_and_upgrade_raise_unsupported_server_with_pq011(old_db: str) -> None:
    before = cluster_state(old_db)
    for call in (migrate.install, migrate.upgrade):
        with pytest.raises(pgq.UnsupportedServer, match="needs PostgreSQL 14 or newer") as info:
            call(old_db, cron=False)
        assert info.value.sqlstate == "PQ011"
        assert isinstance(info.value, pgq.SchemaError)
    assert cluster_state(old_db) == before


@unsupported
def test_unsupported_an_install_by_hand_meets_the_refusal_first(old_db: str) -> None:
    """psql -1 -f of the schema then the code files, in the order pgq install runs them: the
    refusal is the first statement to fail, and the transaction leaves nothing behind."""
    before = cluster_state(old_db)
    with (
        psycopg.connect(old_db, autocommit=True) as c,
        pytest.raises(psycopg.Error) as info,
        c.transaction(),
    ):
        for path in [*resources.schema_files(), *resources.code_files()]:
            c.execute(path.read_text())
    assert info.value.sqlstate == "PQ011", info.value
    assert info.value.diag.message_hint and "PostgreSQL 14" in info.value.diag.message_hint
    assert cluster_state(old_db) == before


def test_the_refusal_is_the_first_file_of_every_install_path() -> None:
    guard = resources.sql_root() / "sql" / "require_server.sql"
    assert resources.schema_files()[0] == guard
    assert resources.code_files()[0] == guard


def test_a_supported_server_passes_the_check_and_nothing_changes(conn: psycopg.Connection) -> None:
    """On the server under test (14 to 18), the guard is a no-op."""
    assert 140000 <= conn.info.server_version < 190000, "tested servers are 14 to 18"
    before = conn.execute("SELECT count(*) FROM pg_class").fetchone()
    conn.execute(guard_sql())
    assert conn.execute("SELECT count(*) FROM pg_class").fetchone() == before
