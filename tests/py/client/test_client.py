"""pgq.Client against the real database: every method, conn= transactions, error mapping."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import os
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from uuid import UUID

import psycopg
import pytest

import pgq
from pgq import Client, JobRow, QueueRow, ScheduleRow, StatsRow, WorkerRow
from pgq import queries as q


@pytest.fixture
def client(dsn: str) -> Iterator[Client]:
    with Client(dsn) as c:
        yield c


@pytest.fixture(autouse=True)
def _clean_schedules(request: pytest.FixtureRequest) -> Iterator[None]:
    """conftest empties the queue after each test; the schedules are emptied here."""
    yield
    if "dsn" in request.fixturenames:
        with psycopg.connect(request.getfixturevalue("dsn"), autocommit=True) as c:
            c.execute("DELETE FROM pgq._schedules")


def claim_one(conn: psycopg.Connection, entrypoint: str) -> tuple[UUID, int]:
    """Register a worker and claim one job of entrypoint: (worker id, job id)."""
    worker_id = conn.execute(
        "SELECT pgq.register_worker(name => 'test-worker', entrypoints => ARRAY[%s])",
        (entrypoint,),
    ).fetchone()[0]
    row = conn.execute(
        "SELECT id FROM pgq.claim(worker_id => %s, entrypoints => ARRAY[%s])",
        (worker_id, entrypoint),
    ).fetchone()
    assert row is not None, "nothing to claim"
    return worker_id, row[0]


def make_dead(client: Client, conn: psycopg.Connection, entrypoint: str = "dying") -> int:
    """A job that failed its only attempt."""
    job_id = client.enqueue(entrypoint, {"n": 1}, max_attempts=1)
    worker_id, claimed = claim_one(conn, entrypoint)
    assert claimed == job_id
    status = conn.execute(
        "SELECT pgq.fail(worker_id => %s, job_id => %s, error => 'boom')", (worker_id, job_id)
    ).fetchone()[0]
    assert status == "dead"
    return job_id


def count_jobs(dsn: str, entrypoint: str) -> int:
    """Counted on a connection of its own: sees only committed jobs."""
    with psycopg.connect(dsn) as c:
        query = "SELECT count(*) FROM pgq.jobs WHERE entrypoint = %s"
        return c.execute(query, (entrypoint,)).fetchone()[0]


# --- enqueue -------------------------------------------------------------------------------


def test_enqueue_passes_every_named_argument(client: Client) -> None:
    run_at = datetime.now(timezone.utc) + timedelta(hours=1)
    job_id = client.enqueue(
        "email",
        {"to": "a@b"},
        priority=7,
        run_at=run_at,
        dedupe_key="welcome:1",
        headers={"trace_id": "abc"},
        max_attempts=3,
    )
    [job] = client.jobs(entrypoint="email")
    assert job.id == job_id
    assert job.payload == {"to": "a@b"}
    assert job.priority == 7
    assert abs(job.run_at - run_at) < timedelta(milliseconds=1)
    assert job.dedupe_key == "welcome:1"
    assert job.headers == {"trace_id": "abc"}
    assert job.max_attempts == 3
    assert (job.status, job.attempt, job.deliveries) == ("queued", 1, 0)


def test_enqueue_defaults_and_scalar_payloads(client: Client) -> None:
    ids = [client.enqueue("plain"), client.enqueue("plain", [1, 2]), client.enqueue("plain", "x")]
    jobs = {j.id: j for j in client.jobs(entrypoint="plain")}
    assert [jobs[i].payload for i in ids] == [None, [1, 2], "x"]
    assert {j.priority for j in jobs.values()} == {0}
    assert {j.max_attempts for j in jobs.values()} == {5}


def test_enqueue_sends_only_what_differs_from_the_defaults(client: Client) -> None:
    """A plain enqueue is a short statement (cheaper to parse and plan); what is not the
    default, a wrong value included, still reaches pgq.enqueue and its checks."""
    defaults = dict(
        priority=0, run_at=None, dedupe_key=None, headers=None, max_attempts=None, depends_on=None
    )
    plain = q.enqueue("e", {"a": 1}, **defaults)  # type: ignore[arg-type]
    assert plain.query == (
        "SELECT pgq.enqueue(entrypoint => %(entrypoint)s::text, payload => %(payload)s::jsonb)"
    )
    assert set(plain.params) == {"entrypoint", "payload"}
    with pytest.raises(pgq.InvalidArgument, match="max_attempts"):
        client.enqueue("e", max_attempts=0)
    with pytest.raises(pgq.InvalidArgument, match="entrypoint"):
        client.enqueue(" e")
    assert client.jobs(entrypoint="e") == []
    job_id = client.enqueue("e", priority=-3)
    assert [j.priority for j in client.jobs(entrypoint="e")] == [-3]
    assert client.job(job_id)["payload"] is None


def _prepared(client: Client) -> list[str]:
    """The statements prepared on the pool's connection (a pool of one)."""
    with client._pool.connection() as conn:
        rows = conn.execute("SELECT statement FROM pg_prepared_statements", prepare=False)
        return [r[0] for r in rows]


