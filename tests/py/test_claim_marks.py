"""The claim's low-water mark across sessions (pgq._raise_mark, pgq._lower_mark): a raise
never passes a job a producer has not committed yet, whichever comes first; a raise in a
long transaction is not waited for; a REPEATABLE READ producer voids the marks; producers
below the mark never wait for each other; claims raise the mark; under a held snapshot the
claim reads a few index pages instead of every entry claimed since. Every interleaving is
forced with held transactions and pg_stat_activity's lock waits.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from marks import BELOW_MARK
from test_sql_concurrency import complete, register
from workers import wait_until_waiting_on_lock


@pytest.fixture
def other(dsn: str) -> Iterator[psycopg.Connection]:
    """A second session, for the transaction held across the other's steps."""
    with psycopg.connect(dsn, autocommit=True) as c:
        yield c


def enqueue(c: psycopg.Connection, ep: str, priority: int = 0) -> int:
    return c.execute("SELECT pgq.enqueue(%s, '{}', priority => %s)", (ep, priority)).fetchone()[0]


def backdated(c: psycopg.Connection, ep: str, n: int) -> list[int]:
    """n queued jobs enqueued an hour ago (so that a raise puts the mark on the first one
    rather than a second ago)."""
    ids = [
        r[0]
        for r in c.execute("SELECT * FROM pgq.enqueue_batch(%s, array_fill('{}'::jsonb, ARRAY[%s]))", (ep, n))
    ]
    c.execute("UPDATE pgq._jobs SET run_at = run_at - interval '1 hour' WHERE id = ANY (%s)", (ids,))
    return ids


def raise_mark(c: psycopg.Connection, ep: str) -> bool:
    return c.execute("SELECT pgq._raise_mark(%s)", (ep,)).fetchone()[0]


def epoch(c: psycopg.Connection) -> int:
    return c.execute("SELECT pgq._mark_epoch()").fetchone()[0]


def mark(c: psycopg.Connection, ep: str) -> tuple[int, int] | None:
    """The mark in force as (neg_priority, id), or None (absent or voided)."""
    return c.execute(
        "SELECT m.neg_priority, m.id FROM pgq._marks AS m"
        " WHERE m.entrypoint = %s AND m.epoch = pgq._mark_epoch()",
        (ep,),
    ).fetchone()


def stranded(c: psycopg.Connection) -> int:
    """Queued jobs that sort before a mark in force: the invariant says none."""
    return len(c.execute(BELOW_MARK).fetchone()[0] or [])


def claim_ids(c: psycopg.Connection, worker: uuid.UUID, ep: str, n: int) -> list[int]:
    return [r[0] for r in c.execute("SELECT id FROM pgq.claim(%s, ARRAY[%s], %s)", (worker, ep, n))]


