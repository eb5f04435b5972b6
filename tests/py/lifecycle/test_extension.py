"""pgq from psql alone: the extension (CREATE EXTENSION pgq, ALTER EXTENSION pgq UPDATE) and
the plain scripts of `pgq sql install` / `pgq sql upgrade`, against the CLI install.

The extension's files are written by `pgq sql extension` into the server's own extension
directory (this runs as the superuser on the server's machine, as `make install-extension`
does). pg_dump leaves out the members of an extension, so a schema is compared after its
extension record is removed (in a throwaway database): what is dumped then is exactly what
CREATE EXTENSION made.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

import pgq
from pgq import migrate, scripts
from pgq.cli.main import main
from test_doctor import behind, interleaved_backlog
from test_migrations import PG_DUMP, assert_real_dump, make_db, schema_diff, schema_dump  # noqa: F401
from test_upgrade import PSQL, restore

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
PG_RESTORE = str(Path(PG_DUMP).with_name("pg_restore"))


@pytest.fixture(scope="module", autouse=True)
def extension_files() -> None:
    """The extension of this checkout, in the server's extension directory."""
    with psycopg.connect(_admin(), autocommit=True) as c:
        share = c.execute("SELECT setting FROM pg_catalog.pg_config WHERE name = 'SHAREDIR'").fetchone()[0]
    scripts.write_extension(Path(share) / "extension")


def _admin() -> str:
    from conftest import ADMIN_DSN

    return ADMIN_DSN


def run(dsn: str, *statements: str) -> list[tuple]:
    with psycopg.connect(dsn, autocommit=True) as c:
        rows: list[tuple] = []
        for statement in statements:
            cur = c.execute(statement)
            rows = cur.fetchall() if cur.description else []
        return rows


def psql_script(dsn: str, text: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PSQL, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-1", "-d", dsn, "-f", "-"],
        input=text,
        capture_output=True,
        text=True,
        check=False,
    )


def unpackaged_dump(dsn: str) -> list[str]:
    """The schema dump of an extension install, as if its objects were ordinary ones (the
    database is a throwaway: its pg_extension row, membership records and the record of
    the privileges its script granted are deleted)."""
    run(
        dsn,
        "DELETE FROM pg_catalog.pg_depend WHERE refclassid = 'pg_extension'::regclass"
        " AND refobjid = (SELECT oid FROM pg_catalog.pg_extension WHERE extname = 'pgq')",
        "DELETE FROM pg_catalog.pg_extension WHERE extname = 'pgq'",
        # Privileges granted by the script are recorded as the objects' initial ones, which
        # pg_dump leaves out; pgq is the only extension of these databases that grants any.
        "DELETE FROM pg_catalog.pg_init_privs WHERE privtype = 'e'",
    )
    return schema_dump(dsn)


def assert_same_schema(cli: str, other: str, *, extension: bool) -> None:
    # The daily outcome partitions: the extension leaves them to the first sweep (pgq.prune,
    # which creates them as pgq_owner).
    run(other, "SELECT pgq.prune()")
    expected = schema_dump(cli)
    got = unpackaged_dump(other) if extension else schema_dump(other)
    assert_real_dump(got)
    assert got == expected, schema_diff(expected, got)


def test_create_extension_and_the_install_script_give_the_cli_schema(make_db) -> None:  # noqa: F811
    cli, ext, script = make_db(), make_db(), make_db()
    migrate.install(cli, cron=False)
    run(ext, "CREATE EXTENSION pgq")
    # \dx shows the version pgq.version() returns.
    assert run(ext, "SELECT extversion, pgq.version() FROM pg_extension WHERE extname = 'pgq'") == [
        (pgq.__version__, pgq.__version__)
    ]
    assert run(
        ext,
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
        " WHERE e.extname = 'pgq'",
    ) == [("pgq",)]
    # Least privilege as with the CLI: everything in schema pgq belongs to pgq_owner.
    assert run(
        ext,
        "SELECT count(*) FROM pg_class WHERE relnamespace = 'pgq'::regnamespace"
        " AND relowner <> 'pgq_owner'::regrole",
    ) == [(0,)]
    printed = CliRunner().invoke(main, ["sql", "install"])
    assert printed.exit_code == 0, printed.output
    done = psql_script(script, printed.output)
    assert done.returncode == 0, done.stderr
    assert_same_schema(cli, script, extension=False)
    assert_same_schema(cli, ext, extension=True)


