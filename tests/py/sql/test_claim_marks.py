"""The claim's low-water mark across sessions (pgq._raise_mark, pgq._lower_mark): a raise
never passes a job a producer has not committed yet, whichever comes first (including a
raise between a producer's row and its trigger); a raise in a long transaction is not
waited for, and the low the producer records outlives raises that cannot see it; a
REPEATABLE READ producer records a low; producers below the mark never wait for each
other; claims raise the mark, and verify it even when they take nothing; under a held
snapshot the claim reads a few index pages instead of every entry claimed since. Every
interleaving is forced with held transactions and advisory locks.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from support.marks import BELOW_MARK
from support.workers import wait_until_waiting_on_lock
from test_sql_concurrency import complete, register


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


def mark(c: psycopg.Connection, ep: str) -> tuple[int, int] | None:
    """The mark as (neg_priority, id), or None."""
    return c.execute(
        "SELECT m.neg_priority, m.id FROM pgq._marks AS m WHERE m.entrypoint = %s", (ep,)
    ).fetchone()


def lows(c: psycopg.Connection, ep: str) -> list[int]:
    """The job ids of the entrypoint's lows."""
    return [
        r[0]
        for r in c.execute("SELECT l.id FROM pgq._mark_lows AS l WHERE l.entrypoint = %s ORDER BY 1", (ep,))
    ]


def stranded(c: psycopg.Connection) -> int:
    """Queued jobs that sort before their mark and its lows: the invariant says none."""
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


def test_a_raise_between_a_producers_row_and_its_trigger_is_seen_by_the_trigger(
    dsn: str, conn: psycopg.Connection
) -> None:
    """The interleaving the protocol exists for (docs/held-snapshot.md): the job's row is
    written, a raise runs before the producer's trigger and cannot see the row, then the
    trigger runs. The producer's statement is held between the two by an advisory lock."""
    first = backdated(conn, "m2", 3)[0]
    conn.execute("SELECT pg_advisory_lock(7366999)")
    producer = (
        "WITH j AS (INSERT INTO pgq._jobs (entrypoint, priority) VALUES ('m2', 5) RETURNING id)"
        " SELECT j.id FROM j WHERE pg_advisory_lock(7366999) IS NOT NULL"
    )
    t, out = in_thread(dsn, producer, ())
    try:
        assert wait_until_waiting_on_lock(conn, out["pid"]), (
            "the producer did not stop between row and trigger"
        )
        assert raise_mark(conn, "m2"), "no producer held the mark lock yet: the raise runs"
        assert mark(conn, "m2") == (0, first), "the raise could not see the new row"
    finally:
        conn.execute("SELECT pg_advisory_unlock(7366999)")
    t.join(10)
    urgent = out["result"]
    assert mark(conn, "m2") == (-5, urgent), "the trigger read the raise's mark and lowered it"
    assert stranded(conn) == 0
    worker = register(conn, "w", ["m2"])
    assert claim_ids(conn, worker, "m2", 2) == [urgent, first]


def test_a_producer_that_meets_a_raise_waits_for_it_or_records_a_low(
    dsn: str, conn: psycopg.Connection, other: psycopg.Connection
) -> None:
    first = backdated(conn, "m3", 3)[0]
    with other.transaction():
        assert raise_mark(other, "m3")
        assert mark(other, "m3") == (0, first)
        t, out = in_thread(dsn, "SELECT pgq.enqueue('m3', '{}', priority => 5)", ())
        wait_until_waiting_on_lock(conn, out["pid"], seconds=0.04)
    t.join(10)
    urgent = out["result"]
    # Within its 50 ms the producer waits and then lowers the raise's mark in place; on a
    # slow machine it may stop waiting first and record a low instead. Either way the job
    # comes first.
    assert mark(conn, "m3") == (-5, urgent) or lows(conn, "m3") == [urgent]
    assert stranded(conn) == 0
    worker = register(conn, "w", ["m3"])
    assert claim_ids(conn, worker, "m3", 2) == [urgent, first]


