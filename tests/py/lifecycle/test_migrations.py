"""Install, upgrade and uninstall against real databases.

The central check: a fresh install (sql/schema) and an install that replays every migration
give the same schema, compared as normalised `pg_dump --schema-only --schema=pgq` output.
The other tests prove that comparison is not vacuous, and cover re-installs, foreign `pgq`
schemas, databases newer than the code, and the pg_cron sweeps.
"""

from __future__ import annotations

import difflib
import re
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from psycopg import sql

import pgq
import pgq.resources
from conftest import (
    ADMIN_DSN,
    PG_DUMP,
    create_database,
    drop_database,
    server_has_pg_cron,
    skip_without_client_tools,
)
from pgq import migrate

# Lines that differ between two dumps of identical schemas: comments, session settings, and
# the random key of pg_dump's \restrict guard (15.14 and later).
_NOISE = re.compile(r"^(--|SET |SELECT pg_catalog\.set_config\(|\\(un)?restrict\b)")


def normalise(dump: str) -> list[str]:
    return [line.rstrip() for line in dump.splitlines() if line.strip() and not _NOISE.match(line)]


def schema_dump(dsn: str) -> list[str]:
    """The normalised schema-only dump of schema pgq."""
    skip_without_client_tools()  # pg_dump 15 refuses a newer server
    result = subprocess.run(
        [PG_DUMP, "--schema-only", "--schema=pgq", "--no-password", "--dbname", dsn],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return normalise(result.stdout)


def schema_diff(a: list[str], b: list[str]) -> str:
    return "\n".join(difflib.unified_diff(a, b, "first", "second", lineterm=""))


def assert_real_dump(dump: list[str]) -> None:
    """Guard against comparing two empty (or broken) dumps."""
    text = "\n".join(dump)
    for needle in (
        "CREATE SCHEMA pgq;",
        "CREATE TABLE pgq._jobs (",
        "CREATE INDEX _jobs_claim_idx ON ONLY pgq._jobs",
        "CREATE FUNCTION pgq.claim(",
        "CREATE VIEW pgq.queues AS",
        "GRANT USAGE ON SCHEMA pgq TO pgq_worker;",
    ):
        assert needle in text, f"dump lacks {needle!r}"


def dbname(dsn: str) -> str:
    with psycopg.connect(dsn) as c:
        return c.info.dbname


@pytest.fixture
def make_db() -> Iterator[Callable[[], str]]:
    """Create empty databases on demand; all are dropped after the test."""
    names: list[str] = []

    def make() -> str:
        name = f"pgq_mig_{uuid.uuid4().hex[:12]}"
        names.append(name)
        return create_database(name)

    yield make
    for name in names:
        drop_database(name)


@pytest.fixture
def cron_cleanup() -> Iterator[list[str]]:
    """Database names whose pg_cron jobs are removed after the test, whatever happened."""
    names: list[str] = []
    yield names
    if names and server_has_pg_cron():
        with psycopg.connect(ADMIN_DSN, autocommit=True) as c:
            log_jobs = [migrate._job_name(migrate.CRON_LOG_JOB[0], name) for name in names]
            c.execute(
                "SELECT cron.unschedule(jobid) FROM cron.job WHERE database = ANY(%s) OR jobname = ANY(%s)",
                (names, log_jobs),
            )


def cron_jobs(database: str) -> list[tuple[str, str, str, bool]]:
    with psycopg.connect(ADMIN_DSN, autocommit=True) as c:
        return c.execute(
            "SELECT jobname, schedule, command, active FROM cron.job WHERE database = %s ORDER BY jobname",
            (database,),
        ).fetchall()


# --- (a) fresh install == replayed migrations ---------------------------------------------


def test_fresh_install_and_replayed_migrations_give_the_same_schema(make_db) -> None:
    fresh, replayed = make_db(), make_db()
    migrate.install(fresh, cron=False)
    migrate.replay_migrations(replayed)
    fresh_dump, replayed_dump = schema_dump(fresh), schema_dump(replayed)
    assert_real_dump(fresh_dump)
    assert_real_dump(replayed_dump)
    assert fresh_dump == replayed_dump, schema_diff(fresh_dump, replayed_dump)


def test_both_install_paths_record_every_migration(make_db) -> None:
    fresh, replayed = make_db(), make_db()
    migrate.install(fresh, cron=False)
    migrate.replay_migrations(replayed)
    expected = [(m.version, m.name) for m in pgq.resources.migrations()]
    assert expected, "no migrations found"
    for dsn in (fresh, replayed):
        with psycopg.connect(dsn) as c:
            rows = c.execute("SELECT version, name FROM pgq._migrations ORDER BY version").fetchall()
            assert rows == expected
            assert migrate.installed_version(c) == expected[-1][0]


# --- (b) the comparison catches a missing migration ----------------------------------------


def test_schema_diff_sees_an_added_column(make_db) -> None:
    """The diff helper itself: identical installs compare equal, one extra column does not."""
    a, b = make_db(), make_db()
    migrate.install(a, cron=False)
    migrate.install(b, cron=False)
    before = schema_dump(b)
    assert_real_dump(before)
    assert schema_dump(a) == before
    with psycopg.connect(b, autocommit=True) as c:
        c.execute("ALTER TABLE pgq._jobs ADD COLUMN simulated_drift integer")
    after = schema_dump(b)
    diff = schema_diff(schema_dump(a), after)
    assert diff, "an added column must show in the normalised diff"
    assert "simulated_drift" in diff


def test_schema_change_without_a_migration_is_detected(make_db, monkeypatch, tmp_path) -> None:
    """A table change made in sql/schema but in no migration makes the two paths differ."""
    extra = tmp_path / "zz_unmigrated.sql"
    extra.write_text("ALTER TABLE pgq._jobs ADD COLUMN not_in_any_migration integer;\n")
    real_schema_files = pgq.resources.schema_files
    monkeypatch.setattr(migrate, "schema_files", lambda: [*real_schema_files(), extra])

    fresh, replayed = make_db(), make_db()
    migrate.install(fresh, cron=False)
    migrate.replay_migrations(replayed)
    fresh_dump, replayed_dump = schema_dump(fresh), schema_dump(replayed)
    assert_real_dump(replayed_dump)
    assert any("not_in_any_migration" in line for line in fresh_dump), "the change was not applied"
    assert fresh_dump != replayed_dump
    assert "not_in_any_migration" in schema_diff(fresh_dump, replayed_dump)


# Migrations that change only what the code re-creates after every replay (functions,
# triggers): a replay without one gives the same schema, so the test below skips them.
CODE_ONLY_MIGRATIONS = {"trigger_names"}


def test_dropping_the_last_migration_is_detected(make_db, monkeypatch) -> None:
    """Replaying all but the last migration (that changes tables) cannot reproduce the fresh
    schema.

    Either the replay fails (the current functions and views need the missing tables) or
    the dumps differ. Either way the comparison cannot pass.
    """
    fresh, replayed = make_db(), make_db()
    migrate.install(fresh, cron=False)
    fresh_dump = schema_dump(fresh)
    assert_real_dump(fresh_dump)

    real = pgq.resources.migrations()
    assert real
    last = max(i for i, m in enumerate(real) if m.name not in CODE_ONLY_MIGRATIONS)
    monkeypatch.setattr(pgq.resources, "migrations", lambda: real[:last])
    monkeypatch.setattr(migrate, "migrations", lambda: real[:last])
    try:
        migrate.replay_migrations(replayed)
    except psycopg.Error:
        return
    replayed_dump = schema_dump(replayed)
    assert replayed_dump != fresh_dump


# --- (c) idempotence, uninstall, reinstall -------------------------------------------------


def test_install_twice_is_idempotent_and_keeps_jobs(fresh_db: str) -> None:
    migrate.install(fresh_db, cron=False)
    first = schema_dump(fresh_db)
    assert_real_dump(first)
    with psycopg.connect(fresh_db, autocommit=True) as c:
        job = c.execute("SELECT pgq.enqueue('keep_me', '{\"n\": 1}')").fetchone()[0]

    done = migrate.install(fresh_db, cron=False)
    latest = pgq.resources.migrations()[-1].version
    assert any(line.startswith(f"pgq schema is at version {latest} ") for line in done), done
    assert not any(line.startswith("applied migration") for line in done)
    assert schema_dump(fresh_db) == first
    with psycopg.connect(fresh_db, autocommit=True) as c:
        assert c.execute("SELECT pgq.job_status(%s)", (job,)).fetchone()[0] == "queued"
        assert c.execute("SELECT count(*) FROM pgq._migrations").fetchone()[0] == latest
    # upgrade on an up-to-date database is the same no-op
    migrate.upgrade(fresh_db, cron=False)
    assert schema_dump(fresh_db) == first


def test_uninstall_then_install_again(fresh_db: str) -> None:
    migrate.install(fresh_db, cron=False)
    first = schema_dump(fresh_db)
    done = migrate.uninstall(fresh_db)
    assert any("dropped schema pgq" in line for line in done)
    with psycopg.connect(fresh_db) as c:
        assert c.execute("SELECT to_regnamespace('pgq')").fetchone()[0] is None
        assert migrate.installed_version(c) is None
    assert migrate.uninstall(fresh_db) == ["pgq is not installed; nothing to do"]

    migrate.install(fresh_db, cron=False)
    again = schema_dump(fresh_db)
    assert again == first, schema_diff(first, again)
    with psycopg.connect(fresh_db, autocommit=True) as c:
        job = c.execute("SELECT pgq.enqueue('after_reinstall')").fetchone()[0]
        assert c.execute("SELECT pgq.job_status(%s)", (job,)).fetchone()[0] == "queued"


def test_upgrade_refuses_a_database_without_pgq(fresh_db: str) -> None:
    with pytest.raises(pgq.SchemaError, match="not installed"):
        migrate.upgrade(fresh_db, cron=False)


def test_concurrent_installs_serialise(fresh_db: str) -> None:
    """Several `pgq install` at once (e.g. every replica of a deploy): one installs, the
    others find it installed; none fails."""
    sessions = 4
    barrier = threading.Barrier(sessions, timeout=30)

    def install() -> list[str]:
        barrier.wait()
        return migrate.install(fresh_db, cron=False)

    with ThreadPoolExecutor(max_workers=sessions) as pool:
        results = [f.result(timeout=120) for f in [pool.submit(install) for _ in range(sessions)]]
    installed = [r for r in results if any(line.startswith("installed pgq schema") for line in r)]
    assert len(installed) == 1, results
    assert_real_dump(schema_dump(fresh_db))


def test_upgrade_is_all_or_nothing(fresh_db: str, monkeypatch, tmp_path) -> None:
    """Simulated later migrations: when one fails, none is applied (the good one before it
    is rolled back too) and nothing is recorded; once fixed, both apply in one go."""
    migrate.install(fresh_db, cron=False)
    before = schema_dump(fresh_db)
    real = pgq.resources.migrations()
    n = real[-1].version
    good = tmp_path / f"{n + 1:04d}_add_good.sql"
    good.write_text("ALTER TABLE pgq._jobs ADD COLUMN good_col integer;\n")
    bad = tmp_path / f"{n + 2:04d}_add_bad.sql"
    bad.write_text("ALTER TABLE pgq._jobs ADD COLUMN bad_col integer;\nSELECT 1 / 0;\n")
    later = [
        *real,
        pgq.resources.Migration(n + 1, "add_good", good),
        pgq.resources.Migration(n + 2, "add_bad", bad),
    ]
    monkeypatch.setattr(migrate, "migrations", lambda: later)

    def columns() -> set[str]:
        with psycopg.connect(fresh_db) as c:
            rows = c.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = 'pgq._jobs'::regclass"
                " AND attnum > 0 AND NOT attisdropped"
            ).fetchall()
        return {r[0] for r in rows}

    def version() -> int | None:
        with psycopg.connect(fresh_db) as c:
            return migrate.installed_version(c)

    with pytest.raises(psycopg.errors.DivisionByZero):
        migrate.upgrade(fresh_db, cron=False)
    assert not {"good_col", "bad_col"} & columns(), "a failed upgrade left part of its changes"
    assert version() == n
    assert schema_dump(fresh_db) == before

    bad.write_text("ALTER TABLE pgq._jobs ADD COLUMN bad_col integer;\n")
    done = migrate.upgrade(fresh_db, cron=False)
    assert done[:2] == [f"applied migration {good.name}", f"applied migration {bad.name}"]
    assert {"good_col", "bad_col"} <= columns()
    assert version() == n + 2
    # The functions still work on the upgraded table.
    with psycopg.connect(fresh_db, autocommit=True) as c:
        job = c.execute("SELECT pgq.enqueue('after_upgrade')").fetchone()[0]
        assert c.execute("SELECT pgq.job_status(%s)", (job,)).fetchone()[0] == "queued"