def test_the_two_kinds_of_install_never_mix(make_db) -> None:  # noqa: F811
    cli, ext = make_db(), make_db()
    migrate.install(cli, cron=False)
    run(ext, "CREATE EXTENSION pgq")
    for command in (["install", "--no-cron"], ["upgrade", "--no-cron"], ["uninstall", "--yes"]):
        result = CliRunner().invoke(main, [*command, "--dsn", ext])
        assert result.exit_code == 1, result.output
        assert "as the extension pgq" in result.output and "EXTENSION" in result.output, result.output
    assert run(ext, "SELECT extversion FROM pg_extension WHERE extname = 'pgq'") == [(pgq.__version__,)]
    with pytest.raises(psycopg.Error) as caught, psycopg.connect(cli, autocommit=True) as c:
        c.execute("CREATE EXTENSION pgq")
    assert caught.value.sqlstate == "PQ012", caught.value
    assert "pgq install" in str(caught.value)
    assert run(cli, "SELECT count(*) FROM pg_extension WHERE extname = 'pgq'") == [(0,)]
    # The install script refuses a database that has pgq, whichever way it came.
    printed = CliRunner().invoke(main, ["sql", "install"]).output
    for dsn in (cli, ext):
        done = psql_script(dsn, printed)
        assert done.returncode != 0 and "already exists" in done.stderr, done.stderr
    # So does the upgrade script an extension of that release: it would leave the extension
    # at the old version (ALTER EXTENSION UPDATE refused for good) and its new functions
    # outside it.
    old_ext = make_db()
    run(old_ext, f"CREATE EXTENSION pgq VERSION '{scripts.BASE_RELEASE}'")
    done = psql_script(old_ext, scripts.upgrade_script(scripts.BASE_RELEASE))
    assert done.returncode != 0 and "as the extension pgq" in done.stderr, done.stderr
    assert run(old_ext, "SELECT extversion FROM pg_extension WHERE extname = 'pgq'") == [
        (scripts.BASE_RELEASE,)
    ]
    assert run(old_ext, "SELECT max(version) FROM pgq._migrations") == [
        (scripts.RELEASES[scripts.BASE_RELEASE],)
    ]
    with psycopg.connect(cli) as a, psycopg.connect(ext) as b:
        assert (migrate.install_kind(a), migrate.install_kind(b)) == ("cli", "extension")


def test_the_upgrade_script_from_a_release_gives_the_cli_schema(make_db) -> None:  # noqa: F811
    fresh, upgraded, wrong = make_db(), make_db(), make_db()
    migrate.install(fresh, cron=False)
    restore(upgraded, FIXTURES / "pgq-0.2.0.sql")
    restore(wrong, FIXTURES / "pgq-0.1.0.sql")
    job = run(upgraded, "SELECT pgq.enqueue('kept', '{\"n\": 1}')")[0][0]
    printed = CliRunner().invoke(main, ["sql", "upgrade", "--from", "0.2.0"])
    assert printed.exit_code == 0, printed.output
    refused = psql_script(wrong, printed.output)
    assert refused.returncode != 0 and "upgrades pgq 0.2.0" in refused.stderr, refused.stderr
    assert run(wrong, "SELECT max(version) FROM pgq._migrations") == [(scripts.RELEASES["0.1.0"],)]
    done = psql_script(upgraded, printed.output)
    assert done.returncode == 0, done.stderr
    assert run(upgraded, f"SELECT pgq.version(), pgq.job_status({job})") == [(pgq.__version__, "queued")]
    assert_same_schema(fresh, upgraded, extension=False)


