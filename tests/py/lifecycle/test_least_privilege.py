"""Least privilege with real login roles: a worker id is bound to the role that registered
it, and `pgq status` works for the roles that may read it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql
from psycopg.conninfo import make_conninfo

from conftest import admin_execute
from pgq.cli.main import main

# Each call a worker makes, with the worker id as its first argument.
WORKER_CALLS = {
    "claim": "SELECT * FROM pgq.claim(%s, ARRAY['lp'])",
    "heartbeat": "SELECT * FROM pgq.heartbeat(%s)",
    "complete": "SELECT * FROM pgq.complete(%s, ARRAY[{job}]::bigint[])",
    "fail": "SELECT pgq.fail(%s, {job}, 'not mine')",
    "release": "SELECT pgq.release(%s, '{{}}'::bigint[])",
    "unregister_worker": "SELECT pgq.unregister_worker(%s)",
}


@pytest.fixture(scope="module")
def logins(dsn: str) -> Iterator[dict[str, str]]:
    """DSNs of login roles: two teams' workers and an admin."""
    tag = uuid.uuid4().hex[:8]
    roles = {"team_a": "pgq_worker", "team_b": "pgq_worker", "admin": "pgq_admin"}
    names = {kind: f"lp_{kind}_{tag}" for kind in roles}
    for kind, group in roles.items():
        admin_execute(
            sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(
                sql.Identifier(names[kind]), sql.Identifier(group)
            )
        )
    try:
        yield {kind: make_conninfo(dsn, user=name) for kind, name in names.items()}
    finally:
        for name in names.values():
            admin_execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


@pytest.mark.parametrize("call", WORKER_CALLS)
def test_another_worker_role_cannot_act_as_a_worker(dsn: str, logins: dict[str, str], call: str) -> None:
    with (
        psycopg.connect(dsn, autocommit=True) as admin,
        psycopg.connect(logins["team_a"], autocommit=True) as a,
        psycopg.connect(logins["team_b"], autocommit=True) as b,
    ):
        job = admin.execute("SELECT pgq.enqueue('lp')").fetchone()[0]
        worker = a.execute("SELECT pgq.register_worker('a', ARRAY['lp'])").fetchone()[0]
        assert [r[0] for r in a.execute("SELECT id FROM pgq.claim(%s, ARRAY['lp'])", (worker,))] == [job]
        # team_b can read team_a's worker id from pgq.workers ...
        ids = [r[0] for r in b.execute("SELECT id FROM pgq.workers")]
        assert worker in ids
        # ... but cannot use it.
        with pytest.raises(psycopg.Error) as err:
            b.execute(WORKER_CALLS[call].format(job=job), (worker,)).fetchall()
        assert err.value.sqlstate == "PQ010", err.value
        assert "registered by role" in str(err.value)
        held = admin.execute("SELECT status, worker_id FROM pgq._jobs WHERE id = %s", (job,)).fetchone()
        assert held == ("running", worker), "the refused call changed the job"
        assert (
            admin.execute("SELECT state FROM pgq._workers WHERE id = %s", (worker,)).fetchone()[0] == "alive"
        )
        # The owner and an admin may.
        assert a.execute(WORKER_CALLS["heartbeat"], (worker,)).fetchall() == []
        with psycopg.connect(logins["admin"], autocommit=True) as adm:
            assert adm.execute("SELECT pgq.unregister_worker(%s)", (worker,)).fetchone()[0] == 1
        admin.execute("SELECT pgq.cancel(ARRAY[%s]::bigint[])", (job,))


def test_workers_registered_before_the_binding_stay_usable(dsn: str, logins: dict[str, str]) -> None:
    """A worker of the previous version has no registered role: the upgrade must not lock it out."""
    with (
        psycopg.connect(dsn, autocommit=True) as admin,
        psycopg.connect(logins["team_b"], autocommit=True) as b,
    ):
        worker = admin.execute("SELECT pgq.register_worker('old', ARRAY['lp_old'])").fetchone()[0]
        admin.execute("UPDATE pgq._workers SET registered_by = NULL WHERE id = %s", (worker,))
        assert b.execute("SELECT * FROM pgq.heartbeat(%s)", (worker,)).fetchall() == []
        assert b.execute("SELECT pgq.unregister_worker(%s)", (worker,)).fetchone()[0] == 0


@pytest.mark.parametrize("kind", ["team_a", "admin"])
def test_pgq_status_works_for_workers_and_admins(dsn: str, logins: dict[str, str], kind: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("SELECT pgq.enqueue('lp_status')")
    result = CliRunner().invoke(main, ["status", "--dsn", logins[kind]])
    assert result.exit_code == 0, result.output
    assert "lp_status" in result.output