def test_a_failing_code_file_leaves_nothing_changed(fresh_db: str, monkeypatch, tmp_path) -> None:
    """The code phase is in the same transaction: a broken function file after the stale
    objects were dropped rolls back the drops and the migrations."""
    migrate.install(fresh_db, cron=False)
    with psycopg.connect(fresh_db, autocommit=True) as c:
        c.execute("CREATE FUNCTION pgq.stale_helper() RETURNS int LANGUAGE sql AS 'SELECT 1'")
    before = schema_dump(fresh_db)
    broken = tmp_path / "zz_broken.sql"
    broken.write_text("SELECT pgq.no_such_function();\n")
    real = pgq.resources.code_files
    monkeypatch.setattr(migrate, "code_files", lambda: [*real(), broken])
    with pytest.raises(psycopg.errors.UndefinedFunction):
        migrate.upgrade(fresh_db, cron=False)
    assert schema_dump(fresh_db) == before
    assert any("stale_helper" in line for line in before)


# --- (d) a foreign schema named pgq --------------------------------------------------------

FOREIGN_SCHEMAS = {
    "skytools": ("CREATE SCHEMA pgq; CREATE TABLE pgq.queue (x integer); INSERT INTO pgq.queue VALUES (42)"),
    "empty": "CREATE SCHEMA pgq",
    "lookalike": (
        "CREATE SCHEMA pgq; CREATE TABLE pgq._migrations (version integer, name text);"
        " INSERT INTO pgq._migrations VALUES (1, 'initial')"
    ),
    "commented_untracked": "CREATE SCHEMA pgq; COMMENT ON SCHEMA pgq IS 'pgq-sql job queue'",
}