def test_alter_extension_update_from_the_first_release_keeps_every_job(make_db) -> None:  # noqa: F811
    cli, ext = make_db(), make_db()
    migrate.install(cli, cron=False)
    run(ext, f"CREATE EXTENSION pgq VERSION '{scripts.BASE_RELEASE}'")
    assert run(ext, "SELECT pgq.version()") == [(scripts.BASE_RELEASE,)]
    ids = fill_every_state(ext)
    run(ext, "ALTER EXTENSION pgq UPDATE")
    assert run(ext, "SELECT extversion, pgq.version() FROM pg_extension WHERE extname = 'pgq'") == [
        (pgq.__version__, pgq.__version__)
    ]
    assert states(ext, ids) == states_expected(ids)
    assert_same_schema(cli, ext, extension=True)


def test_the_upgrade_script_keeps_the_roles_of_the_install(make_db) -> None:  # noqa: F811
    """As pgq upgrade --roles: the prefix is the install's; a script printed for other roles
    (or without --roles for an install that has its own) would hand the schema to those and
    revoke the running install's grants. It refuses, changing nothing."""
    other, own, first = make_db(), make_db(), make_db()
    restore(other, FIXTURES / "pgq-0.2.0.sql")  # the default roles, pgq_*
    restore(first, FIXTURES / "pgq-0.1.0.sql")  # older than the record: the default roles
    restore(own, FIXTURES / "pgq-0.2.0.sql")
    run(own, "UPDATE pgq._install SET role_prefix = 'review_own_'")  # as if installed with its own
    # Owners and privileges of everything in schema pgq.
    grants = (
        "SELECT c.relname, c.relowner::regrole::text, c.relacl::text FROM pg_class AS c"
        " WHERE c.relnamespace = 'pgq'::regnamespace ORDER BY 1"
    )
    before = {dsn: run(dsn, grants) for dsn in (other, own, first)}
    cases = (
        (other, "0.2.0", "review_new_", "pgq_"),
        (own, "0.2.0", "pgq_", "review_own_"),
        (first, "0.1.0", "review_new_", "pgq_"),
    )
    for dsn, release, prefix, recorded in cases:
        refused = psql_script(dsn, scripts.upgrade_script(release, prefix))
        assert (
            refused.returncode != 0 and f"installed with the roles of prefix {recorded}" in refused.stderr
        ), refused.stderr
        assert run(dsn, "SELECT max(version) FROM pgq._migrations") == [(scripts.RELEASES[release],)]
        assert run(dsn, grants) == before[dsn]
    assert run(other, "SELECT count(*) FROM pg_roles WHERE rolname LIKE 'review\\_new\\_%'") == [(0,)]


def psql_each(dsn: str, text: str, *, stop: bool) -> subprocess.CompletedProcess[str]:
    """psql -f without -1: each statement commits on its own; without stop (ON_ERROR_STOP)
    psql goes on past every error."""
    return subprocess.run(
        [PSQL, "-X", "-q", "-v", f"ON_ERROR_STOP={int(stop)}", "-d", dsn, "-f", "-"],
        input=text,
        capture_output=True,
        text=True,
        check=False,
    )


def pgq_objects(dsn: str) -> list[tuple]:
    return run(
        dsn,
        "SELECT (SELECT count(*) FROM pg_catalog.pg_proc WHERE pronamespace = 'pgq'::regnamespace),"
        " (SELECT count(*) FROM pg_catalog.pg_class WHERE relnamespace = 'pgq'::regnamespace),"
        " (SELECT count(*) FROM pg_catalog.pg_trigger AS t JOIN pg_catalog.pg_class AS c ON c.oid = t.tgrelid"
        "  WHERE c.relnamespace = 'pgq'::regnamespace)",
    )


