"""Who may read a job: its producer (the login role that enqueued it), the worker that holds
it, and pgq_admin. Ids are sequential, so any other answer than "unknown" for a job of
someone else's would let a producer read every payload, header and result by counting.
Real login roles, real connections; the Client's result/wait path included."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

import pgq
from conftest import admin_execute
from pgq import migrate
from test_upgrade import FIXTURES, restore

# The calls that read a job, each answering NULL for a job the caller may not read.
READS = {
    "job": "SELECT pgq.job(%s)",
    "job_status": "SELECT pgq.job_status(%s)",
    "watch": "SELECT pgq.watch(%s)",
}


@pytest.fixture(scope="module")
def logins(dsn: str) -> Iterator[dict[str, str]]:
    """DSNs of login roles: two producers, two workers, an admin."""
    tag = uuid.uuid4().hex[:8]
    groups = {
        "producer_a": "pgq_producer",
        "producer_b": "pgq_producer",
        "worker": "pgq_worker",
        "worker_b": "pgq_worker",
        "admin": "pgq_admin",
    }
    names = {kind: f"privilege_{kind}_{tag}" for kind in groups}
    for kind, group in groups.items():
        admin_execute(
            sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(
                sql.Identifier(names[kind]), sql.Identifier(group)
            )
        )
    try:
        yield {kind: make_conninfo(dsn, user=name) for kind, name in names.items()} | {
            f"{kind}_name": name for kind, name in names.items()
        }
    finally:
        with psycopg.connect(dsn, autocommit=True) as c:
            for name in names.values():
                c.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
        for name in names.values():
            admin_execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def one(dsn: str, statement: str, *params: object) -> object:
    with psycopg.connect(dsn, autocommit=True) as c:
        row = c.execute(statement, params).fetchone()
        assert row is not None
        return row[0]


def settle(dsn: str, entrypoint: str, result: object) -> None:
    """Claim and complete the one due job of entrypoint, as the module's superuser."""
    with psycopg.connect(dsn, autocommit=True) as c:
        worker = c.execute("SELECT pgq.register_worker('t', ARRAY[%s])", (entrypoint,)).fetchone()[0]
        ids = [r[0] for r in c.execute("SELECT id FROM pgq.claim(%s, ARRAY[%s])", (worker, entrypoint))]
        assert len(ids) == 1
        c.execute(
            "SELECT pgq.complete(%s, %s::bigint[], ARRAY[%s]::jsonb[])",
            (worker, ids, psycopg.types.json.Jsonb(result)),
        )


@pytest.mark.parametrize("call", READS)
def test_a_producer_reads_its_own_jobs_and_no_other(dsn: str, logins: dict[str, str], call: str) -> None:
    mine = one(logins["producer_a"], "SELECT pgq.enqueue('vis_own', '{\"secret\": \"a\"}')")
    theirs = one(logins["producer_b"], "SELECT pgq.enqueue('vis_other', '{\"secret\": \"b\"}')")
    assert one(logins["producer_a"], READS[call], mine) is not None
    assert one(logins["producer_a"], READS[call], theirs) is None, "another producer's live job is readable"
    settle(dsn, "vis_other", {"answer": "b"})
    assert one(logins["producer_a"], READS[call], theirs) is None, (
        "another producer's finished job is readable"
    )
    assert one(logins["producer_b"], READS[call], theirs) is not None
    # Nothing of the job leaks through its own story either (as seen by its producer).
    if call == "job":
        story = one(logins["producer_b"], READS[call], theirs)
        assert isinstance(story, dict) and story["result"] == {"answer": "b"}


def test_counting_ids_finds_only_ones_own_jobs(dsn: str, logins: dict[str, str]) -> None:
    mine = [
        one(logins["producer_a"], "SELECT pgq.enqueue('vis_count', %s)", f'{{"n": {n}}}') for n in range(3)
    ]
    for n in range(3):
        one(logins["producer_b"], "SELECT pgq.enqueue('vis_count', %s)", f'{{"n": {n}}}')
    one(dsn, "SELECT pgq.enqueue('vis_count')")
    top = one(dsn, "SELECT max(id) FROM pgq._jobs")
    with psycopg.connect(logins["producer_a"], autocommit=True) as a:
        seen = [
            r[0]
            for r in a.execute(
                "SELECT i FROM generate_series(1, %s) AS i WHERE pgq.job(i) IS NOT NULL"
                " OR pgq.job_status(i) IS NOT NULL",
                (top,),
            )
        ]
    assert seen == mine


