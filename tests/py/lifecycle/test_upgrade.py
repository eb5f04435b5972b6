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

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

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
            c.execute("SELECT pgq._release(ARRAY[%s]::uuid[])", (worker,))

    migrate.upgrade(fresh_db, cron=False)

    with psycopg.connect(fresh_db, autocommit=True) as c:
        assert c.execute("SELECT pgq._release(ARRAY[%s]::uuid[])", (worker,)).fetchone()[0] == 0
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


# --- the ladder: 0.1.0 -> current ---------------------------------------------------------------

PSQL = "/usr/lib/postgresql/15/bin/psql"
# The 0.1.0 worker's calls, as python/pgq/worker.py of 0.1.0 made them.
OLD_REGISTER = "SELECT pgq.register_worker(name => %s::text, entrypoints => %s::text[]) AS id"
OLD_CLAIM = (
    "SELECT * FROM pgq.claim(worker_id => %s::uuid, entrypoints => %s::text[], batch_size => %s::integer)"
)
OLD_HEARTBEAT = "SELECT pgq.heartbeat(worker_id => %s::uuid) AS id"
OLD_COMPLETE = "SELECT pgq.complete(worker_id => %s::uuid, job_ids => %s::bigint[])"
OLD_FAIL = "SELECT pgq.fail(worker_id => %s::uuid, job_id => %s::bigint, error => %s::text) AS status"