def test_a_script_run_outside_one_transaction_changes_nothing(make_db) -> None:  # noqa: F811
    fresh, installed, old = make_db(), make_db(), make_db()
    # psql -f without -1, stopping at the first error: it stops at the first statement.
    refused = psql_each(fresh, scripts.install_script(), stop=True)
    assert refused.returncode != 0 and "in one transaction" in refused.stderr, refused.stderr
    assert run(fresh, "SELECT to_regnamespace('pgq')") == [(None,)]
    restore(old, FIXTURES / "pgq-0.2.0.sql")
    refused = psql_each(old, scripts.upgrade_script("0.2.0"), stop=True)
    assert refused.returncode != 0 and "in one transaction" in refused.stderr, refused.stderr
    assert run(old, "SELECT max(version) FROM pgq._migrations") == [(scripts.RELEASES["0.2.0"],)]
    # Going on past every error, each statement in a transaction of its own: the install and
    # upgrade scripts re-create pgq's functions and views, and the reconcile step (which drops
    # what its transaction did not create) must then drop nothing.
    assert psql_script(installed, scripts.install_script()).returncode == 0
    before = pgq_objects(installed)
    for script in (scripts.install_script(), scripts.upgrade_script("0.2.0")):
        went_on = psql_each(installed, script, stop=False)
        assert "in one transaction" in went_on.stderr, went_on.stderr
        assert pgq_objects(installed) == before
        assert run(installed, "SELECT pgq.version()") == [(pgq.__version__,)]


def fill_every_state(dsn: str) -> dict[str, int]:
    """One job in each state (and in each final one), through the SQL of every release since
    0.2.0."""
    with psycopg.connect(dsn, autocommit=True) as c:
        q = lambda sql: c.execute(sql).fetchone()[0]  # noqa: E731
        worker = q("SELECT pgq.register_worker('t', ARRAY['s'])")
        ids = {"succeeded": q("SELECT pgq.enqueue('s', '{}')")}
        c.execute(
            f"SELECT pgq.complete('{worker}', ARRAY(SELECT id FROM pgq.claim('{worker}', ARRAY['s'], 1)))"
        )
        ids["dead"] = q("SELECT pgq.enqueue('s', '{}', max_attempts => 1)")
        c.execute(f"SELECT pgq.fail('{worker}', id, 'boom') FROM pgq.claim('{worker}', ARRAY['s'], 1)")
        ids["running"] = q("SELECT pgq.enqueue('s', '{}')")
        c.execute(f"SELECT pgq.claim('{worker}', ARRAY['s'], 1)")
        ids["queued"] = q("SELECT pgq.enqueue('s', '{}')")
        ids["scheduled"] = q("SELECT pgq.enqueue('s', '{}', run_at => now() + interval '1 day')")
        ids["waiting"] = q(
            f"SELECT pgq.enqueue('s', '{{}}', depends_on => ARRAY[{ids['scheduled']}]::bigint[])"
        )
        ids["canceled"] = q("SELECT pgq.enqueue('s', '{}')")
        c.execute(f"SELECT pgq.cancel(ARRAY[{ids['canceled']}]::bigint[])")
        c.execute("SELECT pgq.configure('s', concurrency => 3)")
        c.execute("SELECT pgq.schedule('nightly', '0 3 * * *', 's')")
    return ids


def states(dsn: str, ids: dict[str, int]) -> dict[str, str]:
    return {name: run(dsn, f"SELECT pgq.job_status({job})")[0][0] for name, job in ids.items()}


def states_expected(ids: dict[str, int]) -> dict[str, str]:
    # A job to run later is queued (its run_at says when).
    return {name: "queued" if name == "scheduled" else name for name in ids}