def test_client_wait_and_result_work_for_the_producer_only(dsn: str, logins: dict[str, str]) -> None:
    with pgq.Client(logins["producer_a"]) as a, pgq.Client(logins["producer_b"]) as b:
        job = a.enqueue("vis_wait", {"secret": 1})
        assert a.result(job) is None
        with pytest.raises(pgq.UnknownJob):
            b.result(job)
        with pytest.raises(pgq.UnknownJob):
            b.wait(job, timeout=5)
        got: list[pgq.JobResult] = []
        waiter = threading.Thread(target=lambda: got.append(a.wait(job, timeout=60)))
        waiter.start()
        # Settle only once the waiter's pgq.watch committed: its UPDATE holds the row for a
        # moment, and a claim skips a locked row (SKIP LOCKED) and would find nothing.
        with psycopg.connect(dsn, autocommit=True) as c:
            for _ in range(6000):
                if c.execute("SELECT watched FROM pgq._jobs WHERE id = %s", (job,)).fetchone()[0]:
                    break
                time.sleep(0.01)
        settle(dsn, "vis_wait", {"done": True})
        waiter.join(timeout=90)
        assert got == [pgq.JobResult(job, "succeeded", {"done": True}, None)]
        with pytest.raises(pgq.UnknownJob):
            b.wait(job, timeout=5)
        with pytest.raises(pgq.UnknownJob):
            b.result(job)


def test_watch_of_another_producers_job_marks_nothing(dsn: str, logins: dict[str, str]) -> None:
    theirs = one(logins["producer_b"], "SELECT pgq.enqueue('vis_watch')")
    assert one(logins["producer_a"], "SELECT pgq.watch(%s)", theirs) is None
    assert one(dsn, "SELECT watched FROM pgq._jobs WHERE id = %s", theirs) is False


def test_a_worker_reads_the_jobs_it_holds_and_no_other(dsn: str, logins: dict[str, str]) -> None:
    held = one(logins["producer_a"], "SELECT pgq.enqueue('vis_held', '{\"secret\": 1}')")
    other = one(logins["producer_a"], "SELECT pgq.enqueue('vis_not_held')")
    with (
        psycopg.connect(logins["worker"], autocommit=True) as w,
        psycopg.connect(logins["worker_b"], autocommit=True) as wb,
    ):
        worker = w.execute("SELECT pgq.register_worker('w', ARRAY['vis_held'])").fetchone()[0]
        assert [r[0] for r in w.execute("SELECT id FROM pgq.claim(%s, ARRAY['vis_held'])", (worker,))] == [
            held
        ]
        assert w.execute("SELECT pgq.job(%s)->'payload'", (held,)).fetchone()[0] == {"secret": 1}
        assert w.execute("SELECT pgq.job_status(%s)", (held,)).fetchone()[0] == "running"
        assert w.execute("SELECT pgq.job(%s)", (other,)).fetchone()[0] is None
        assert w.execute("SELECT pgq.job_status(%s)", (other,)).fetchone()[0] is None
        # Another worker login does not read it through the holder.
        assert wb.execute("SELECT pgq.job(%s)", (held,)).fetchone()[0] is None
        w.execute("SELECT pgq.complete(%s, ARRAY[%s]::bigint[])", (worker, held))
        assert w.execute("SELECT pgq.job(%s)", (held,)).fetchone()[0] is None, "no longer held"
    assert one(logins["producer_a"], "SELECT pgq.job_status(%s)", held) == "succeeded"


def test_an_admin_reads_every_job(dsn: str, logins: dict[str, str]) -> None:
    live = one(logins["producer_a"], "SELECT pgq.enqueue('vis_admin', '{\"secret\": 1}')")
    done = one(logins["producer_b"], "SELECT pgq.enqueue('vis_admin_done')")
    settle(dsn, "vis_admin_done", 7)
    assert one(logins["admin"], "SELECT pgq.job(%s)->'payload'", live) == {"secret": 1}
    assert one(logins["admin"], "SELECT pgq.job(%s)->'result'", done) == 7
    assert one(logins["admin"], "SELECT pgq.job_status(%s)", done) == "succeeded"