def restore(dsn: str, fixture: Path) -> None:
    done = subprocess.run(
        [PSQL, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-f", str(fixture)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def status(c: psycopg.Connection, job: int) -> str | None:
    return c.execute("SELECT pgq.job_status(%s)", (job,)).fetchone()[0]


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("pgq-*.sql")), ids=lambda p: p.stem)
def test_upgrade_ladder(make_db, fixture: Path) -> None:  # noqa: F811
    old, fresh = make_db(), make_db()
    migrate.install(fresh, cron=False)  # the reference, and the roles the fixture's grants name
    restore(old, fixture)
    with psycopg.connect(old, autocommit=True) as c, psycopg.connect(old, autocommit=True) as w:
        version_before = migrate.installed_version(c)
        assert version_before is not None
        # A live 0.1 install: today's partitions exist, settings, a schedule, jobs in every state.
        c.execute("SELECT pgq._ensure_partitions()")
        c.execute("SELECT pgq.configure('ladder', max_attempts => 3, lease => '10 minutes')")
        c.execute("SELECT pgq.configure('ladder_dead', max_attempts => 1)")
        c.execute("SELECT pgq.schedule('ladder-minutely', '* * * * *', 'ladder', '{\"from\": \"schedule\"}')")
        first = c.execute("SELECT pgq.enqueue('ladder', '{\"n\": 1}')").fetchone()[0]
        queued = c.execute("SELECT pgq.enqueue('ladder', '{\"n\": 2}')").fetchone()[0]
        later = c.execute(
            "SELECT pgq.enqueue('ladder', '{\"n\": 3}', run_at => now() + interval '1 day')"
        ).fetchone()[0]
        doomed = c.execute("SELECT pgq.enqueue('ladder_dead', '{\"n\": 4}')").fetchone()[0]
        done_job = c.execute("SELECT pgq.enqueue('ladder_done', '{\"n\": 5}')").fetchone()[0]

        # The old worker: claims `first` and keeps its session open across the upgrade.
        old_worker = w.execute(
            OLD_REGISTER, ("old-0.1", ["ladder", "ladder_dead", "ladder_done"])
        ).fetchone()[0]
        claimed = [r[0] for r in w.execute(OLD_CLAIM, (old_worker, ["ladder"], 1)).fetchall()]
        assert claimed == [first]
        waiting = c.execute(
            "SELECT pgq.enqueue('ladder', '{\"n\": 6}', depends_on => ARRAY[%s]::bigint[])", (first,)
        ).fetchone()[0]
        assert [r[0] for r in w.execute(OLD_CLAIM, (old_worker, ["ladder_dead"], 1)).fetchall()] == [doomed]
        assert w.execute(OLD_FAIL, (old_worker, doomed, "boom")).fetchone()[0] == "dead"
        assert [r[0] for r in w.execute(OLD_CLAIM, (old_worker, ["ladder_done"], 1)).fetchall()] == [done_job]
        assert w.execute(OLD_COMPLETE, (old_worker, [done_job])).fetchall() == [(done_job,)]
        before = {j: status(c, j) for j in (first, queued, later, doomed, done_job, waiting)}
        assert before == {
            first: "running",
            queued: "queued",
            later: "queued",
            doomed: "dead",
            done_job: "succeeded",
            waiting: "waiting",
        }

        done = migrate.upgrade(old, cron=False)
        assert done[-1].startswith("pgq schema is at version"), done

        # Exactly the current schema, functions, grants and owners included.
        upgraded, reference = schema_dump(old), schema_dump(fresh)
        assert_real_dump(upgraded)
        assert upgraded == reference, schema_diff(reference, upgraded)
        assert c.execute("SELECT pgq.version()").fetchone()[0] == pgq.__version__

        # Nothing was lost; the old worker's session still holds, heartbeats and completes.
        assert {j: status(c, j) for j in before} == before
        assert c.execute(
            "SELECT run_at > now() + interval '23 hours' FROM pgq._jobs WHERE id = %s", (later,)
        ).fetchone()[0]
        assert c.execute("SELECT max_attempts FROM pgq.queues WHERE entrypoint = 'ladder'").fetchone()[0] == 3
        assert w.execute(OLD_HEARTBEAT, (old_worker,)).fetchall() == []
        assert w.execute(OLD_COMPLETE, (old_worker, [first])).fetchall() == [(first,)]
        assert status(c, waiting) == "queued", "completing its dependency releases the waiting job"

        # Everything drains with the current code: dead retried, the later job due, the schedule fired.
        assert c.execute("SELECT pgq.retry(ARRAY[%s]::bigint[])", (doomed,)).fetchone()[0] == 1
        c.execute("UPDATE pgq._jobs SET run_at = now() WHERE id = %s", (later,))
        assert c.execute("SELECT pgq.run_schedules(now() + interval '2 minutes')").fetchone()[0] == 1
        worker = c.execute("SELECT pgq.register_worker('new', ARRAY['ladder', 'ladder_dead'])").fetchone()[0]
        for _ in range(20):
            ids = [
                r[0]
                for r in c.execute(
                    "SELECT id FROM pgq.claim(%s, ARRAY['ladder', 'ladder_dead'], 100)", (worker,)
                )
            ]
            if not ids:
                break
            assert sorted(r[0] for r in c.execute("SELECT pgq.complete(%s, %s)", (worker, ids))) == sorted(
                ids
            )
        assert c.execute("SELECT count(*) FROM pgq._jobs").fetchone()[0] == 0
        succeeded, scheduled = c.execute(
            "SELECT count(*), count(*) FILTER (WHERE payload->>'from' = 'schedule')"
            " FROM pgq._outcomes WHERE outcome = 'succeeded'"
        ).fetchone()
        # first, queued, later, doomed, done_job, waiting, and the schedule's jobs: one, or two
        # when a minute began during the test (the old heartbeat's sweep fired it as well).
        assert scheduled in (1, 2) and succeeded == 6 + scheduled, (succeeded, scheduled)
        w.execute("SELECT pgq.unregister_worker(%s)", (old_worker,))


def test_stale_views_functions_and_triggers_go_the_codes_trigger_stays(fresh_db: str) -> None:
    migrate.install(fresh_db, cron=False)
    expected = schema_dump(fresh_db)
    with psycopg.connect(fresh_db, autocommit=True) as c:
        c.execute(
            "CREATE FUNCTION pgq.old_helper() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END'"
        )
        c.execute(
            "CREATE TRIGGER old_trigger BEFORE UPDATE ON pgq._jobs"
            " FOR EACH ROW EXECUTE FUNCTION pgq.old_helper()"
        )
        c.execute("CREATE VIEW pgq.old_view AS SELECT 1 AS x")
        c.execute("GRANT EXECUTE ON FUNCTION pgq.cancel(bigint[]) TO PUBLIC")
        c.execute("GRANT SELECT ON pgq.jobs TO pgq_producer")
    for _ in range(2):  # the second upgrade must keep the code's own trigger too
        migrate.upgrade(fresh_db, cron=False)
        assert schema_dump(fresh_db) == expected
    with psycopg.connect(fresh_db) as c:
        triggers = c.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = 'pgq._jobs'::regclass AND NOT tgisinternal"
        ).fetchall()
    assert sorted(triggers) == [
        ("_jobs_batch_dead_trg",),
        ("_jobs_batch_end_trg",),
        ("_jobs_check_waiting",),
        ("_jobs_dead_trg",),
        ("_jobs_finished_trg",),
        ("_jobs_marks_insert_trg",),
        ("_jobs_marks_update_trg",),
    ]