def _schema_snapshot(dsn: str) -> tuple:
    with psycopg.connect(dsn) as c:
        relations = c.execute(
            "SELECT relname, relkind FROM pg_class WHERE relnamespace = 'pgq'::regnamespace ORDER BY relname"
        ).fetchall()
        functions = c.execute(
            "SELECT proname FROM pg_proc WHERE pronamespace = 'pgq'::regnamespace ORDER BY 1"
        ).fetchall()
        comment = c.execute("SELECT obj_description('pgq'::regnamespace, 'pg_namespace')").fetchone()
        data = []
        for name, kind in relations:
            if kind == "r":
                query = sql.SQL("SELECT * FROM pgq.{} ORDER BY 1").format(sql.Identifier(name))
                data.append(c.execute(query).fetchall())
    return relations, functions, comment, data


@pytest.mark.parametrize("setup", FOREIGN_SCHEMAS.values(), ids=FOREIGN_SCHEMAS.keys())
def test_foreign_pgq_schema_is_refused_and_left_untouched(
    fresh_db: str, cron_cleanup: list[str], setup: str
) -> None:
    with psycopg.connect(fresh_db, autocommit=True) as c:
        c.execute(setup)
    before = _schema_snapshot(fresh_db)
    name = dbname(fresh_db)
    cron_cleanup.append(name)

    with pytest.raises(pgq.SchemaError, match="did not create"):
        migrate.install(fresh_db, cron=True)
    with pytest.raises(pgq.SchemaError, match="did not create"):
        migrate.upgrade(fresh_db, cron=False)
    with pytest.raises(pgq.SchemaError, match="did not create"):
        migrate.uninstall(fresh_db)
    with pytest.raises(pgq.SchemaError):
        migrate.replay_migrations(fresh_db)

    assert _schema_snapshot(fresh_db) == before
    if server_has_pg_cron():  # without it (the other majors) install schedules nothing anyway
        assert cron_jobs(name) == [], "a refused install must not schedule sweeps"