def test_every_way_of_enqueuing_records_the_login_role(dsn: str, logins: dict[str, str]) -> None:
    """enqueue, enqueue_batch, a trigger on the producer's table, and a SET ROLE in between:
    the job belongs to the login role (session_user), as worker ids do."""
    a, b = logins["producer_a"], logins["producer_b"]
    with psycopg.connect(dsn, autocommit=True) as su:
        su.execute("CREATE TABLE IF NOT EXISTS vis_rows (id int)")
        su.execute(
            "CREATE OR REPLACE TRIGGER vis_rows_trg AFTER INSERT ON vis_rows"
            " FOR EACH ROW EXECUTE FUNCTION pgq.enqueue_trigger('vis_trg')"
        )
        su.execute(
            sql.SQL("GRANT INSERT ON vis_rows TO {}").format(sql.Identifier(logins["producer_a_name"]))
        )
    with psycopg.connect(a, autocommit=True) as c:
        ids = [
            r[0] for r in c.execute("SELECT * FROM pgq.enqueue_batch('vis_batch', ARRAY['1', '2']::jsonb[])")
        ]
        c.execute("INSERT INTO vis_rows VALUES (1)")
        c.execute(sql.SQL("SET ROLE {}").format(sql.Identifier("pgq_producer")))
        ids.append(c.execute("SELECT pgq.enqueue('vis_set_role')").fetchone()[0])
    trg = one(dsn, "SELECT id FROM pgq._jobs WHERE entrypoint = 'vis_trg'")
    ids.append(trg)
    for job in ids:
        assert one(a, "SELECT pgq.job_status(%s)", job) == "queued"
        assert one(b, "SELECT pgq.job_status(%s)", job) is None


def test_jobs_of_schedules_belong_to_the_role_that_runs_them(dsn: str, logins: dict[str, str]) -> None:
    one(dsn, "SELECT pgq.schedule('vis_sched', '* * * * *', 'vis_sched')")
    assert one(dsn, "SELECT pgq.run_schedules(date_trunc('minute', now()) + interval '1 minute')") == 1
    job = one(dsn, "SELECT id FROM pgq._jobs WHERE entrypoint = 'vis_sched'")
    assert one(logins["admin"], "SELECT pgq.job_status(%s)", job) == "queued"
    assert one(logins["producer_a"], "SELECT pgq.job_status(%s)", job) is None


def test_jobs_queued_before_the_upgrade_are_the_admins(fresh_db: str, logins: dict[str, str]) -> None:
    """The migration records no producer for the jobs already queued (not the role running
    the upgrade): only pgq_admin reads them; jobs enqueued after it are their producer's."""
    restore(fresh_db, FIXTURES / "pgq-0.1.0.sql")
    as_a = make_conninfo(fresh_db, user=logins["producer_a_name"])
    as_admin = make_conninfo(fresh_db, user=logins["admin_name"])
    before = one(as_a, "SELECT pgq.enqueue('vis_upgrade')")
    migrate.upgrade(fresh_db, cron=False)
    assert one(fresh_db, "SELECT enqueued_by IS NULL FROM pgq._jobs WHERE id = %s", before) is True
    assert one(as_a, "SELECT pgq.job_status(%s)", before) is None
    assert one(as_admin, "SELECT pgq.job_status(%s)", before) == "queued"
    after = one(as_a, "SELECT pgq.enqueue('vis_upgrade')")
    recorded = one(fresh_db, "SELECT enqueued_by FROM pgq._jobs WHERE id = %s", after)
    assert recorded == logins["producer_a_name"]
    assert one(as_a, "SELECT pgq.job_status(%s)", after) == "queued"


def test_depends_on_another_producers_job_is_unknown(dsn: str, logins: dict[str, str]) -> None:
    """A dependency answers as pgq.job_status does: a job the producer may not read, live or
    finished, is unknown (PQ001), not waited for nor reported canceled with it (that told
    whether another producer's job exists and how it ended). Its own jobs work as before."""
    theirs = one(logins["producer_a"], "SELECT pgq.enqueue('dep_theirs')")
    mine = one(logins["producer_b"], "SELECT pgq.enqueue('dep_mine')")
    probe = "SELECT pgq.enqueue('dep_probe', depends_on => ARRAY[%s]::bigint[])"
    with pytest.raises(psycopg.Error, match=f"job {theirs} is unknown") as refused:
        one(logins["producer_b"], probe, theirs)
    assert refused.value.sqlstate == "PQ001"
    one(logins["admin"], "SELECT pgq.cancel(ARRAY[%s]::bigint[])", theirs)  # finished now
    with pytest.raises(psycopg.Error, match=f"job {theirs} is unknown") as refused:
        one(logins["producer_b"], probe, theirs)
    assert refused.value.sqlstate == "PQ001"
    waiting = one(logins["producer_b"], probe, mine)
    assert one(logins["producer_b"], "SELECT pgq.job_status(%s)", waiting) == "waiting"
    # pgq_admin may wait for anyone's job.
    assert one(logins["admin"], "SELECT pgq.job_status(%s)", one(logins["admin"], probe, mine)) == "waiting"
