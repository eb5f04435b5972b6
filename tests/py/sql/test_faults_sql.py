"""Faults of the SQL core found by an audit: each test forces its interleaving with several
sessions, row locks, advisory locks and shifted timestamps, then checks the invariant
(fenced per delivery, nothing stuck, limits kept, no deadlock, maintenance never blocks
the hot path).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest

from pgq import WrongIsolation
from pgq.errors import translate
from support.workers import wait_until_waiting_on_lock

Session = Callable[[], psycopg.Connection]


@pytest.fixture
def session(dsn: str) -> Iterator[Session]:
    opened: list[psycopg.Connection] = []

    def open_session() -> psycopg.Connection:
        c = psycopg.connect(dsn, autocommit=True)
        opened.append(c)
        return c

    yield open_session
    for c in opened:
        c.close()


def one(conn: psycopg.Connection, query: str, params: tuple[Any, ...] = ()) -> Any:
    row = conn.execute(query, params).fetchone()
    return None if row is None else row[0]


def register(conn: psycopg.Connection, ep: str, name: str = "w") -> uuid.UUID:
    return one(conn, "SELECT pgq.register_worker(%s, ARRAY[%s])", (name, ep))


def claim(conn: psycopg.Connection, worker: uuid.UUID, ep: str, n: int = 1) -> list[tuple[int, int]]:
    return conn.execute("SELECT id, deliveries FROM pgq.claim(%s, ARRAY[%s], %s)", (worker, ep, n)).fetchall()


def job(conn: psycopg.Connection, job_id: int) -> dict[str, Any] | None:
    cur = conn.execute(
        "SELECT status, deliveries, attempt, worker_id, last_error FROM pgq._jobs WHERE id = %s", (job_id,)
    )
    row = cur.fetchone()
    return None if row is None else dict(zip([d.name for d in cur.description], row, strict=True))


def status(conn: psycopg.Connection, job_id: int) -> str | None:
    return one(conn, "SELECT pgq.job_status(%s)", (job_id,))


def requeue_now(conn: psycopg.Connection, job_id: int) -> None:
    """Make a job that was retried with a backoff due at once (the clock moved on)."""
    conn.execute("UPDATE pgq._jobs SET run_at = now() WHERE id = %s", (job_id,))


def kill_worker(conn: psycopg.Connection, worker: uuid.UUID) -> None:
    """The worker went silent long ago: the next sweep finds it past its lease."""
    conn.execute("UPDATE pgq._workers SET heartbeat_at = now() - interval '1 hour' WHERE id = %s", (worker,))


# --- per-delivery fencing -------------------------------------------------------------------


def test_late_settle_of_an_earlier_delivery_is_fenced(session: Session) -> None:
    """A job re-queued under a live worker (the reaper's timeout rule) and claimed again by
    the same worker: the first run's late complete or fail must not settle the second."""
    ep = "fence_delivery"
    w, admin = session(), session()
    one(admin, "SELECT pgq.configure(%s, timeout => '1 second', lease => '1 second')", (ep,))
    job_id = one(admin, "SELECT pgq.enqueue(%s)", (ep,))
    worker = register(w, ep)
    assert claim(w, worker, ep) == [(job_id, 1)]
    # The first run overran: the reaper fails it (the worker still heartbeats).
    admin.execute("UPDATE pgq._jobs SET started_at = now() - interval '1 minute' WHERE id = %s", (job_id,))
    one(w, "SELECT pgq.heartbeat(%s)", (worker,))
    one(admin, "SELECT pgq.reap()")
    assert job(admin, job_id)["status"] == "queued"
    requeue_now(admin, job_id)
    assert claim(w, worker, ep) == [(job_id, 2)]

    stale = w.execute(
        "SELECT * FROM pgq.complete(%s, ARRAY[%s]::bigint[], deliveries => ARRAY[1])", (worker, job_id)
    ).fetchall()
    assert stale == [], "delivery 1 no longer holds the job"
    assert one(w, "SELECT pgq.fail(%s, %s, 'late', delivery => 1)", (worker, job_id)) is None
    assert job(admin, job_id)["status"] == "running"
    assert job(admin, job_id)["attempt"] == 1

    done = w.execute(
        "SELECT * FROM pgq.complete(%s, ARRAY[%s]::bigint[], deliveries => ARRAY[2])", (worker, job_id)
    ).fetchall()
    assert done == [(job_id,)]
    assert status(admin, job_id) == "succeeded"


def test_a_batch_naming_two_deliveries_of_one_job_completes_the_current_one(session: Session) -> None:
    """A finished first run's completion was held back (an outage) until the job had been
    re-queued by its timeout and claimed again by the same worker, whose second run finished
    too: one batch names both deliveries, and the current one must complete."""
    ep = "fence_pairs"
    w, admin = session(), session()
    job_id = one(admin, "SELECT pgq.enqueue(%s)", (ep,))
    worker = register(w, ep)
    assert claim(w, worker, ep) == [(job_id, 1)]
    assert one(w, "SELECT pgq.fail(%s, %s, 'timeout', retry_in => '0', delivery => 1)", (worker, job_id))
    assert claim(w, worker, ep) == [(job_id, 2)]
    done = w.execute(
        "SELECT * FROM pgq.complete(%s, ARRAY[%s, %s]::bigint[], ARRAY['1', '2']::jsonb[], ARRAY[1, 2])",
        (worker, job_id, job_id),
    ).fetchall()
    assert done == [(job_id,)]
    assert (
        one(admin, "SELECT result FROM pgq.outcomes WHERE outcome = 'succeeded' AND job_id = %s", (job_id,))
        == 2
    )


def test_fail_of_the_current_delivery_settles(session: Session) -> None:
    ep = "fence_fail"
    w = session()
    job_id = one(w, "SELECT pgq.enqueue(%s)", (ep,))
    worker = register(w, ep)
    assert claim(w, worker, ep) == [(job_id, 1)]
    assert one(w, "SELECT pgq.fail(%s, %s, 'boom', delivery => 1)", (worker, job_id)) == "queued"


def test_deliveries_must_pair_with_job_ids(session: Session) -> None:
    w = session()
    worker = register(w, "pairs")
    with pytest.raises(psycopg.Error) as err:
        w.execute("SELECT pgq.complete(%s, ARRAY[1, 2]::bigint[], deliveries => ARRAY[1])", (worker,))
    assert err.value.sqlstate == "PQ001"
    assert "deliveries" in str(err.value)


# --- poison pills ---------------------------------------------------------------------------


def test_a_job_that_keeps_losing_its_worker_goes_dead(session: Session) -> None:
    ep = "poison"
    admin = session()
    one(admin, "SELECT pgq.configure(%s, max_deliveries => 2)", (ep,))
    job_id = one(admin, "SELECT pgq.enqueue(%s)", (ep,))
    for delivery in (1, 2):
        w = session()
        worker = register(w, ep, f"w{delivery}")
        assert claim(w, worker, ep) == [(job_id, delivery)]
        kill_worker(admin, worker)
        one(admin, "SELECT pgq.reap()")
    row = job(admin, job_id)
    assert row["status"] == "dead"
    assert "lost its worker 2 times" in row["last_error"]
    assert one(admin, "SELECT fatal FROM pgq._outcomes WHERE job_id = %s", (job_id,)) is True


def test_no_cap_with_max_deliveries_zero_and_retry_resets_the_count(session: Session) -> None:
    ep = "poison_free"
    admin = session()
    one(admin, "SELECT pgq.configure(%s, max_deliveries => 0)", (ep,))
    job_id = one(admin, "SELECT pgq.enqueue(%s)", (ep,))
    for delivery in range(1, 13):
        w = session()
        worker = register(w, ep, f"w{delivery}")
        assert claim(w, worker, ep) == [(job_id, delivery)]
        kill_worker(admin, worker)
        one(admin, "SELECT pgq.reap()")
        w.close()
    assert job(admin, job_id)["status"] == "queued"
    assert one(admin, "SELECT max_deliveries FROM pgq.settings(ARRAY[%s], protocol => 2)", (ep,)) == 0
    one(admin, "SELECT pgq.configure(%s, max_deliveries => 1)", (ep,))
    w = session()
    worker = register(w, ep, "last")
    assert claim(w, worker, ep) == [(job_id, 13)]
    kill_worker(admin, worker)
    one(admin, "SELECT pgq.reap()")
    assert job(admin, job_id)["status"] == "dead"
    assert one(admin, "SELECT pgq.retry(ARRAY[%s]::bigint[])", (job_id,)) == 1
    assert one(admin, "SELECT lost FROM pgq._jobs WHERE id = %s", (job_id,)) == 0


def test_default_cap_is_ten(session: Session) -> None:
    admin = session()
    assert one(admin, "SELECT max_deliveries FROM pgq.settings(ARRAY['anything'], protocol => 2)") == 10
    with pytest.raises(psycopg.Error) as err:
        admin.execute("SELECT pgq.configure('x', max_deliveries => -1)")
    assert err.value.sqlstate == "PQ001"
    assert "max_deliveries" in str(err.value)


# --- reconciliation -------------------------------------------------------------------------


def test_heartbeat_releases_jobs_the_worker_does_not_run(session: Session) -> None:
    """After a failover that lost completions (or a claim whose reply was lost) the database
    says the worker holds jobs it never heard of: one heartbeat with what it runs frees them."""
    ep = "reconcile"
    w, admin = session(), session()
    ids = [one(admin, "SELECT pgq.enqueue(%s)", (ep,)) for _ in range(3)]
    worker = register(w, ep)
    assert sorted(i for i, _ in claim(w, worker, ep, 3)) == ids
    one(admin, "SELECT pgq.cancel(ARRAY[%s]::bigint[])", (ids[2],))
    # The worker runs only the first.
    assert (
        w.execute(
            "SELECT * FROM pgq.heartbeat(%s, running => ARRAY[%s]::bigint[])", (worker, ids[0])
        ).fetchall()
        == []
    )
    assert job(admin, ids[0])["status"] == "running"
    assert job(admin, ids[1]) == {
        "status": "queued",
        "deliveries": 1,
        "attempt": 0,
        "worker_id": None,
        "last_error": None,
    }
    assert status(admin, ids[2]) == "canceled"
    # Without the argument, a heartbeat releases nothing (0.1 workers).
    assert claim(w, worker, ep) == [(ids[1], 2)]
    one(w, "SELECT pgq.heartbeat(%s)", (worker,))
    assert job(admin, ids[1])["status"] == "running"


# --- lock order and deadlocks ---------------------------------------------------------------


def test_cancel_of_a_job_and_its_dependent_does_not_deadlock_with_its_completion(
    session: Session, dsn: str
) -> None:
    ep = "deadlock"
    w, canceller, admin = session(), session(), session()
    parent = one(admin, "SELECT pgq.enqueue(%s)", (ep,))
    child = one(admin, "SELECT pgq.enqueue(%s, depends_on => ARRAY[%s]::bigint[])", (ep, parent))
    worker = register(w, ep)
    assert claim(w, worker, ep) == [(parent, 1)]
    # Pause pgq.cancel right after it deleted the waiting child, holding its row lock.
    admin.execute(
        """
        CREATE FUNCTION public.pause_here() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF current_setting('test.pause', TRUE) = 'on' THEN
                PERFORM pg_advisory_xact_lock(4242);
            END IF;
            RETURN OLD;
        END $$;
        CREATE TRIGGER pause_here AFTER DELETE ON pgq._jobs FOR EACH ROW EXECUTE FUNCTION public.pause_here();
        """
    )
    try:
        holder = session()
        holder.execute("SELECT pg_advisory_lock(4242)")
        canceller.execute("SET test.pause = 'on'")
        with ThreadPoolExecutor(2) as pool:
            try:
                cancel = pool.submit(
                    one, canceller, "SELECT pgq.cancel(ARRAY[%s, %s]::bigint[])", (parent, child)
                )
                assert wait_until_waiting_on_lock(admin, canceller.info.backend_pid)
                done = pool.submit(
                    lambda: w.execute(
                        "SELECT * FROM pgq.complete(%s, ARRAY[%s]::bigint[])", (worker, parent)
                    ).fetchall()
                )
                assert wait_until_waiting_on_lock(admin, w.info.backend_pid)
            finally:
                holder.execute("SELECT pg_advisory_unlock_all()")
            cancel.result(timeout=30)  # raised 40P01 (deadlock detected) before the fix
            done.result(timeout=30)
    finally:
        admin.execute("DROP TRIGGER pause_here ON pgq._jobs; DROP FUNCTION public.pause_here()")
    assert status(admin, child) == "canceled"
    assert status(admin, parent) in ("succeeded", "canceled")


def test_cancel_while_a_fail_is_in_flight_is_not_lost(session: Session) -> None:
    ep = "cancel_fail"
    w, admin = session(), session()
    job_id = one(admin, "SELECT pgq.enqueue(%s)", (ep,))
    worker = register(w, ep)
    claim(w, worker, ep)
    w.execute("BEGIN")
    assert one(w, "SELECT pgq.fail(%s, %s, 'boom', retry_in => '1 hour')", (worker, job_id)) == "queued"
    with ThreadPoolExecutor(1) as pool:
        cancel = pool.submit(one, admin, "SELECT pgq.cancel(ARRAY[%s]::bigint[])", (job_id,))
        checker = psycopg.connect(admin.info.dsn, autocommit=True)
        assert wait_until_waiting_on_lock(checker, admin.info.backend_pid)
        w.execute("COMMIT")
        assert cancel.result(timeout=30) == 1
        checker.close()
    assert status(w, job_id) == "canceled"


def test_the_sweep_skips_jobs_a_late_complete_holds(session: Session) -> None:
    ep = "reap_skip"
    w, admin = session(), session()
    ids = [one(admin, "SELECT pgq.enqueue(%s)", (ep,)) for _ in range(2)]
    worker = register(w, ep)
    claim(w, worker, ep, 2)
    kill_worker(admin, worker)
    w.execute("BEGIN")
    w.execute("SELECT * FROM pgq.complete(%s, ARRAY[%s]::bigint[])", (worker, ids[0]))
    admin.execute("SET lock_timeout = '3s'")
    assert one(admin, "SELECT pgq.reap()") == 1, "the sweep released the job it could lock"
    w.execute("COMMIT")
    assert status(admin, ids[0]) == "succeeded"
    assert status(admin, ids[1]) == "queued"


# --- producers, isolation levels ------------------------------------------------------------


def test_an_open_producer_transaction_does_not_block_its_dependencies(session: Session) -> None:
    ep = "open_producer"
    producer, w, admin = session(), session(), session()
    parent = one(admin, "SELECT pgq.enqueue(%s)", (ep,))
    producer.execute("BEGIN")
    child = one(producer, "SELECT pgq.enqueue(%s, depends_on => ARRAY[%s]::bigint[])", (ep, parent))
    worker = register(w, ep)
    w.execute("SET lock_timeout = '2s'")
    assert claim(w, worker, ep) == [(parent, 1)], "the queued dependency is not hidden from claims"
    assert w.execute("SELECT * FROM pgq.complete(%s, ARRAY[%s]::bigint[])", (worker, parent)).fetchall() == [
        (parent,)
    ]
    producer.execute("COMMIT")
    # The child was committed after its dependency ended: the sweep releases it.
    one(admin, "SELECT pgq.reap()")
    assert status(admin, child) == "queued"


def test_a_dependency_that_ends_dead_before_the_producer_commits_cancels_the_child(session: Session) -> None:
    ep = "open_producer_dead"
    producer, w, admin = session(), session(), session()
    one(admin, "SELECT pgq.configure(%s, max_attempts => 1)", (ep,))
    parent = one(admin, "SELECT pgq.enqueue(%s)", (ep,))
    producer.execute("BEGIN")
    child = one(producer, "SELECT pgq.enqueue(%s, depends_on => ARRAY[%s]::bigint[])", (ep, parent))
    worker = register(w, ep)
    claim(w, worker, ep)
    assert one(w, "SELECT pgq.fail(%s, %s, 'boom')", (worker, parent)) == "dead"
    producer.execute("COMMIT")
    one(admin, "SELECT pgq.reap()")
    assert status(admin, child) == "canceled"


def test_a_limited_claim_refuses_repeatable_read(session: Session) -> None:
    ep = "rr_limit"
    a, b, admin = session(), session(), session()
    one(admin, "SELECT pgq.configure(%s, concurrency => 1)", (ep,))
    one(admin, "SELECT pgq.enqueue(%s)", (ep,))
    wa, wb = register(a, ep, "a"), register(b, ep, "b")
    a.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    one(a, "SELECT 1")  # the snapshot is taken
    # B claims a job that A's snapshot cannot see, so A neither counts it nor trips over it.
    urgent = one(admin, "SELECT pgq.enqueue(%s, priority => 10)", (ep,))
    assert claim(b, wb, ep) == [(urgent, 1)]
    with pytest.raises(psycopg.Error) as err:
        claim(a, wa, ep)
    assert err.value.sqlstate == "PQ007"
    assert isinstance(translate(err.value), WrongIsolation)
    a.execute("ROLLBACK")
    assert one(admin, "SELECT count(*) FROM pgq._jobs WHERE status = 'running'") == 1


# --- timings, retry, configure --------------------------------------------------------------


def test_a_transactional_completion_logs_the_real_run_time(session: Session) -> None:
    ep = "txn_time"
    w = session()
    job_id = one(w, "SELECT pgq.enqueue(%s)", (ep,))
    worker = register(w, ep)
    claim(w, worker, ep)
    with w.transaction():
        w.execute("SELECT pg_sleep(0.5)")
        w.execute("SELECT * FROM pgq.complete(%s, ARRAY[%s]::bigint[])", (worker, job_id))
    run = one(
        w,
        "SELECT extract(epoch FROM finished_at - started_at) FROM pgq._outcomes WHERE job_id = %s",
        (job_id,),
    )
    assert run >= 0.5


def test_retry_does_not_confuse_an_id_with_a_dedupe_key(session: Session) -> None:
    ep = "retry_key"
    admin = session()
    one(admin, "SELECT pgq.configure(%s, max_attempts => 1)", (ep,))
    first = one(admin, "SELECT pgq.enqueue(%s)", (ep,))
    second = one(admin, "SELECT pgq.enqueue(%s, dedupe_key => %s)", (ep, str(first)))
    worker = register(admin, ep)
    claim(admin, worker, ep, 2)
    for job_id in (first, second):
        assert one(admin, "SELECT pgq.fail(%s, %s, 'boom')", (worker, job_id)) == "dead"
    assert one(admin, "SELECT pgq.retry(ARRAY[%s, %s]::bigint[])", (first, second)) == 2


def test_shrinking_the_lease_spares_workers_pacing_for_the_old_one(session: Session) -> None:
    ep = "lease_shrink"
    w, admin = session(), session()
    worker = register(w, ep)
    one(w, "SELECT pgq.heartbeat(%s)", (worker,))
    one(admin, "SELECT pgq.configure(%s, lease => '1 second')", (ep,))
    # The worker beats every 30 s / 4: five seconds after its last beat it is not late.
    admin.execute(
        "UPDATE pgq._workers SET heartbeat_at = now() - interval '5 seconds' WHERE id = %s", (worker,)
    )
    one(admin, "SELECT pgq.reap()")
    assert one(admin, "SELECT state FROM pgq._workers WHERE id = %s", (worker,)) == "alive"
    # Its next beat learns the new lease; from then on the short lease applies.
    one(w, "SELECT pgq.heartbeat(%s)", (worker,))
    admin.execute(
        "UPDATE pgq._workers SET heartbeat_at = now() - interval '5 seconds' WHERE id = %s", (worker,)
    )
    one(admin, "SELECT pgq.reap()")
    assert one(admin, "SELECT state FROM pgq._workers WHERE id = %s", (worker,)) == "dead"


# --- maintenance never endangers the hot path -----------------------------------------------


def test_heartbeat_survives_a_failing_prune(session: Session) -> None:
    ep = "hb_prune"
    w, admin = session(), session()
    worker = register(w, ep)
    admin.execute("DELETE FROM pgq._maintenance")
    admin.execute(
        """
        CREATE FUNCTION public.break_prune() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'prune is broken'; END $$;
        CREATE TRIGGER break_prune BEFORE INSERT ON pgq._maintenance
            FOR EACH ROW EXECUTE FUNCTION public.break_prune();
        """
    )
    try:
        before = one(admin, "SELECT heartbeat_at FROM pgq._workers WHERE id = %s", (worker,))
        one(w, "SELECT pgq.heartbeat(%s)", (worker,))
        assert one(admin, "SELECT heartbeat_at FROM pgq._workers WHERE id = %s", (worker,)) > before
        # The sweep a worker runs beside its heartbeat reports the failure and still reaps.
        other = register(admin, ep, "other")
        kill_worker(admin, other)
        one(w, "SELECT pgq.sweep()")
        assert one(admin, "SELECT state FROM pgq._workers WHERE id = %s", (other,)) == "dead"
    finally:
        admin.execute("DROP TRIGGER break_prune ON pgq._maintenance; DROP FUNCTION public.break_prune()")


def test_prune_takes_no_exclusive_lock_while_it_deletes(session: Session) -> None:
    ep = "prune_lock"
    pruner, admin = session(), session()
    one(admin, "SELECT pgq.configure(%s, retention => '1 minute')", (ep,))
    admin.execute(
        "INSERT INTO pgq._outcomes (job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at,"
        " finished_at) SELECT g, %s, 'succeeded', 0, 0, 1, now() - interval '2 hours',"
        " now() - interval '1 hour'"
        " FROM generate_series(1, 10) AS g",
        (ep,),
    )
    # Tomorrow's partition is missing, so this prune has DDL to do as well.
    for name in [
        r[0]
        for r in admin.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'pgq._outcomes'::regclass AND c.relname ~ '^_outcomes_[0-9]{8}$'"
            " AND to_date(substr(c.relname, 11), 'YYYYMMDD') > current_date"
        )
    ]:
        admin.execute(f"DROP TABLE pgq.{name}")
    admin.execute(
        """
        CREATE FUNCTION public.pause_delete() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_advisory_xact_lock(4343); RETURN OLD; END $$;
        """
    )
    partitions = [
        r[0]
        for r in admin.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'pgq._outcomes'::regclass"
        )
    ]
    for name in partitions:
        admin.execute(
            f"CREATE TRIGGER pause_delete BEFORE DELETE ON pgq.{name}"
            " FOR EACH ROW EXECUTE FUNCTION public.pause_delete()"
        )
    holder = session()
    holder.execute("SELECT pg_advisory_lock(4343)")
    try:
        with ThreadPoolExecutor(1) as pool:
            pruned = pool.submit(one, pruner, "SELECT pgq.prune()")
            try:
                assert wait_until_waiting_on_lock(admin, pruner.info.backend_pid)
                exclusive = one(
                    admin,
                    "SELECT count(*) FROM pg_locks WHERE pid = %s AND mode = 'AccessExclusiveLock'"
                    " AND relation = 'pgq._outcomes'::regclass",
                    (pruner.info.backend_pid,),
                )
            finally:
                holder.execute("SELECT pg_advisory_unlock_all()")
            assert pruned.result(timeout=30) == 10
        assert exclusive == 0, "the outcome log was locked exclusively while prune deleted rows"
        assert (
            one(admin, "SELECT count(*) FROM pg_inherits WHERE inhparent = 'pgq._outcomes'::regclass")
            > len(partitions) - 1
        )
    finally:
        for name in partitions:
            admin.execute(f"DROP TRIGGER IF EXISTS pause_delete ON pgq.{name}")
        admin.execute("DROP FUNCTION public.pause_delete()")
