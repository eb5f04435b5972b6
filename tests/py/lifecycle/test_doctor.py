"""`pgq doctor`: healthy on a fresh install; each check provoked and seen, with exit 1."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import timedelta

import psycopg
import pytest
from click.testing import CliRunner

from conftest import ADMIN_DSN, create_database, drop_database
from pgq import cron, migrate
from pgq.cli.main import main
from pgq.doctor import Limits, diagnose
from test_migrations import dbname
from test_upgrade import OLD_RELEASE

# Every test here installs with the pg_cron sweeps.
pytestmark = pytest.mark.needs_pg_cron


@pytest.fixture
def installed(fresh_db: str, cron_cleanup: list[str]) -> str:
    """A fresh install with its sweeps. The orphan check is cluster-wide: sweeps that
    another test left for a database it dropped are removed first."""
    sql(
        ADMIN_DSN,
        "SELECT cron.unschedule(jobid) FROM cron.job WHERE database NOT IN (SELECT datname FROM pg_database)",
    )
    cron_cleanup.append(dbname(fresh_db))
    migrate.install(fresh_db, cron=True)
    return fresh_db


@pytest.fixture
def cron_cleanup() -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    with psycopg.connect(ADMIN_DSN, autocommit=True) as c:
        c.execute("SELECT cron.unschedule(jobid) FROM cron.job WHERE database = ANY(%s)", (names,))
        c.execute(
            "SELECT cron.unschedule(jobid) FROM cron.job WHERE jobname = ANY(%s)",
            ([cron.job_name(cron.CRON_LOG_JOB[0], n) for n in names],),
        )


def lines(dsn: str, **limits: object) -> list[str]:
    return [str(p) for p in diagnose(dsn, Limits(**limits))]  # type: ignore[arg-type]


def only(dsn: str, check: str, **limits: object) -> str:
    found = lines(dsn, **limits)
    assert len(found) == 1 and found[0].startswith(f"{check}: "), found
    return found[0]


def test_a_fresh_install_is_healthy_and_exits_0(installed: str) -> None:
    assert lines(installed) == []
    result = CliRunner().invoke(main, ["doctor", "--dsn", installed])
    assert result.exit_code == 0, result.output
    assert "healthy" in result.output


def test_not_installed(fresh_db: str) -> None:
    assert "pgq install" in only(fresh_db, "version")


def sql(dsn: str, *statements: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        for statement in statements:
            c.execute(statement)


PROVOKE: dict[str, tuple[str, Callable[[str], None], str]] = {
    "schema behind": (
        "version",
        lambda d: sql(
            d, "DELETE FROM pgq._migrations WHERE version = (SELECT max(version) FROM pgq._migrations)"
        ),
        "pgq upgrade",
    ),
    "code of another release": (
        "version",
        lambda d: sql(
            d, "CREATE OR REPLACE FUNCTION pgq.version() RETURNS text LANGUAGE sql AS $$SELECT '0.0.1'$$"
        ),
        "pgq 0.0.1",
    ),
    # Made as pgq_owner without PUBLIC's EXECUTE, so that only the stale-object check sees them.
    "stale overload": (
        "stale objects",
        lambda d: sql(
            d, "SET ROLE pgq_owner", OLD_RELEASE, "REVOKE ALL ON FUNCTION pgq._release(uuid[]) FROM PUBLIC"
        ),
        "function pgq._release (2 overloads",
    ),
    "stale view": (
        "stale objects",
        lambda d: sql(d, "SET ROLE pgq_owner", "CREATE VIEW pgq.old_view AS SELECT 1 AS x"),
        "view pgq.old_view",
    ),
    "public grant": (
        "roles and grants",
        lambda d: sql(d, "GRANT EXECUTE ON FUNCTION pgq.cancel(bigint[]) TO PUBLIC"),
        "pgq.cancel(bigint[])",
    ),
    "foreign owner": (
        "roles and grants",
        lambda d: sql(d, "ALTER FUNCTION pgq.reap() OWNER TO postgres"),
        "not owned by pgq_owner: pgq.reap()",
    ),
    "sweep unscheduled": (
        "sweeps",
        lambda d: sql(
            ADMIN_DSN,
            f"SELECT cron.unschedule('{cron.job_name('reap', d.rsplit('dbname=', 1)[-1].split()[0])}')",
        ),
        "not scheduled",
    ),
    "missing partition": (
        "partitions",
        lambda d: sql(
            d,
            "DO $$ BEGIN EXECUTE format('DROP TABLE pgq.%I', '_outcomes_'"
            " || to_char((now() AT TIME ZONE 'UTC')::date + 1, 'YYYYMMDD')); END $$",
        ),
        "tomorrow's outcome partition",
    ),
}


@pytest.mark.parametrize("case", PROVOKE)
def test_each_problem_is_reported_and_exits_1(installed: str, case: str) -> None:
    check, provoke, needle = PROVOKE[case]
    provoke(installed)
    line = only(installed, check)
    assert needle in line and " -> " in line, line
    result = CliRunner().invoke(main, ["doctor", "--dsn", installed])
    assert result.exit_code == 1
    assert result.output.strip() == line


def test_a_failing_sweep(installed: str) -> None:
    name = dbname(installed)
    job = cron.job_name("reap", name)
    sql(
        ADMIN_DSN,
        "INSERT INTO cron.job_run_details (jobid, runid, database, username, command, status,"
        " return_message, start_time, end_time)"
        " SELECT jobid, nextval('cron.runid_seq'), database, username, command, 'failed',"
        " 'ERROR: function pgq._release(uuid[]) is not unique', now(), now()"
        f" FROM cron.job WHERE jobname = '{job}'",
    )
    try:
        assert "is not unique" in only(installed, "sweeps")
    finally:
        sql(
            ADMIN_DSN,
            "DELETE FROM cron.job_run_details"
            f" WHERE jobid IN (SELECT jobid FROM cron.job WHERE jobname = '{job}')",
        )


def test_sweeps_of_a_dropped_database(installed: str, cron_cleanup: list[str]) -> None:
    gone = f"{dbname(installed)}_gone"
    cron_cleanup.append(gone)
    migrate.install(create_database(gone), cron=True)
    drop_database(gone)
    line = only(installed, "sweeps")
    assert "databases that no longer exist" in line and cron.job_name("reap", gone) in line


def test_a_dead_worker_holding_jobs_and_a_job_past_its_timeout(installed: str) -> None:
    with (
        psycopg.connect(installed, autocommit=True) as sweeps,
        psycopg.connect(installed, autocommit=True) as c,
    ):
        # pg_cron's reap runs here every minute: holding its lock keeps it from releasing the
        # dead worker's job and failing the overdue one before the doctor looks.
        sweeps.execute("SELECT pg_advisory_lock(pgq._lock_key('sweep'), pgq._lock_id('sweep'))")
        c.execute("SELECT pgq.configure('doc', timeout => '1 minute', lease => '5 minutes')")
        c.execute("SELECT pgq.enqueue('doc'), pgq.enqueue('doc')")
        crashed = c.execute("SELECT pgq.register_worker('crashed', ARRAY['doc'])").fetchone()[0]
        slow = c.execute("SELECT pgq.register_worker('slow', ARRAY['doc'])").fetchone()[0]
        c.execute("SELECT pgq.claim(%s, ARRAY['doc'])", (crashed,)).fetchall()
        c.execute("SELECT pgq.claim(%s, ARRAY['doc'])", (slow,)).fetchall()
        # The crashed worker stopped heartbeating an hour ago; the slow one's job started
        # ten minutes ago and it still heartbeats.
        c.execute(
            "UPDATE pgq._workers SET heartbeat_at = now() - interval '1 hour' WHERE id = %s", (crashed,)
        )
        c.execute(
            "UPDATE pgq._jobs SET started_at = now() - interval '10 minutes' WHERE worker_id = %s", (slow,)
        )
        found = lines(installed)
    assert len(found) == 2, found
    assert found[0].startswith("workers: worker crashed is dead") and "holds 1 jobs" in found[0]
    assert found[1].startswith("workers: 1 doc jobs running past their timeout")


def test_a_long_transaction_holding_back_the_horizon(installed: str) -> None:
    with psycopg.connect(installed) as holder:
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT count(*) FROM pgq._jobs").fetchone()
        pid = holder.info.backend_pid
        assert lines(installed) == [], "under the threshold it is no problem"
        line = only(installed, "xmin horizon", max_xact_age=timedelta(0))
        assert f"pid {pid} " in line and "pg_terminate_backend" in line
        holder.rollback()


def test_bloat_of_the_hot_table(installed: str) -> None:
    with psycopg.connect(installed, autocommit=True) as c:
        c.execute("ALTER TABLE pgq._jobs_default SET (autovacuum_enabled = false)")
        c.execute("SELECT pgq.enqueue_batch('bloat', array_fill('{}'::jsonb, ARRAY[3000]))")
        c.execute("DELETE FROM pgq._jobs WHERE entrypoint = 'bloat'")
        c.execute("SELECT pg_stat_force_next_flush()")
    with psycopg.connect(installed, autocommit=True) as c:
        c.execute("SELECT 1")  # the deleting session's statistics are flushed at its exit
    line = only(installed, "bloat", max_dead_tuples=1000)
    assert line.startswith("bloat: pgq._jobs_default has 3000 dead row versions"), line


def test_a_backlog_paused_unserved_or_not_kept_up_with(installed: str) -> None:
    """Three states that stop or slow a queue, each reported once its oldest due job has
    waited past the threshold, with why and what mends it; young backlogs are quiet."""
    with psycopg.connect(installed, autocommit=True) as c:
        for entrypoint, n in (("unserved", 300), ("paused", 20), ("slow", 5), ("young", 7)):
            c.execute("SELECT pgq.enqueue_batch(%s, array_fill('{}'::jsonb, ARRAY[%s]))", (entrypoint, n))
        c.execute("SELECT pgq.pause('paused')")
        c.execute("SELECT pgq.register_worker('slow-box', ARRAY['slow', 'young'])")
        c.execute(
            "UPDATE pgq._jobs SET run_at = now() - interval '10 minutes',"
            " enqueued_at = now() - interval '10 minutes' WHERE entrypoint <> 'young'"
        )
    assert lines(installed, max_queue_age=timedelta(hours=1)) == []  # under the threshold
    found = lines(installed)  # 5 minutes by default
    assert len(found) == 3, found
    paused, slow, unserved = found
    assert all(line.startswith("backlog: ") for line in found), found
    assert re.search(
        r"paused: 20 jobs due, the oldest waiting 10m\d\ds \(over 5m00s\): paused \(settings last", paused
    )
    assert "-> `pgq resume paused`" in paused
    assert "slow: 5 jobs due" in slow and "its 1 live workers do not keep up" in slow
    assert "unserved: 300 jobs due" in unserved and "no live worker serves it" in unserved
    result = CliRunner().invoke(main, ["doctor", "--dsn", installed, "--max-queue-age", "3600"])
    assert result.exit_code == 0 and "healthy" in result.output, result.output
    result = CliRunner().invoke(main, ["doctor", "--dsn", installed, "--max-queue-age", "60"])
    assert result.exit_code == 1, result.output
    said = result.output.splitlines()
    assert [line.split(" jobs due")[0] for line in said] == [line.split(" jobs due")[0] for line in found]
    assert all("(over 1m00s)" in line for line in said), said


def test_the_indexes_left_at_their_peak_size_by_a_drained_backlog(installed: str) -> None:
    """50,000 jobs enqueued and drained (claimed and completed) in SQL, then vacuumed as
    autovacuum would: the heap is empty, the indexes keep their size. Reported with the
    REINDEX that mends each; after it, quiet."""
    with psycopg.connect(installed, autocommit=True) as c:
        c.execute("SELECT pgq.enqueue_batch('drained', array_fill('{}'::jsonb, ARRAY[50000]))")
        worker = c.execute("SELECT pgq.register_worker('drain', ARRAY['drained'])").fetchone()[0]
        for _ in range(5):
            c.execute(
                "SELECT pgq.complete(%(w)s, ARRAY(SELECT id FROM pgq.claim(%(w)s, ARRAY['drained'], 10000)))",
                {"w": worker},
            )
        c.execute("VACUUM ANALYZE pgq._jobs")
        sizes = dict(
            c.execute(
                "SELECT indexrelid::regclass::text, pg_relation_size(indexrelid) FROM pg_index"
                " WHERE indrelid = 'pgq._jobs_default'::regclass"
            ).fetchall()
        )
    print(f"\nafter draining 50,000 jobs: {sizes}")
    limit = 512 * 1024
    found = lines(installed, max_index_excess=limit)
    reported = {line.rsplit("REINDEX INDEX CONCURRENTLY ", 1)[1] for line in found}
    assert "pgq._jobs_default_claim_idx" in reported and "pgq._jobs_pkey" in reported, found
    assert reported == {name for name, size in sizes.items() if size - 64 * 1024 > limit}, found
    assert all(line.startswith("index bloat: index pgq._jobs_") for line in found), found
    assert "for about 0 live rows of pgq._jobs_default" in found[0], found
    assert lines(installed) == []  # the default: over 64 MB more than needed
    with psycopg.connect(installed, autocommit=True) as c:
        for index in reported:
            c.execute(f"REINDEX INDEX CONCURRENTLY {index}")
    assert lines(installed, max_index_excess=limit) == []


def test_index_bloat_is_listed_largest_first_across_partitions(installed: str) -> None:
    """A drained backlog in a partition of its own (pgq.isolate: pgq._jobs_394f..., a name
    that sorts before pgq._jobs_default) and a smaller one in the default partition: every
    bloated index of both is reported, the largest first, whatever its partition."""
    with psycopg.connect(installed, autocommit=True) as c:
        c.execute("SELECT pgq.isolate('drained')")
        for entrypoint, n in (("drained", 50000), ("small", 20000)):
            c.execute("SELECT pgq.enqueue_batch(%s, array_fill('{}'::jsonb, ARRAY[%s]))", (entrypoint, n))
            worker = c.execute("SELECT pgq.register_worker('drain', ARRAY[%s])", (entrypoint,)).fetchone()[0]
            for _ in range(n // 10000):
                c.execute(
                    "SELECT pgq.complete(%(w)s, ARRAY(SELECT id FROM pgq.claim(%(w)s, ARRAY[%(e)s], 10000)))",
                    {"w": worker, "e": entrypoint},
                )
        c.execute("VACUUM ANALYZE pgq._jobs")
        sizes = dict(
            c.execute(
                "SELECT i.indexrelid::regclass::text, pg_relation_size(i.indexrelid)"
                " FROM pg_partition_tree('pgq._jobs') AS p JOIN pg_index AS i ON i.indrelid = p.relid"
            ).fetchall()
        )
    found = lines(installed, max_index_excess=256 * 1024)
    order = [line.rsplit("REINDEX INDEX CONCURRENTLY ", 1)[1] for line in found]
    assert {i.split("_")[2] for i in order} >= {"default", "394f44e7a2ca3005"}, found
    assert [sizes[i] for i in order] == sorted((sizes[i] for i in order), reverse=True), found


def interleaved_backlog(dsn: str) -> None:
    """Due jobs 10 minutes old, of entrypoints a worker serves: 'mixed', 'capped' (a
    concurrency limit) and 'few' (500 jobs) among 17 others in the shared partition,
    'dense' on pages of its own rows."""
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(
            "INSERT INTO pgq._jobs (entrypoint, payload) SELECT CASE WHEN i % 20 = 0 THEN 'mixed'"
            " WHEN i % 20 = 1 THEN 'capped' WHEN i % 80 = 2 THEN 'few' ELSE 'other' || i % 20 END, '{}'"
            " FROM generate_series(1, 40000) AS i"
        )
        c.execute("SELECT pgq.enqueue_batch('dense', array_fill('{}'::jsonb, ARRAY[2000]))")
        c.execute("SELECT pgq.configure('capped', concurrency => 5)")
        c.execute("SELECT pgq.register_worker('slow-box', ARRAY['mixed', 'capped', 'few', 'dense'])")
        c.execute(
            "UPDATE pgq._jobs SET run_at = now() - interval '10 minutes'"
            " WHERE entrypoint IN ('mixed', 'capped', 'few', 'dense')"
        )
        c.execute("VACUUM ANALYZE pgq._jobs")


def behind(dsn: str) -> dict[str, str]:
    """The backlog lines of entrypoints whose workers do not keep up, by entrypoint."""
    found = [str(p) for p in diagnose(dsn) if "do not keep up" in p.problem]
    return {line.split(":")[1].strip(): line for line in found}


def test_a_backlog_behind_whose_jobs_share_their_pages_is_told_to_isolate(installed: str) -> None:
    """Workers that do not keep up with an entrypoint whose jobs lie between other
    entrypoints' in the shared partition, a page touched per job (docs/scaling.md): the fix
    names `pgq isolate`. Not for a backlog that fills its pages, one under a limit (its
    pages do not cap it), one of under 1,000 jobs, nor once isolated."""
    interleaved_backlog(installed)
    said = behind(installed)
    assert set(said) == {"mixed", "capped", "few", "dense"}, said
    assert "-> `pgq isolate mixed`" in said["mixed"], said
    pages = r"its next jobs lie ([12]) to a heap page of the shared partition, whose pages hold \d+ rows"
    pages += r" \(claims and completions write a page per \1 jobs\)"
    assert re.search(pages, said["mixed"]), said
    assert all("isolate" not in said[ep] for ep in ("capped", "few", "dense")), said
    sql(installed, "SELECT pgq.isolate('mixed')", "VACUUM ANALYZE pgq._jobs")
    said = behind(installed)
    assert "mixed" in said and "isolate" not in said["mixed"], said
