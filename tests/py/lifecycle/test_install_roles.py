"""Two queue databases in one cluster, each installed with roles of its own (`pgq install
--roles PREFIX`), each by a database owner that is no superuser: a login given a role of
one install can do nothing in the other, and neither installer becomes a member of the
other's owner or admin role. Roles belong to the cluster, so with the default names (one
set of roles for every database) all of this would fail."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql
from psycopg.conninfo import make_conninfo

from conftest import ADMIN_DSN, admin_execute, drop_database
from pgq import doctor, migrate
from pgq import roles as pgroles
from pgq.cli.main import main
from pgq.errors import SchemaError

# What each kind of role may do, one statement each, and what no role of another install
# may do in this database: register, claim, read, administer.
CALLS = {
    "producer": ["SELECT pgq.enqueue('ir')", "SELECT pgq.job_status(1)", "SELECT pgq.job(1)"],
    "worker": [
        "SELECT pgq.register_worker('w', ARRAY['ir'])",
        "SELECT * FROM pgq.claim(pgq.register_worker('w2', ARRAY['ir']), ARRAY['ir'])",
        "SELECT count(*) FROM pgq.queues",
        "SELECT count(*) FROM pgq.workers",
    ],
    "admin": [
        "SELECT pgq.pause('ir')",
        "SELECT pgq.cancel(ARRAY[1]::bigint[])",
        "SELECT count(*) FROM pgq.jobs",
        "SELECT pgq.prune()",
    ],
}


@dataclass(frozen=True)
class Install:
    installer: str
    dsn: str  # as the installer
    prefix: str
    logins: dict[str, str]  # kind -> login role in <prefix><kind>

    def as_login(self, kind: str, other: Install | None = None) -> str:
        """DSN of this install's login of `kind`, connected to `other`'s database."""
        return make_conninfo((other or self).dsn, user=self.logins[kind])


def ident(name: str) -> sql.Identifier:
    return sql.Identifier(name)


@pytest.fixture(scope="module")
def installs() -> Iterator[tuple[Install, Install]]:
    tag = uuid.uuid4().hex[:8]
    made: list[Install] = []
    created_roles: list[str] = []
    databases: list[str] = []
    try:
        for side in ("a", "b"):
            installer = f"privilege_inst_{side}_{tag}"
            db = f"privilege_db_{side}_{tag}"
            prefix = f"privilege_{side}{tag}_"
            admin_execute(
                sql.SQL("CREATE ROLE {} LOGIN CREATEDB CREATEROLE").format(ident(installer)),
                sql.SQL("CREATE DATABASE {} OWNER {}").format(ident(db), ident(installer)),
            )
            created_roles.append(installer)
            databases.append(db)
            dsn = make_conninfo(ADMIN_DSN, dbname=db, user=installer)
            if side == "a":
                migrate.install(dsn, cron=False, roles=prefix)
            else:  # the CLI's way
                result = CliRunner().invoke(main, ["install", "--dsn", dsn, "--no-cron", "--roles", prefix])
                assert result.exit_code == 0, result.output
                assert f"roles of this install: {prefix}owner" in result.output
            created_roles += pgroles.names(prefix)
            logins = {}
            for kind in ("producer", "worker", "admin"):
                login = f"privilege_{side}_{kind}_{tag}"
                with psycopg.connect(dsn, autocommit=True) as c:  # the installer has CREATEROLE
                    c.execute(
                        sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(ident(login), ident(prefix + kind))
                    )
                created_roles.append(login)
                logins[kind] = login
            made.append(Install(installer, dsn, prefix, logins))
        yield made[0], made[1]
    finally:
        for db in databases:
            drop_database(db)
        for role in reversed(created_roles):
            admin_execute(sql.SQL("DROP ROLE IF EXISTS {}").format(ident(role)))


def test_each_install_is_owned_and_granted_by_its_own_roles(installs: tuple[Install, Install]) -> None:
    for inst in installs:
        with psycopg.connect(inst.dsn, autocommit=True) as c:
            owners = c.execute(
                "SELECT DISTINCT proowner::regrole::text FROM pg_proc"
                " WHERE pronamespace = 'pgq'::regnamespace"
                " UNION SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'pgq'"
            ).fetchall()
            assert owners == [(inst.prefix + "owner",)]
            assert c.execute("SELECT role_prefix FROM pgq._install").fetchone()[0] == inst.prefix
            assert pgroles.installed_prefix(c) == inst.prefix
            # The function bodies name this install's admin role, not the default one.
            body = c.execute(
                "SELECT pg_get_functiondef('pgq._check_worker_role(uuid)'::regprocedure)"
            ).fetchone()[0]
            assert f"'{inst.prefix}admin'" in body and "pgq_admin" not in body
            # Not one privilege in schema pgq for a role of another install, or the default ones.
            grantees = {
                r[0]
                for r in c.execute(
                    "SELECT DISTINCT a.grantee::regrole::text FROM pg_proc AS p,"
                    " aclexplode(p.proacl) AS a WHERE p.pronamespace = 'pgq'::regnamespace"
                    " UNION SELECT DISTINCT a.grantee::regrole::text FROM pg_class AS cl,"
                    " aclexplode(cl.relacl) AS a WHERE cl.relnamespace = 'pgq'::regnamespace"
                )
            }
            assert grantees == {inst.prefix + k for k in ("owner", "producer", "worker", "admin")}
            assert doctor.check_roles_and_grants(c, doctor.Limits()) == []
        # A role that may not read pgq._install (an admin login) finds the prefix too.
        with psycopg.connect(inst.as_login("admin"), autocommit=True) as c:
            assert c.execute("SELECT has_table_privilege('pgq._install', 'SELECT')").fetchone()[0] is False
            assert pgroles.installed_prefix(c) == inst.prefix
            assert doctor.check_roles_and_grants(c, doctor.Limits()) == []


def test_an_installer_is_a_member_of_its_own_roles_only(installs: tuple[Install, Install]) -> None:
    a, b = installs
    with psycopg.connect(ADMIN_DSN, autocommit=True) as c:
        for inst, other in ((a, b), (b, a)):
            for kind in ("owner", "admin"):
                member = "SELECT pg_has_role(%s, %s, 'MEMBER')"
                assert c.execute(member, (inst.installer, inst.prefix + kind)).fetchone()[0] is True
                assert c.execute(member, (inst.installer, other.prefix + kind)).fetchone()[0] is False
                assert c.execute(member, (inst.installer, "pgq_" + kind)).fetchone()[0] is False


@pytest.mark.parametrize("kind", CALLS)
def test_a_login_of_one_install_can_do_nothing_in_the_other(
    installs: tuple[Install, Install], kind: str
) -> None:
    a, b = installs
    for inst, other in ((a, b), (b, a)):
        # At home, the login does what its role is for ...
        with psycopg.connect(inst.as_login(kind), autocommit=True) as home:
            for statement in CALLS[kind]:
                home.execute(statement).fetchall()
        # ... and in the other database (PUBLIC may CONNECT) none of any role's calls.
        with psycopg.connect(inst.as_login(kind, other), autocommit=True) as away:
            for statement in [s for calls in CALLS.values() for s in calls]:
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    away.execute(statement)


def test_the_prefix_is_recorded_and_cannot_be_changed(installs: tuple[Install, Install]) -> None:
    a, _ = installs
    for call in (migrate.install, migrate.upgrade):
        with pytest.raises(SchemaError, match=f"prefix '{a.prefix}'"):
            call(a.dsn, cron=False, roles="pgq_")
    # Without --roles (and with the same one) an upgrade keeps the install's roles.
    migrate.upgrade(a.dsn, cron=False)
    migrate.install(a.dsn, cron=False, roles=a.prefix)
    with psycopg.connect(a.dsn, autocommit=True) as c:
        assert c.execute("SELECT role_prefix FROM pgq._install").fetchone()[0] == a.prefix
        assert doctor.check_roles_and_grants(c, doctor.Limits()) == []
        assert (
            c.execute(
                "SELECT has_function_privilege('pgq_worker', 'pgq.claim(uuid, text[], integer)', 'EXECUTE')"
            ).fetchone()[0]
            is False
        )


@pytest.mark.parametrize("prefix", ["App1_", "1app_", "app-1_", "app1_'; DROP TABLE x; --", "a" * 56, ""])
def test_an_unusable_prefix_is_refused_before_anything_changes(fresh_db: str, prefix: str) -> None:
    with pytest.raises(SchemaError, match="role prefix"):
        migrate.install(fresh_db, cron=False, roles=prefix)
    with psycopg.connect(fresh_db, autocommit=True) as c:
        assert c.execute("SELECT to_regnamespace('pgq')").fetchone()[0] is None


def test_uninstall_names_the_installs_roles(installs: tuple[Install, Install], fresh_db: str) -> None:
    prefix = installs[0].prefix
    migrate.install(fresh_db, cron=False, roles=prefix)
    done = migrate.uninstall(fresh_db)
    assert any(f"roles {prefix}owner, {prefix}producer" in line for line in done), done