# --- (e) a database newer than the code ----------------------------------------------------


def test_database_newer_than_the_code_is_refused(fresh_db: str) -> None:
    migrate.install(fresh_db, cron=False)
    latest = pgq.resources.migrations()[-1].version
    with psycopg.connect(fresh_db, autocommit=True) as c:
        c.execute(
            "INSERT INTO pgq._migrations (version, name) VALUES (%s, 'from_the_future')",
            (latest + 1,),
        )
        # A newer release would have its own function bodies: the old code must not overwrite them.
        c.execute("COMMENT ON FUNCTION pgq.reap() IS 'newer release'")
    before = schema_dump(fresh_db)

    with pytest.raises(pgq.SchemaError, match=f"version {latest + 1}"):
        migrate.upgrade(fresh_db, cron=False)
    with pytest.raises(pgq.SchemaError, match="newer"):
        migrate.install(fresh_db, cron=False)

    assert schema_dump(fresh_db) == before
    with psycopg.connect(fresh_db) as c:
        assert migrate.installed_version(c) == latest + 1


# --- (f) pg_cron ---------------------------------------------------------------------------


@pytest.fixture
def needs_cron() -> None:
    with psycopg.connect(ADMIN_DSN) as c:
        found = c.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_cron'").fetchone()
    if found is None:
        pytest.skip("pg_cron is not installed in the maintenance database")