def test_a_raise_in_a_long_transaction_is_not_waited_for(
    dsn: str, conn: psycopg.Connection, other: psycopg.Connection
) -> None:
    """The producer stops waiting after 50 ms and records a low, which commits with its job;
    a raise that cannot see the low (the producer has not committed) leaves it alone."""
    first = backdated(conn, "m4", 3)[0]
    with psycopg.connect(dsn, autocommit=True) as producer:
        with other.transaction():
            assert raise_mark(other, "m4")
            producer.execute("BEGIN")
            urgent = enqueue(producer, "m4", priority=5)  # 50 ms, then a low
        # The long raise has ended; a new one cannot see the producer's job or its low.
        assert raise_mark(conn, "m4")
        assert stranded(conn) == 0
        producer.execute("COMMIT")
    assert lows(conn, "m4") == [urgent], "the raise deleted a low it could not see"
    assert stranded(conn) == 0
    assert raise_mark(conn, "m4")
    assert lows(conn, "m4") == [], "a raise that sees a low takes it in"
    assert mark(conn, "m4") in ((-5, urgent), (-5, 0)), "on the urgent job, or a second ago in its priority"
    worker = register(conn, "w", ["m4"])
    assert claim_ids(conn, worker, "m4", 2) == [urgent, first]


def test_a_repeatable_read_producer_records_a_low(
    conn: psycopg.Connection, other: psycopg.Connection
) -> None:
    """Its snapshot may predate the last raise, so it cannot tell where the mark is: it
    records a low, which needs no lock (it keeps no raise out, waits for none)."""
    first = backdated(conn, "m5", 3)[0]
    other.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    other.execute("SELECT 1")  # its snapshot predates the raise below
    assert raise_mark(conn, "m5")
    assert mark(conn, "m5") == (0, first)
    urgent = enqueue(other, "m5", priority=5)  # it would read no mark, or an old one
    held = other.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
    ).fetchone()[0]
    assert held == 0, "a REPEATABLE READ producer took the mark lock"
    assert raise_mark(conn, "m5"), "a raise ran while the producer was open"
    other.execute("COMMIT")
    assert lows(conn, "m5") == [urgent]
    assert stranded(conn) == 0
    worker = register(conn, "w", ["m5"])
    assert claim_ids(conn, worker, "m5", 2) == [urgent, first]


def test_keyed_entrypoints_take_no_lows(conn: psycopg.Connection, other: psycopg.Connection) -> None:
    """Their claims do not use the mark, so nothing would ever take the lows in."""
    conn.execute("SELECT pgq.enqueue('m11', '{}', concurrency_key => 'k')")  # the entrypoint is keyed now
    other.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    other.execute("SELECT pgq.enqueue('m11', '{}', concurrency_key => 'k2')")
    other.execute("COMMIT")
    assert lows(conn, "m11") == []


def test_an_entrypoint_that_became_keyed_ignores_its_old_mark(
    conn: psycopg.Connection, other: psycopg.Connection
) -> None:
    """Found by the model test: a mark raised before the entrypoint's first keyed job stays,
    and a REPEATABLE READ producer then records no low. Keyed claims ignore the mark, so the
    job is claimed; the verification must not call it a defect."""
    first = backdated(conn, "m12", 1)[0]
    assert raise_mark(conn, "m12")
    conn.execute("SELECT pgq.enqueue('m12', '{}', concurrency_key => 'k')")  # keyed from now on
    other.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    urgent = enqueue(other, "m12", priority=5)
    other.execute("COMMIT")
    assert lows(conn, "m12") == []
    warnings: list[str] = []
    conn.add_notice_handler(lambda d: warnings.append(d.message_primary or ""))
    conn.execute("SELECT pgq._verify_mark('m12')")
    assert warnings == []
    worker = register(conn, "w", ["m12"])
    assert claim_ids(conn, worker, "m12", 2)[:2] == [urgent, first]


def test_producers_below_the_mark_do_not_wait_for_each_other(
    conn: psycopg.Connection, other: psycopg.Connection
) -> None:
    first = backdated(conn, "m6", 3)[0]
    assert raise_mark(conn, "m6")
    with other.transaction():
        one = enqueue(other, "m6", priority=5)  # lowers the mark in place: its row is locked
        two = enqueue(conn, "m6", priority=6)  # must not wait for `other`: a low instead
        assert lows(conn, "m6") == [two]
    assert stranded(conn) == 0
    worker = register(conn, "w", ["m6"])
    assert claim_ids(conn, worker, "m6", 3) == [two, one, first]