# The trigger functions under the names they had before migration trigger_names: those of
# 0.2.0, and pgq._count_outcomes, which only unreleased 0.3.0 installs have (no fixture).
OLD_TRIGGER_FUNCTIONS = {
    "_trg_check_waiting": "_check_waiting",
    "_trg_notify_finished": "_notify_finished",
    "_trg_marks_inserted": "_marks_inserted",
    "_trg_marks_updated": "_marks_updated",
    "_trg_count_outcomes": "_count_outcomes",
}


def test_an_install_with_the_old_trigger_function_names_upgrades(make_db) -> None:  # noqa: F811
    """An install from before migration trigger_names (rebuilt here from a current one: the
    old functions, the triggers on them, the migration unrecorded) upgrades to exactly the
    fresh schema: without the migration, sql/reconcile.sql cannot drop the old functions,
    which the triggers still use, and the upgrade fails."""
    old, fresh = make_db(), make_db()
    migrate.install(fresh, cron=False)
    expected = schema_dump(fresh)
    migrate.install(old, cron=False)
    with psycopg.connect(old) as c:
        for new, previous in OLD_TRIGGER_FUNCTIONS.items():
            source = c.execute("SELECT pg_get_functiondef(%s::regprocedure)", (f"pgq.{new}()",)).fetchone()[0]
            c.execute(source.replace(f"pgq.{new}(", f"pgq.{previous}("))
        triggers = c.execute(
            "SELECT t.tgname, t.tgrelid::regclass::text, pg_get_triggerdef(t.oid), t.tgenabled = 'A'"
            " FROM pg_trigger AS t JOIN pg_class AS r ON r.oid = t.tgrelid"
            " WHERE r.relnamespace = 'pgq'::regnamespace AND NOT t.tgisinternal AND t.tgparentid = 0"
        ).fetchall()
        # The triggers of the renamed functions (the batch triggers came after the rename).
        triggers = [t for t in triggers if any(f"pgq.{new}(" in t[2] for new in OLD_TRIGGER_FUNCTIONS)]
        assert len(triggers) == 6
        for name, table, definition, always in triggers:
            for new, previous in OLD_TRIGGER_FUNCTIONS.items():
                definition = definition.replace(f"pgq.{new}(", f"pgq.{previous}(")
            c.execute(f"DROP TRIGGER {name} ON {table}")
            c.execute(definition)
            if always:
                c.execute(f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER {name}")
        # It and the migrations after it (which leave a current table as it is) run again.
        c.execute(
            "DELETE FROM pgq._migrations"
            " WHERE version >= (SELECT version FROM pgq._migrations WHERE name = 'trigger_names')"
        )
    migrate.upgrade(old, cron=False)
    assert schema_dump(old) == expected
    with psycopg.connect(old) as c:
        functions = c.execute(
            "SELECT DISTINCT t.tgfoid::regproc::text"
            " FROM pg_trigger AS t JOIN pg_class AS r ON r.oid = t.tgrelid"
            " WHERE r.relnamespace = 'pgq'::regnamespace AND NOT t.tgisinternal ORDER BY 1"
        ).fetchall()
    names = {f[0] for f in functions}
    assert {f"pgq.{n}" for n in OLD_TRIGGER_FUNCTIONS} <= names
    assert names.isdisjoint(f"pgq.{n}" for n in OLD_TRIGGER_FUNCTIONS.values())