@pytest.mark.needs_client_tools
def test_pg_dump_and_restore_of_an_extension_install_keeps_the_queue(make_db, tmp_path: Path) -> None:  # noqa: F811
    source, target, plain = make_db(), make_db(), make_db()
    run(source, "CREATE EXTENSION pgq")
    run(source, "SELECT pgq.prune()")  # the first sweep: the daily outcome partitions
    ids = fill_every_state(source)
    # An outcome of a day without a partition: it lies in the default partition (a member).
    run(
        source,
        f"UPDATE pgq._outcomes SET finished_at = now() - interval '1 day' WHERE job_id = {ids['dead']}",
    )
    archive = tmp_path / "pgq.dump"
    subprocess.run([PG_DUMP, "-Fc", "-f", str(archive), "--dbname", source], check=True, timeout=120)
    restored = subprocess.run(
        [PG_RESTORE, "--exit-on-error", "--dbname", target, str(archive)], capture_output=True, text=True
    )
    assert restored.returncode == 0, restored.stderr
    # The schema alone, as plain SQL restored by psql: --extension=pgq is needed (without it
    # pg_dump 15 crashes on the extension's configuration table that is a partition, and the
    # dump would lack the extension anyway; docs/extension.md says so).
    script = subprocess.run(
        [PG_DUMP, "--schema=pgq", "--extension=pgq", "--dbname", source],
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    ).stdout
    loaded = psql_script(plain, script)
    assert loaded.returncode == 0, loaded.stderr
    for restored_db in (target, plain):
        assert_restored(source, restored_db, ids)


def assert_restored(source: str, target: str, ids: dict[str, int]) -> None:
    assert states(target, ids) == states_expected(ids)
    for table in ("pgq._queues", "pgq._schedules", "pgq._workers", "pgq._migrations"):
        assert run(target, f"SELECT count(*) FROM {table}") == run(source, f"SELECT count(*) FROM {table}"), (
            table
        )
    # Every outcome, in the partition it was in (the default one and the daily ones).
    by_partition = "SELECT tableoid::regclass::text, job_id, outcome FROM pgq._outcomes ORDER BY 1, 2, 3"
    assert run(target, by_partition) == run(source, by_partition)
    assert "pgq._outcomes_default" in {row[0] for row in run(source, by_partition)}
    # The restored queue drains, and its ids go on from the restored ones.
    with psycopg.connect(target, autocommit=True) as c:
        worker = c.execute("SELECT pgq.register_worker('t', ARRAY['s'])").fetchone()[0]
        new = c.execute("SELECT pgq.enqueue('s', '{}')").fetchone()[0]
        assert new > max(ids.values())
        claimed = [r[0] for r in c.execute("SELECT id FROM pgq.claim(%s, ARRAY['s'], 10)", (worker,))]
        assert sorted(claimed) == sorted([ids["queued"], new])
        done = [r[0] for r in c.execute("SELECT pgq.complete(%s, %s)", (worker, claimed))]
        assert sorted(done) == sorted(claimed)
    assert run(target, "SELECT extversion FROM pg_extension WHERE extname = 'pgq'") == [(pgq.__version__,)]


def test_isolate_is_refused_where_pgq_is_the_extension(make_db) -> None:  # noqa: F811
    """The partitioned job table and its indexes are members of the extension; a partition
    that pgq.isolate would make is not, and pg_restore of such a dump creates the
    partition's indexes twice and fails (measured before this refusal). So pgq.isolate
    refuses there, and changes nothing."""
    db = make_db()
    run(db, "CREATE EXTENSION pgq")
    job = run(db, "SELECT pgq.enqueue('s')")[0][0]
    with psycopg.connect(db, autocommit=True) as c:
        with pytest.raises(psycopg.errors.FeatureNotSupported) as err:
            c.execute("SELECT pgq.isolate('s')")
        assert "where pgq is the extension" in str(err.value)
        assert "pgq install" in (err.value.diag.message_hint or "")
    assert run(db, f"SELECT tableoid::regclass::text FROM pgq._jobs WHERE id = {job}") == [
        ("pgq._jobs_default",)
    ]
    assert run(db, "SELECT pgq.unisolate('s')") == [(0,)]


def test_doctor_does_not_advise_isolate_where_pgq_is_the_extension(make_db) -> None:  # noqa: F811
    """pgq.isolate refuses there (above), so the backlog that would be told to isolate is
    told only to add workers."""
    db = make_db()
    run(db, "CREATE EXTENSION pgq")
    interleaved_backlog(db)
    said = behind(db)
    assert "mixed" in said and "isolate" not in said["mixed"], said
    assert "add workers" in said["mixed"], said