def test_claims_raise_the_mark_and_skip_what_they_claimed(conn: psycopg.Connection) -> None:
    ids = backdated(conn, "m7", 300)
    worker = register(conn, "w", ["m7"])
    assert claim_ids(conn, worker, "m7", 100) == ids[:100]
    assert mark(conn, "m7") == (0, ids[100]), "the claim raised the mark onto the next queued job"
    # Raised within the last 0.2 s (here: a raise dated ahead): the next claim leaves the
    # mark alone, and still claims in order from it.
    conn.execute("UPDATE pgq._marks SET raised_at = now() + interval '1 hour' WHERE entrypoint = 'm7'")
    assert claim_ids(conn, worker, "m7", 100) == ids[100:200]
    assert mark(conn, "m7") == (0, ids[100])


def test_under_a_held_snapshot_the_claim_reads_from_the_mark(dsn: str, conn: psycopg.Connection) -> None:
    """What vacuum cannot remove while a snapshot is held is skipped, not walked: counted in
    index pages read by one claim, with the mark and without it."""
    ids = backdated(conn, "m8", 20_000)
    worker = register(conn, "w", ["m8"])
    with psycopg.connect(dsn) as held:
        held.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        held.execute("SELECT count(*) FROM pgq._jobs")
        for start in range(0, 15_000, 1000):
            assert claim_ids(conn, worker, "m8", 1000) == ids[start : start + 1000]
            assert complete(conn, worker, ids[start : start + 1000])
        assert raise_mark(conn, "m8")
        # No raise at the end of the measured claims (it would read pages of its own).
        conn.execute("UPDATE pgq._marks SET raised_at = now() + interval '1 hour', verified_at = now()")

        def pages_read_by_a_claim() -> int:
            # The counter accumulates until the session reports it: a difference in one transaction.
            read = "SELECT pg_stat_get_xact_blocks_hit('pgq._jobs_default_claim_idx'::regclass)"
            with conn.transaction():
                before = conn.execute(read).fetchone()[0]
                claimed = claim_ids(conn, worker, "m8", 10)
                pages = conn.execute(read).fetchone()[0] - before
            complete(conn, worker, claimed)
            return pages

        with_mark = pages_read_by_a_claim()
        conn.execute("DELETE FROM pgq._marks")
        without = pages_read_by_a_claim()
    assert with_mark < 10, with_mark
    assert without > 10 * with_mark, (with_mark, without)


def planted_below_the_mark(conn: psycopg.Connection, ep: str) -> int:
    """A queued job below a mark last verified a minute ago, as a defect would leave it:
    enqueued with the trigger off."""
    conn.execute("ALTER TABLE pgq._jobs DISABLE TRIGGER _jobs_marks_insert_trg")
    try:
        conn.execute(
            "INSERT INTO pgq._marks VALUES (%s, 0, 'infinity', 0, now(), now() - interval '1 minute')", (ep,)
        )
        job = enqueue(conn, ep)
    finally:
        conn.execute("ALTER TABLE pgq._jobs ENABLE TRIGGER _jobs_marks_insert_trg")
    assert stranded(conn) == 1
    return job


def test_a_verification_repairs_a_job_below_the_mark_with_a_warning(conn: psycopg.Connection) -> None:
    planted = planted_below_the_mark(conn, "m9")
    warnings: list[str] = []
    conn.add_notice_handler(lambda d: warnings.append(d.message_primary or ""))
    conn.execute("SELECT pgq._verify_mark('m9')")
    assert stranded(conn) == 0
    assert lows(conn, "m9") == [planted]
    assert any(f"queued job {planted} of m9 was below the claim mark" in w for w in warnings), warnings


def test_claims_that_take_nothing_still_verify_the_mark(conn: psycopg.Connection) -> None:
    """A job below the mark is passed over by every claim, so claims that take nothing must
    verify the mark too (every 30 s), or the only due job would wait forever."""
    planted = planted_below_the_mark(conn, "m10")
    worker = register(conn, "w", ["m10"])
    assert claim_ids(conn, worker, "m10", 1) == [], "the claim walked below the mark"
    assert claim_ids(conn, worker, "m10", 1) == [planted], "the empty claim's verification lowered the mark"