def in_thread(dsn: str, query: str, params: tuple) -> tuple[threading.Thread, dict]:
    """Run one autocommit statement in a thread; its result (or error) and pid land in the dict."""
    out: dict = {}
    ready = threading.Event()

    def run() -> None:
        with psycopg.connect(dsn, autocommit=True) as c:
            out["pid"] = c.info.backend_pid
            ready.set()
            try:
                out["result"] = c.execute(query, params).fetchone()[0]
            except psycopg.Error as exc:  # pragma: no cover - reported by the test
                out["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    assert ready.wait(10)
    return t, out


def test_a_producer_between_enqueue_and_commit_keeps_raises_out(
    conn: psycopg.Connection, other: psycopg.Connection
) -> None:
    backdated(conn, "m1", 3)
    assert raise_mark(conn, "m1")
    with other.transaction():
        urgent = enqueue(other, "m1", priority=5)  # below the mark, not committed
        assert not raise_mark(conn, "m1"), "a raise ran while a producer held an invisible job"
    worker = register(conn, "w", ["m1"])
    assert claim_ids(conn, worker, "m1", 1) == [urgent]
    assert stranded(conn) == 0


def test_a_producer_that_meets_a_raise_waits_for_it_and_sees_its_mark(
    dsn: str, conn: psycopg.Connection, other: psycopg.Connection
) -> None:
    first = backdated(conn, "m2", 3)[0]
    before = epoch(conn)
    with other.transaction():
        assert raise_mark(other, "m2")
        assert mark(other, "m2") == (0, first)
        t, out = in_thread(dsn, "SELECT pgq.enqueue('m2', '{}', priority => 5)", ())
        assert wait_until_waiting_on_lock(conn, out["pid"]), "the producer did not wait for the raise"
    t.join(10)
    urgent = out["result"]
    # Within its 50 ms the producer lowers the mark in place; a slow machine may take the
    # bypass and void it instead. Either way the job is found first.
    assert mark(conn, "m2") in ((-5, urgent), None)
    assert mark(conn, "m2") is None or epoch(conn) == before
    assert stranded(conn) == 0
    worker = register(conn, "w", ["m2"])
    assert claim_ids(conn, worker, "m2", 2) == [urgent, first]


def test_a_raise_in_a_long_transaction_is_not_waited_for(
    conn: psycopg.Connection, other: psycopg.Connection
) -> None:
    first = backdated(conn, "m3", 3)[0]
    before = epoch(conn)
    with other.transaction():
        assert raise_mark(other, "m3")
        # The raise's transaction stays open: the producer gives up waiting after 50 ms,
        # voids the marks and commits while the raise is still open.
        urgent = enqueue(conn, "m3", priority=5)
        assert epoch(conn) > before
    assert mark(conn, "m3") is None, "the raise's mark came into force over a job it could not see"
    worker = register(conn, "w", ["m3"])
    assert claim_ids(conn, worker, "m3", 2) == [urgent, first]
    assert stranded(conn) == 0


def test_a_producer_on_the_bypass_keeps_raises_out_until_it_commits(
    dsn: str, conn: psycopg.Connection
) -> None:
    first = backdated(conn, "m4", 3)[0]
    with psycopg.connect(dsn, autocommit=True) as raiser, psycopg.connect(dsn, autocommit=True) as producer:
        with raiser.transaction():
            assert raise_mark(raiser, "m4")
            producer.execute("BEGIN")
            urgent = enqueue(producer, "m4", priority=5)  # waits 50 ms, then the bypass
        # The raise has ended; the producer has not committed its job.
        assert not raise_mark(conn, "m4"), "a raise ran while a producer on the bypass held an invisible job"
        producer.execute("COMMIT")
    assert raise_mark(conn, "m4")
    assert mark(conn, "m4") in ((-5, urgent), (-5, 0)), "on the urgent job, or a second ago in its priority"
    assert stranded(conn) == 0
    worker = register(conn, "w", ["m4"])
    assert claim_ids(conn, worker, "m4", 2) == [urgent, first]


def test_a_repeatable_read_producer_voids_the_marks(
    conn: psycopg.Connection, other: psycopg.Connection
) -> None:
    first = backdated(conn, "m5", 3)[0]
    before = epoch(conn)
    other.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    other.execute("SELECT 1")  # its snapshot predates the raise below
    assert raise_mark(conn, "m5")
    assert mark(conn, "m5") == (0, first)
    urgent = enqueue(other, "m5", priority=5)  # it would read no mark, or an old one
    assert epoch(conn) > before, "a REPEATABLE READ producer must void the marks"
    other.execute("COMMIT")
    assert stranded(conn) == 0
    worker = register(conn, "w", ["m5"])
    assert claim_ids(conn, worker, "m5", 2) == [urgent, first]


def test_producers_below_the_mark_do_not_wait_for_each_other(
    conn: psycopg.Connection, other: psycopg.Connection
) -> None:
    first = backdated(conn, "m6", 3)[0]
    assert raise_mark(conn, "m6")
    before = epoch(conn)
    with other.transaction():
        one = enqueue(other, "m6", priority=5)  # lowers the mark in place: its row is locked
        two = enqueue(conn, "m6", priority=6)  # must not wait for `other`: voids instead
        assert epoch(conn) > before
    assert stranded(conn) == 0
    worker = register(conn, "w", ["m6"])
    assert claim_ids(conn, worker, "m6", 3) == [two, one, first]


def test_claims_raise_the_mark_and_skip_what_they_claimed(conn: psycopg.Connection) -> None:
    ids = backdated(conn, "m7", 300)
    worker = register(conn, "w", ["m7"])
    assert claim_ids(conn, worker, "m7", 100) == ids[:100]
    assert mark(conn, "m7") == (0, ids[100]), "the claim raised the mark onto the next queued job"
    # Within 0.2 s the next claim leaves the mark alone; it still claims in order.
    assert claim_ids(conn, worker, "m7", 100) == ids[100:200]
    assert mark(conn, "m7") == (0, ids[100])


def test_under_a_held_snapshot_the_claim_reads_from_the_mark(dsn: str, conn: psycopg.Connection) -> None:
    """What vacuum cannot remove while a snapshot is held is skipped, not walked: counted in
    index pages read by one claim, with the mark in force and with it voided."""
    ids = backdated(conn, "m8", 20_000)
    worker = register(conn, "w", ["m8"])
    with psycopg.connect(dsn) as held:
        held.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        held.execute("SELECT count(*) FROM pgq._jobs")
        for start in range(0, 15_000, 1000):
            assert claim_ids(conn, worker, "m8", 1000) == ids[start : start + 1000]
            assert complete(conn, worker, ids[start : start + 1000])
        assert raise_mark(conn, "m8")

        def pages_read_by_a_claim() -> int:
            # The counter accumulates until the session reports it: a difference in one transaction.
            read = "SELECT pg_stat_get_xact_blocks_hit('pgq._jobs_claim_idx'::regclass)"
            with conn.transaction():
                before = conn.execute(read).fetchone()[0]
                claimed = claim_ids(conn, worker, "m8", 10)
                pages = conn.execute(read).fetchone()[0] - before
            complete(conn, worker, claimed)
            return pages

        with_mark = pages_read_by_a_claim()
        conn.execute("SELECT nextval('pgq._mark_voids')")
        voided = pages_read_by_a_claim()
    assert with_mark < 10, with_mark
    assert voided > 10 * with_mark, (with_mark, voided)


def test_a_verifying_raise_repairs_a_mark_above_a_queued_job_with_a_warning(conn: psycopg.Connection) -> None:
    conn.execute("ALTER TABLE pgq._jobs DISABLE TRIGGER _jobs_marks_insert_trg")
    try:
        conn.execute(
            "INSERT INTO pgq._marks"
            " VALUES ('m9', 0, 'infinity', 0, pgq._mark_epoch(), now(), now() - interval '1 minute')"
        )
        planted = enqueue(conn, "m9")
    finally:
        conn.execute("ALTER TABLE pgq._jobs ENABLE TRIGGER _jobs_marks_insert_trg")
    warnings: list[str] = []
    conn.add_notice_handler(lambda d: warnings.append(d.message_primary or ""))
    assert stranded(conn) == 1
    assert raise_mark(conn, "m9")
    assert stranded(conn) == 0
    assert any(f"queued job {planted} of m9 was below the claim mark" in w for w in warnings), warnings