@pytest.mark.usefixtures("needs_cron")
def test_install_schedules_reap_with_pg_cron_and_uninstall_removes_it(
    fresh_db: str, cron_cleanup: list[str]
) -> None:
    name = dbname(fresh_db)
    cron_cleanup.append(name)
    assert cron_jobs(name) == []

    done = migrate.install(fresh_db, cron=True)
    jobs = cron_jobs(name)
    assert jobs, f"no cron.job row for database {name}: {done}"
    reap = [j for j in jobs if "pgq.reap" in j[2]]
    assert len(reap) == 1, jobs
    assert reap[0][3] is True, "the reap job is not active"
    assert any("pg_cron job" in line for line in done)

    # Installing again updates the jobs, it does not duplicate them.
    migrate.install(fresh_db, cron=True)
    assert cron_jobs(name) == jobs

    done = migrate.uninstall(fresh_db)
    assert any("removed pg_cron job" in line for line in done)
    assert cron_jobs(name) == []


@pytest.mark.usefixtures("needs_cron")
def test_cron_jobs_of_two_databases_are_separate(make_db, cron_cleanup: list[str]) -> None:
    a, b = make_db(), make_db()
    name_a, name_b = dbname(a), dbname(b)
    cron_cleanup += [name_a, name_b]
    migrate.install(a, cron=True)
    migrate.install(b, cron=True)
    jobs_b = cron_jobs(name_b)
    assert any("pgq.reap" in j[2] for j in cron_jobs(name_a))
    assert any("pgq.reap" in j[2] for j in jobs_b)

    migrate.uninstall(a)
    assert cron_jobs(name_a) == []
    assert cron_jobs(name_b) == jobs_b, "uninstalling one database removed another's sweeps"


@pytest.mark.usefixtures("needs_cron")
def test_install_without_cron_schedules_nothing(fresh_db: str, cron_cleanup: list[str]) -> None:
    name = dbname(fresh_db)
    cron_cleanup.append(name)
    migrate.install(fresh_db, cron=False)
    assert cron_jobs(name) == []