def test_enqueue_is_prepared_on_a_connection_straight_to_postgresql(dsn: str) -> None:
    """The producer's per-job calls skip the server's parse and plan from their second
    call on; nothing else is prepared (a prepared statement fails once its result type
    changes, as an upgrade may change other calls' rows), and prepare=False prepares
    nothing."""
    with Client(dsn, min_size=1, max_size=1) as client:
        job_id = client.enqueue("e", {"a": 1})
        client.enqueue_job("e", {"a": 2})
        assert _prepared(client) == []
        client.enqueue("e", {"a": 1})
        client.enqueue_job("e", {"a": 2})
        for _ in range(10):
            assert client.job_status(job_id) == "queued"
            client.configure("e", lease="1 minute")  # its interval check too
        assert sorted(_prepared(client)) == [
            "SELECT e.id, e.created, e.replaced"
            " FROM pgq.enqueue_job(entrypoint => $1::text, payload => $2::jsonb) AS e",
            "SELECT pgq.enqueue(entrypoint => $1::text, payload => $2::jsonb)",
        ]
        assert client.enqueue("e", {"a": 3}) > job_id  # the prepared statement runs
        # An upgrade replaces the function (a new one, then the old one back): the
        # statement is planned again, not broken.
        with psycopg.connect(dsn, autocommit=True) as admin:
            (definition,) = admin.execute("SELECT pg_get_functiondef('pgq.enqueue'::regproc)").fetchone()
            with admin.transaction():
                admin.execute("ALTER FUNCTION pgq.enqueue RENAME TO enqueue_kept")
                admin.execute(definition)
            try:
                assert client.enqueue("e", {"a": 4}) > job_id
            finally:
                with admin.transaction():
                    admin.execute("DROP FUNCTION pgq.enqueue")
                    admin.execute("ALTER FUNCTION pgq.enqueue_kept RENAME TO enqueue")
        assert client.enqueue("e", {"a": 5}) > job_id
        # On the caller's connection, psycopg's own setting decides (here: not before the
        # fifth execution).
        with psycopg.connect(dsn) as conn:
            client.enqueue("e", {"a": 6}, conn=conn)
            assert conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone() == (0,)
    with Client(dsn, min_size=1, max_size=1, prepare=False) as plain:
        for i in range(3):
            plain.enqueue("e", {"a": i})
        assert _prepared(plain) == []


def test_failing_enqueues_leave_one_prepared_statement(dsn: str) -> None:
    """Calls that fail prepare nothing, or reuse what an earlier call prepared: none leaves
    a statement on the server that psycopg no longer knows about."""
    with Client(dsn, min_size=1, max_size=1) as client:
        for _ in range(2):
            for _ in range(3):
                with pytest.raises(pgq.InvalidArgument, match="entrypoint"):
                    client.enqueue(" e")
            client.enqueue("e")
        assert _prepared(client) == ["SELECT pgq.enqueue(entrypoint => $1::text)"]


def test_async_client_prepares_its_enqueue_too(dsn: str) -> None:
    async def scenario() -> list[str]:
        async with pgq.AsyncClient(dsn, min_size=1, max_size=1) as client:
            for _ in range(3):
                await client.enqueue("e", {"a": 1})
                await client.job_status(1)
            async with client._pool.connection() as conn:
                cur = await conn.execute("SELECT statement FROM pg_prepared_statements")
                return [r[0] for r in await cur.fetchall()]

    assert asyncio.run(scenario()) == ["SELECT pgq.enqueue(entrypoint => $1::text, payload => $2::jsonb)"]


def test_enqueue_dedupe_key_returns_the_live_job(client: Client) -> None:
    first = client.enqueue("report", {"day": 1}, dedupe_key="day-1")
    assert client.enqueue("report", {"day": 1}, dedupe_key="day-1") == first
    assert client.enqueue("report", {"day": 2}, dedupe_key="day-2") != first


def test_enqueue_run_at_timedelta_counts_from_database_now(client: Client) -> None:
    client.enqueue("later", run_at=timedelta(minutes=10))
    [queue] = client.queues()
    assert (queue.queued, queue.scheduled) == (0, 1)
    [job] = client.jobs(entrypoint="later")
    assert timedelta(minutes=9) < job.run_at - job.enqueued_at <= timedelta(minutes=10, seconds=1)


def test_enqueue_rejects_naive_run_at(client: Client) -> None:
    with pytest.raises(pgq.InvalidArgument, match="run_at"):
        client.enqueue("x", run_at=datetime.now())


def test_enqueue_without_conn_commits(client: Client, dsn: str) -> None:
    client.enqueue("committed", {"a": 1})
    assert count_jobs(dsn, "committed") == 1


