"""NOTIFY wake-ups: sent at commit, never for a rolled-back or not-yet-due job.

A dedicated autocommit session LISTENs on channel pgq, as a worker's listener does; the
producer is another session with an explicit transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest

# How long to wait for a notification that must not come. Delivery on a local server takes
# milliseconds; this is two orders of magnitude above that.
QUIET = 0.5
# How long to wait for one that must come.
PATIENCE = 10.0


@pytest.fixture
def listener(dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("LISTEN pgq")
        yield c


@pytest.fixture
def producer(dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(dsn, autocommit=True) as c:
        yield c


def received(listener: psycopg.Connection, seconds: float = QUIET) -> list[psycopg.Notify]:
    return list(listener.notifies(timeout=seconds))


def first_then_quiet(listener: psycopg.Connection) -> list[psycopg.Notify]:
    """Wait (long) for the first notification, then (briefly) for any that follow."""
    got = list(listener.notifies(timeout=PATIENCE, stop_after=1))
    return got + received(listener) if got else got


def test_enqueue_notifies_at_commit_not_before(
    listener: psycopg.Connection, producer: psycopg.Connection
) -> None:
    with producer.transaction():
        job = producer.execute("SELECT pgq.enqueue('wake_me', '{\"a\": 1}')").fetchone()[0]
        assert received(listener) == [], "notified before the enqueue committed"
    got = first_then_quiet(listener)
    assert [(n.channel, n.payload) for n in got] == [("pgq", "wake_me")]
    assert got[0].pid == producer.info.backend_pid
    assert producer.execute("SELECT pgq.job_status(%s)", (job,)).fetchone()[0] == "queued"


def test_rolled_back_enqueue_does_not_notify(
    listener: psycopg.Connection, producer: psycopg.Connection
) -> None:
    class Abort(Exception):
        pass

    with pytest.raises(Abort), producer.transaction():
        job = producer.execute("SELECT pgq.enqueue('never')").fetchone()[0]
        raise Abort
    assert received(listener, 2 * QUIET) == []
    assert producer.execute("SELECT pgq.job_status(%s)", (job,)).fetchone()[0] is None
    # The listener works: a committed enqueue right after is heard.
    producer.execute("SELECT pgq.enqueue('after_rollback')")
    assert [n.payload for n in first_then_quiet(listener)] == ["after_rollback"]


def test_enqueue_batch_of_1000_sends_one_notification(
    listener: psycopg.Connection, producer: psycopg.Connection
) -> None:
    with producer.transaction():
        ids = producer.execute(
            "SELECT * FROM pgq.enqueue_batch('bulk', array_fill('{}'::jsonb, ARRAY[1000]))"
        ).fetchall()
    assert len(ids) == 1000
    assert [(n.channel, n.payload) for n in first_then_quiet(listener)] == [("pgq", "bulk")]


def test_many_enqueues_in_one_transaction_send_one_per_entrypoint(
    listener: psycopg.Connection, producer: psycopg.Connection
) -> None:
    with producer.transaction():
        for i in range(50):
            producer.execute("SELECT pgq.enqueue(%s)", ("multi_a" if i % 2 else "multi_b",))
    got = first_then_quiet(listener)
    assert sorted(n.payload for n in got) == ["multi_a", "multi_b"]


def test_empty_enqueue_batch_sends_nothing(
    listener: psycopg.Connection, producer: psycopg.Connection
) -> None:
    rows = producer.execute("SELECT * FROM pgq.enqueue_batch('empty', '{}'::jsonb[])").fetchall()
    assert rows == []
    assert received(listener) == []


def test_future_job_sends_no_notification(listener: psycopg.Connection, producer: psycopg.Connection) -> None:
    with producer.transaction():
        producer.execute("SELECT pgq.enqueue('later', run_at => now() + interval '1 hour')")
        producer.execute(
            "SELECT pgq.enqueue_batch('later_batch', ARRAY['{}'::jsonb, '{}'::jsonb],"
            " run_at => now() + interval '1 hour')"
        )
    assert received(listener, 2 * QUIET) == []
    # A due job in the same kind of transaction is heard, so the silence above means something.
    with producer.transaction():
        producer.execute("SELECT pgq.enqueue('later', run_at => now() + interval '1 hour')")
        producer.execute("SELECT pgq.enqueue('now_please', run_at => now() - interval '1 minute')")
    assert [n.payload for n in first_then_quiet(listener)] == ["now_please"]


def test_deduplicated_enqueue_does_not_notify_again(
    listener: psycopg.Connection, producer: psycopg.Connection
) -> None:
    first = producer.execute("SELECT pgq.enqueue('dd_notify', dedupe_key => 'k')").fetchone()[0]
    assert [n.payload for n in first_then_quiet(listener)] == ["dd_notify"]
    again = producer.execute("SELECT pgq.enqueue('dd_notify', dedupe_key => 'k')").fetchone()[0]
    assert again == first
    assert received(listener) == []


def test_released_jobs_wake_workers(listener: psycopg.Connection, producer: psycopg.Connection) -> None:
    """Jobs that go back to queued (here: a worker unregisters) are announced too."""
    producer.execute("SELECT pgq.enqueue('released')")
    assert [n.payload for n in first_then_quiet(listener)] == ["released"]
    worker = producer.execute(
        "SELECT pgq.register_worker(%s, ARRAY['released'])", (f"w-{uuid.uuid4()}",)
    ).fetchone()[0]
    claimed = producer.execute("SELECT id FROM pgq.claim(%s, ARRAY['released'])", (worker,))
    assert len(claimed.fetchall()) == 1
    assert received(listener) == [], "a claim must not notify"
    assert producer.execute("SELECT pgq.unregister_worker(%s)", (worker,)).fetchone()[0] == 1
    assert [n.payload for n in first_then_quiet(listener)] == ["released"]