def test_conn_rolled_back_means_no_job(client: Client, dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        job_id = client.enqueue("tx", {"a": 1}, conn=conn)
        assert client.job_status(job_id, conn=conn) == "queued"  # visible inside
        assert count_jobs(dsn, "tx") == 0  # invisible outside until commit
        conn.rollback()
    assert count_jobs(dsn, "tx") == 0
    assert client.job_status(job_id) is None


def test_conn_committed_means_a_job(client: Client, dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        with conn.transaction():
            conn.execute("CREATE TEMP TABLE orders (id int)")
            conn.execute("INSERT INTO orders VALUES (1)")
            job_id = client.enqueue("tx", {"order": 1}, conn=conn)
            assert count_jobs(dsn, "tx") == 0
        assert count_jobs(dsn, "tx") == 1
    assert client.job_status(job_id) == "queued"


def test_enqueue_from_threads_shares_the_pool(client: Client, dsn: str) -> None:
    def produce() -> None:
        for i in range(25):
            client.enqueue("threads", {"i": i})

    threads = [threading.Thread(target=produce) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert count_jobs(dsn, "threads") == 200


def test_enqueue_depends_on_waits_then_cascades_cancellation(client: Client) -> None:
    parent = client.enqueue("parent")
    child = client.enqueue("child", depends_on=[parent])
    grandchild = client.enqueue("grandchild", depends_on=child)  # one id is enough
    assert [client.job_status(i) for i in (parent, child, grandchild)] == ["queued", "waiting", "waiting"]
    assert [j.id for j in client.jobs(status="waiting")] == [child, grandchild]
    assert client.cancel(parent) == 1
    assert [client.job_status(i) for i in (child, grandchild)] == ["canceled", "canceled"]


def test_enqueue_depends_on_finished_jobs(client: Client, conn: psycopg.Connection) -> None:
    done = client.enqueue("step")
    worker_id, _ = claim_one(conn, "step")
    conn.execute("SELECT pgq.complete(worker_id => %s, job_ids => ARRAY[%s::bigint])", (worker_id, done))
    assert client.job_status(client.enqueue("next", depends_on=[done])) == "queued"
    canceled = client.enqueue("step")
    client.cancel(canceled)
    assert client.job_status(client.enqueue("next", depends_on=[done, canceled])) == "canceled"
    with pytest.raises(
        pgq.InvalidArgument, match=r"invalid argument depends_on: job 1000000000000 is unknown"
    ):
        client.enqueue("next", depends_on=[10**12])
    with pytest.raises(pgq.InvalidArgument, match="invalid argument depends_on"):
        client.enqueue("next", depends_on="12")


# --- enqueue_batch -------------------------------------------------------------------------


def test_enqueue_batch_returns_ids_in_payload_order(client: Client, dsn: str) -> None:
    # More payloads than travel in one JSON array (64), None (SQL NULL) among them.
    payloads = [None if i % 7 == 0 else {"n": i} for i in range(150)] + [[1], "s", 0, False, {"a": None}]
    ids = client.enqueue_batch("bulk", payloads, priority=2)
    assert len(ids) == len(payloads) and ids == sorted(ids)
    jobs = {j.id: j for j in client.jobs(entrypoint="bulk", limit=1000)}
    assert [jobs[i].payload for i in ids] == payloads
    assert {j.priority for j in jobs.values()} == {2}
    with psycopg.connect(dsn) as conn:
        nulls = conn.execute(
            "SELECT array_agg(id ORDER BY id) FROM pgq._jobs WHERE payload IS NULL"
        ).fetchone()[0]
    assert nulls == [i for i, p in zip(ids, payloads, strict=True) if p is None]


def test_enqueue_batch_empty_and_scheduled(client: Client) -> None:
    assert client.enqueue_batch("bulk", []) == []
    ids = client.enqueue_batch("bulk", [1, 2], run_at=timedelta(hours=1))
    [queue] = client.queues()
    assert (queue.entrypoint, queue.scheduled, queue.queued) == ("bulk", 2, 0)
    assert len(ids) == 2


def test_enqueue_batch_joins_the_callers_transaction(client: Client, dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        client.enqueue_batch("bulk", [1, 2, 3], conn=conn)
        conn.rollback()
        client.enqueue_batch("bulk", [4, 5], conn=conn)
        conn.commit()
    assert count_jobs(dsn, "bulk") == 2


# --- status, cancel, retry -----------------------------------------------------------------


def test_job_status_live_finished_and_unknown(client: Client) -> None:
    job_id = client.enqueue("s")
    assert client.job_status(job_id) == "queued"
    assert client.cancel([job_id]) == 1
    assert client.job_status(job_id) == "canceled"
    assert client.job_status(10**12) is None


def test_cancel_accepts_one_id_or_many_and_counts(client: Client) -> None:
    ids = client.enqueue_batch("c", [1, 2, 3])
    assert client.cancel(ids[0]) == 1
    assert client.cancel([ids[1], ids[2], 10**12]) == 2
    assert client.cancel([]) == 0
    assert client.jobs(entrypoint="c") == []


def test_cancel_running_job_requests_cancellation(client: Client, conn: psycopg.Connection) -> None:
    job_id = client.enqueue("long")
    claim_one(conn, "long")
    assert client.cancel([job_id]) == 1
    [job] = client.jobs(entrypoint="long")
    assert (job.status, job.cancel_requested) == ("running", True)


def test_retry_requeues_dead_jobs(client: Client, conn: psycopg.Connection) -> None:
    job_id = make_dead(client, conn)
    [job] = client.jobs(status="dead")
    assert (job.id, job.attempt, job.last_error) == (job_id, 1, "boom")
    assert client.retry([job_id, 10**12]) == 1
    [job] = client.jobs(entrypoint="dying")
    assert (job.status, job.attempt) == ("queued", 1)
    assert client.retry(job_id) == 0  # not dead any more


# --- pause, resume, configure, reap --------------------------------------------------------


def test_pause_and_resume(client: Client) -> None:
    client.pause("p")
    [queue] = client.queues()
    assert (queue.entrypoint, queue.paused) == ("p", True)
    client.resume("p")
    assert client.queues()[0].paused is False


def test_configure_with_timedelta_and_interval_text(client: Client) -> None:
    client.configure(
        "cfg",
        max_attempts=9,
        backoff_base="2 seconds",
        backoff_max=timedelta(minutes=5),
        lease="1 minute",
        timeout=timedelta(minutes=10),
        concurrency=4,
        retention="3 days",
    )
    [queue] = client.queues()
    assert queue.max_attempts == 9
    assert queue.backoff_base == timedelta(seconds=2)
    assert queue.backoff_max == timedelta(minutes=5)
    assert queue.lease == timedelta(minutes=1)
    assert queue.timeout == timedelta(minutes=10)
    assert queue.concurrency == 4
    assert queue.retention == timedelta(days=3)
    client.configure("cfg", concurrency=0)  # removes the limit, leaves the rest
    [queue] = client.queues()
    assert (queue.concurrency, queue.max_attempts) == (None, 9)


def test_configure_bad_interval_text_names_the_argument(client: Client) -> None:
    with pytest.raises(pgq.InvalidArgument, match=r"invalid argument lease: 'soon' is not an"):
        client.configure("cfg", lease="soon")
    assert client.queues() == []  # nothing changed


def test_configure_bad_interval_keeps_the_callers_transaction(client: Client, dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        client.enqueue("tx", conn=conn)
        with pytest.raises(pgq.InvalidArgument, match="retention"):
            client.configure("tx", retention="forever", conn=conn)
        client.configure("tx", max_attempts=2, conn=conn)  # the transaction is still usable
        conn.commit()
    [queue] = client.queues()
    assert (queue.entrypoint, queue.queued, queue.max_attempts) == ("tx", 1, 2)


def test_configure_out_of_range_raises_from_sql(client: Client) -> None:
    with pytest.raises(pgq.InvalidArgument, match="lease") as info:
        client.configure("cfg", lease=timedelta(milliseconds=10))
    assert isinstance(info.value.__cause__, psycopg.Error)
    assert info.value.__cause__.sqlstate == "PQ001"


def test_configure_rate_sets_and_zero_removes(client: Client) -> None:
    client.configure("rated", rate=5, concurrency=2)
    assert client.queues()[0].rate == Decimal(5)
    client.configure("rated", rate=Decimal("0.25"))
    assert client.queues()[0].rate == Decimal("0.25")
    client.configure("rated", rate=0.5)
    assert client.queues()[0].rate == Decimal("0.5")
    client.configure("rated", max_attempts=3)  # None leaves the rate alone
    assert client.queues()[0].rate == Decimal("0.5")
    client.configure("rated", rate=0)
    [queue] = client.queues()
    assert (queue.rate, queue.concurrency) == (None, 2)
    for bad in (-1, Decimal("0.0001"), 2_000_000):
        with pytest.raises(pgq.InvalidArgument, match="invalid argument rate"):
            client.configure("rated", rate=bad)
    assert client.queues()[0].rate is None


def test_reap_requeues_jobs_of_silent_workers(client: Client, conn: psycopg.Connection) -> None:
    assert client.reap() == 0
    job_id = client.enqueue("r")
    worker_id, _ = claim_one(conn, "r")
    conn.execute(
        "UPDATE pgq._workers SET heartbeat_at = now() - interval '1 hour' WHERE id = %s",
        (worker_id,),
    )
    assert client.reap() == 1
    [job] = client.jobs(entrypoint="r")
    assert (job.id, job.status, job.deliveries) == (job_id, "queued", 1)
    [worker] = client.workers()
    assert worker.state == "dead"


# --- periodic jobs -------------------------------------------------------------------------


def test_schedule_returns_the_next_run_and_lists_it(client: Client) -> None:
    before = datetime.now(timezone.utc)
    next_run = client.schedule("nightly", "30 2 * * *", "report", {"kind": "daily"})
    assert next_run is not None and next_run.utcoffset() is not None
    utc = next_run.astimezone(timezone.utc)
    assert (utc.hour, utc.minute, utc.second) == (2, 30, 0)  # cron is UTC
    assert before < next_run <= before + timedelta(days=1)
    [row] = client.schedules()
    assert isinstance(row, ScheduleRow)
    assert (row.name, row.cron, row.entrypoint, row.payload) == (
        "nightly",
        "30 2 * * *",
        "report",
        {"kind": "daily"},
    )
    assert (row.last_run, row.next_run) == (None, next_run)
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.cron = "* * * * *"  # type: ignore[misc]


def test_schedule_replaces_and_unschedule_removes(client: Client) -> None:
    client.schedule("b", "@hourly", "tick")
    client.schedule("a", "*/5 * * * *", "tick", [1])
    next_run = client.schedule("a", "0 0 * * mon", "tock")
    assert [s.name for s in client.schedules()] == ["a", "b"]
    a = client.schedules()[0]
    assert (a.cron, a.entrypoint, a.payload, a.next_run) == ("0 0 * * mon", "tock", None, next_run)
    assert next_run is not None and next_run.astimezone(timezone.utc).weekday() == 0
    assert client.unschedule("a") is True
    assert client.unschedule("a") is False
    assert [s.name for s in client.schedules()] == ["b"]


def test_schedule_joins_the_callers_transaction(client: Client, dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        client.schedule("tx", "@daily", "report", conn=conn)
        assert [s.name for s in client.schedules(conn=conn)] == ["tx"]
        conn.rollback()
    assert client.schedules() == []


def test_schedule_that_never_matches_is_refused(client: Client) -> None:
    with pytest.raises(pgq.InvalidCron, match="matches no date"):
        client.schedule("feb31", "0 0 31 2 *", "report")
    assert client.schedules() == []


def test_run_schedules_fires_once_per_schedule_and_minute(client: Client) -> None:
    # Yearly: an every-minute schedule would be due by itself if a minute began meanwhile.
    client.schedule("new-year", "0 0 1 1 *", "tick", {"n": 1})
    due = client.schedules()[0].next_run
    assert due is not None
    assert client.run_schedules() == 0  # not due yet
    assert client.run_schedules(due - timedelta(seconds=1)) == 0
    assert client.run_schedules(due) == 1
    assert client.run_schedules(due) == 0  # that minute has fired
    assert client.run_schedules(due + timedelta(seconds=30)) == 0
    [job] = client.jobs(entrypoint="tick")
    assert job.payload == {"n": 1}
    assert job.headers == {"schedule": "new-year", "fire_time": f"{due:%Y-%m-%dT%H:%MZ}"}
    [row] = client.schedules()
    assert (row.last_run, row.next_run) == (due, due.replace(year=due.year + 1))


def test_run_schedules_after_an_outage_fires_once(client: Client) -> None:
    client.schedule("every-minute", "* * * * *", "tick")
    due = client.schedules()[0].next_run
    assert due is not None
    assert client.run_schedules(due + timedelta(minutes=10)) == 1  # ten missed minutes, one job
    assert client.run_schedules(due + timedelta(minutes=10)) == 0
    [row] = client.schedules()
    assert (row.last_run, row.next_run) == (due, due + timedelta(minutes=11))
    assert len(client.jobs(entrypoint="tick")) == 1


@pytest.mark.parametrize(
    ("cron", "field"),
    [
        ("0 0 32 * *", "day-of-month"),
        ("60 * * * *", "minute"),
        ("* 24 * * *", "hour"),
        ("* * * 13 *", "month"),
        ("* * * * mon-funday", "day-of-week"),
        ("*/0 * * * *", "minute"),
    ],
)
def test_schedule_bad_cron_raises_invalid_cron_naming_the_field(
    client: Client, cron: str, field: str
) -> None:
    with pytest.raises(pgq.InvalidCron, match=f"invalid cron expression: {field} field") as info:
        client.schedule("bad", cron, "report")
    assert isinstance(info.value, pgq.InvalidArgument)  # InvalidCron is an InvalidArgument
    assert "hint:" in str(info.value)
    assert client.schedules() == []


@pytest.mark.parametrize(
    ("cron", "message"), [("* * *", "has 3 fields, expected 5"), ("@often", "unknown macro")]
)
def test_schedule_bad_cron_shape(client: Client, cron: str, message: str) -> None:
    with pytest.raises(pgq.InvalidCron, match=message):
        client.schedule("bad", cron, "report")


# --- statistics and retention --------------------------------------------------------------


def finish(conn: psycopg.Connection, entrypoint: str, n: int) -> None:
    """Enqueue, claim and complete n jobs of entrypoint."""
    conn.execute(
        "SELECT pgq.enqueue_batch(entrypoint => %s, payloads => array_fill('{}'::jsonb, ARRAY[%s]))",
        (entrypoint, n),
    )
    worker_id = conn.execute(
        "SELECT pgq.register_worker(name => 'stats', entrypoints => ARRAY[%s])", (entrypoint,)
    ).fetchone()[0]
    conn.execute(
        "SELECT pgq.complete(worker_id => %(w)s,"
        " job_ids => ARRAY(SELECT id FROM pgq.claim(worker_id => %(w)s, entrypoints => ARRAY[%(e)s],"
        " batch_size => %(n)s)))",
        {"w": worker_id, "e": entrypoint, "n": n},
    )


def log_outcome(conn: psycopg.Connection, entrypoint: str, age: str, outcome: str = "succeeded") -> None:
    """An outcome that finished `age` ago (interval text), straight into the log."""
    conn.execute(
        "INSERT INTO pgq._outcomes (job_id, entrypoint, outcome, priority, attempt, deliveries,"
        " enqueued_at, started_at, finished_at)"
        " SELECT 0, %(e)s, %(o)s, 0, 0, 1, t - interval '3 seconds', t - interval '1 second', t"
        " FROM (SELECT now() - %(age)s::interval AS t) AS f",
        {"e": entrypoint, "o": outcome, "age": age},
    )


def test_stats_counts_rates_and_percentiles(client: Client, conn: psycopg.Connection) -> None:
    assert client.stats() == []
    finish(conn, "fast", 3)
    make_dead(client, conn, "fast")
    client.cancel(client.enqueue("fast"))
    log_outcome(conn, "fast", "10 minutes")  # outside the default 5 minutes
    [row] = client.stats()
    assert isinstance(row, StatsRow)
    assert (row.entrypoint, row.succeeded, row.failed, row.dead, row.canceled) == ("fast", 3, 1, 1, 1)
    assert row.per_second == Decimal("0.010")  # 3 jobs / 300 s
    for value in (row.wait_p50, row.wait_p95, row.wait_p99, row.run_p50, row.run_p95, row.run_p99):
        assert value is not None and timedelta(0) <= value < timedelta(minutes=1)
    [hour] = client.stats("1 hour")
    assert (hour.succeeded, round(hour.per_second, 6)) == (4, Decimal("0.001111"))  # 4 per 3600 s
    assert timedelta(seconds=1) < hour.wait_p99 <= timedelta(seconds=2)  # the logged job waited 2 s
    [same] = client.stats(timedelta(hours=1))
    assert same == hour


def test_stats_without_successes_has_no_percentiles(client: Client) -> None:
    client.cancel(client.enqueue("nothing-done"))
    [row] = client.stats()
    assert (row.succeeded, row.canceled, row.per_second) == (0, 1, 0)
    assert (row.wait_p50, row.run_p99) == (None, None)


def test_prune_applies_retention_per_entrypoint(client: Client, conn: psycopg.Connection) -> None:
    client.configure("short", retention="30 minutes")
    log_outcome(conn, "default", "8 days")  # past the default 7 days
    log_outcome(conn, "default", "1 hour")
    log_outcome(conn, "short", "1 hour")
    log_outcome(conn, "short", "1 minute")
    assert client.prune() == 2
    kept = conn.execute(
        "SELECT entrypoint, finished_at > now() - interval '2 hours' FROM pgq.outcomes"
    ).fetchall()
    assert sorted(kept) == [("default", True), ("short", True)]
    assert client.prune() == 0


# --- views ---------------------------------------------------------------------------------


def test_rows_are_frozen_dataclasses(client: Client, conn: psycopg.Connection) -> None:
    client.enqueue("v", {"a": 1})
    client.enqueue("v", {"a": 2})
    worker_id, _ = claim_one(conn, "v")
    [queue] = client.queues()
    [worker] = client.workers()
    jobs = client.jobs()
    assert isinstance(queue, QueueRow) and isinstance(worker, WorkerRow)
    assert all(isinstance(j, JobRow) for j in jobs)
    assert (queue.queued, queue.running, queue.dead) == (1, 1, 0)
    assert (worker.id, worker.name, worker.state, worker.jobs_held) == (
        worker_id,
        "test-worker",
        "alive",
        1,
    )
    assert worker.entrypoints == ["v"] and worker.heartbeat_age < timedelta(minutes=1)
    for row in (queue, worker, jobs[0]):
        assert dataclasses.is_dataclass(row)
        with pytest.raises(dataclasses.FrozenInstanceError):
            row.entrypoint = "other"  # type: ignore[misc]


def test_jobs_filters_and_limit(client: Client, conn: psycopg.Connection) -> None:
    client.enqueue_batch("a", [1, 2, 3])
    client.enqueue("b")
    claim_one(conn, "b")
    assert [j.payload for j in client.jobs(entrypoint="a")] == [1, 2, 3]
    assert len(client.jobs(limit=2)) == 2
    assert [j.entrypoint for j in client.jobs(status="running")] == ["b"]
    assert client.jobs(entrypoint="a", status="running") == []
    with pytest.raises(pgq.InvalidArgument, match="status"):
        client.jobs(status="succeeded")
    with pytest.raises(pgq.InvalidArgument, match="limit"):
        client.jobs(limit=0)


# --- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda c: c.enqueue(""), "entrypoint"),
        (lambda c: c.enqueue("x", headers=[1]), "headers"),
        (lambda c: c.enqueue("x", max_attempts=0), "max_attempts"),
        (lambda c: c.enqueue("x", dedupe_key=""), "dedupe_key"),
        (lambda c: c.enqueue_batch("", [1]), "entrypoint"),
        (lambda c: c.cancel([1, None]), "job_ids"),
        (lambda c: c.retry("12"), "job_ids"),
        (lambda c: c.job_status(None), "job_id"),
        (lambda c: c.pause(" "), "entrypoint"),
        (lambda c: c.configure("x", max_attempts=5000), "max_attempts"),
        (lambda c: c.configure("x", rate=-1), "rate"),
        (lambda c: c.schedule("", "* * * * *", "x"), "name"),
        (lambda c: c.schedule("n", "* * * * *", ""), "entrypoint"),
        (lambda c: c.unschedule(None), "name"),
        (lambda c: c.run_schedules(datetime.now()), "now"),
        (lambda c: c.run_schedules("2030-01-01"), "now"),
        (lambda c: c.stats("soon"), "since"),
        (lambda c: c.stats(timedelta(0)), "since"),
        (lambda c: c.stats("32 days"), "since"),
    ],
)
def test_invalid_arguments_raise_invalid_argument_naming_it(
    client: Client, call: object, argument: str
) -> None:
    with pytest.raises(pgq.InvalidArgument, match=f"invalid argument {argument}\\b"):
        call(client)  # type: ignore[operator]


def big_payload() -> dict[str, str]:
    # Random bytes do not compress: over 1 MiB as stored.
    return {"blob": base64.b64encode(os.urandom(1_200_000)).decode()}


def test_oversized_payload_raises_payload_too_large(client: Client) -> None:
    with pytest.raises(pgq.PayloadTooLarge, match="payload") as info:
        client.enqueue("big", big_payload())
    assert "hint:" in str(info.value)
    with pytest.raises(pgq.PayloadTooLarge, match=r"payloads\[2\]"):
        client.enqueue_batch("big", [1, big_payload()])
    assert client.jobs() == []


def test_other_database_errors_are_not_translated(client: Client) -> None:
    with pytest.raises(psycopg.errors.NumericValueOutOfRange):
        client.enqueue("x", priority=2**40)


# --- lifecycle -----------------------------------------------------------------------------


def test_pool_opens_lazily_and_a_bad_dsn_fails_fast() -> None:
    client = Client("postgresql://postgres@127.0.0.1:1/nowhere?connect_timeout=5")
    started = time.monotonic()
    with pytest.raises(psycopg.OperationalError):
        client.enqueue("x")
    assert time.monotonic() - started < 5
    client.close()


def test_closed_client_refuses_calls(dsn: str) -> None:
    with Client(dsn) as client:
        client.enqueue("x")
    with pytest.raises(pgq.PgqError, match="closed"):
        client.enqueue("x")
    client.close()  # idempotent


def test_dsn_from_environment(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGQ_DSN", dsn)
    with Client() as client:
        assert client.dsn == dsn
        job_id = client.enqueue("env")
        assert client.job_status(job_id) == "queued"


def test_database_without_pgq_raises_schema_error(fresh_db: str) -> None:
    with Client(fresh_db) as client:
        with pytest.raises(pgq.SchemaError, match="pgq install"):
            client.enqueue("x")
        with pytest.raises(pgq.SchemaError, match="pgq install"):
            client.queues()


def test_confirm_cancel_races_complete_and_the_give_back_one_settlement_wins(
    client: Client, dsn: str
) -> None:
    """A settlement of the same delivery that commits while pgq.confirm_cancel waits for the
    job's row (the holder's pgq.complete, a heartbeat giving the job back) wins: the waiting
    call returns NULL; and pgq.complete waiting behind a confirm_cancel completes nothing.
    Each race is forced: the other session holds its transaction open until the waiting
    call is seen waiting for a lock."""

    def waiting_for_lock(pid: int) -> None:
        with psycopg.connect(dsn, autocommit=True) as watch:
            for _ in range(600):
                if watch.execute(
                    "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s", (pid,)
                ).fetchone()[0]:
                    return
                time.sleep(0.05)
        raise AssertionError(f"session {pid} never waited for a lock")

    def call(conn: psycopg.Connection, query: str, args: dict[str, object], into: dict[str, object]) -> None:
        into["r"] = conn.execute(query, args).fetchone()[0]

    settle = {
        "complete": "SELECT count(*) FROM pgq.complete(%(w)s, ARRAY[%(j)s]::bigint[], NULL, ARRAY[1])",
        "give back": "SELECT count(*) FROM pgq.heartbeat(%(w)s, '{}'::bigint[])",
        "confirm_cancel": "SELECT pgq.confirm_cancel(%(w)s, %(j)s, 1)",
    }
    for first, second, outcome in (
        ("complete", "confirm_cancel", "succeeded"),
        ("give back", "confirm_cancel", "canceled"),
        ("confirm_cancel", "complete", "canceled"),
    ):
        entrypoint = "cc_race_" + first.replace(" ", "_")
        with psycopg.connect(dsn, autocommit=True) as a, psycopg.connect(dsn, autocommit=True) as b:
            client.enqueue(entrypoint, {})
            worker, job = claim_one(a, entrypoint)
            assert client.cancel([job]) == 1
            args = {"w": worker, "j": job}
            got: dict[str, object] = {}
            b.execute("BEGIN")
            b.execute(settle[first], args)
            waiter = threading.Thread(target=call, args=(a, settle[second], args, got))
            waiter.start()
            waiting_for_lock(a.info.backend_pid)
            b.execute("COMMIT")
            waiter.join(30)
            assert got["r"] in (None, 0), (first, second, got)
            # One outcome: the settlement that committed first (the other found nothing held).
            rows = a.execute("SELECT outcome FROM pgq._outcomes WHERE job_id = %s", (job,)).fetchall()
            assert rows == [(outcome,)], (first, second, rows)


def test_confirm_cancel_settles_a_requested_cancel_sync_and_async(client: Client, dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for entrypoint in ("cc_sync", "cc_async"):
            client.enqueue(entrypoint, {})
        sync_worker, sync_job = claim_one(conn, "cc_sync")
        async_worker, async_job = claim_one(conn, "cc_async")
    assert client.cancel([sync_job, async_job]) == 2
    assert client.confirm_cancel(sync_worker, sync_job, delivery=2) is None  # another delivery
    assert client.confirm_cancel(sync_worker, sync_job, delivery=1) == "canceled"
    assert client.confirm_cancel(sync_worker, sync_job) is None  # settled

    async def settle() -> str | None:
        async with pgq.AsyncClient(dsn, min_size=1, max_size=1) as aclient:
            return await aclient.confirm_cancel(async_worker, async_job, delivery=1)

    assert asyncio.run(settle()) == "canceled"
    assert [client.job_status(j) for j in (sync_job, async_job)] == ["canceled", "canceled"]


def test_enqueue_batch_takes_the_options_of_enqueue(client: Client) -> None:
    parent = client.enqueue("batch_opts_parent")
    ids = client.enqueue_batch(
        "batch_opts", [{"n": 1}, {"n": 2}], headers={"trace": "t"}, max_attempts=2, depends_on=[parent]
    )
    for job_id in ids:
        story = client.job(job_id)
        assert story is not None
        assert (story["status"], story["headers"], story["max_attempts"]) == ("waiting", {"trace": "t"}, 2)
        assert [d["id"] for d in story["depends_on"]] == [parent]
    plain = client.enqueue_batch("batch_opts", [None], headers={"a": 1}, max_attempts=5)
    story = client.job(plain[0])
    assert story is not None
    assert (story["status"], story["headers"], story["max_attempts"]) == ("queued", {"a": 1}, 5)


def test_connection_lends_a_pooled_connection_and_sweeps_reads_the_view(dsn: str) -> None:
    """The public ways in for code beside the client (pgq.testing, `pgq status`): a pooled
    connection lent for a block, on which conn= joins the caller's transaction; the sweeps
    view as rows. Both clients."""
    with Client(dsn, min_size=1, max_size=1) as client:
        with client.connection() as conn:
            assert conn.autocommit
            lent_pid = conn.info.backend_pid
            with conn.transaction() as tx:
                job_id = client.enqueue("lent", conn=conn)
                raise psycopg.Rollback(tx)
            assert client.job_status(job_id, conn=conn) is None  # gone with the transaction
        # Taken back: the pool's only connection serves the next call.
        assert client.jobs(entrypoint="lent") == []
        with client.connection() as again:
            assert again.info.backend_pid == lent_pid
        assert {s.sweep for s in client.sweeps()} == {"reap", "run_schedules", "prune"}

        async def main() -> set[str]:
            async with pgq.AsyncClient(dsn, min_size=1, max_size=1) as aclient:
                async with aclient.connection() as aconn, aconn.transaction():
                    await aclient.enqueue("lent_async", conn=aconn)
                return {s.sweep for s in await aclient.sweeps()}

        assert asyncio.run(main()) == {"reap", "run_schedules", "prune"}
        assert [j.entrypoint for j in client.jobs(entrypoint="lent_async")] == ["lent_async"]
