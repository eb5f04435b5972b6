"""Races inside one call: another session commits between two statements of pgq.claim or
pgq._claim_keyed, holds a lock that pgq.reap needs, or cancels a job in a transaction that
began before the job's snooze.

Each race is forced, not hoped for: a copy of the real function gets a hook between the two
statements (hooks.py), in a database of the test's own, and the test commits its change
while the call waits there.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from conftest import create_database, drop_database
from support.hooks import HOOK, hook
from support.workers import wait_until_waiting_on_lock


@pytest.fixture
def db(template_db: str) -> Iterator[str]:
    name = f"pgq_claim_races_{os.getpid()}"
    yield create_database(name, template=template_db)
    drop_database(name)


def register(conn: psycopg.Connection, name: str, entrypoints: list[str]) -> uuid.UUID:
    return conn.execute("SELECT pgq.register_worker(%s, %s::text[])", (name, entrypoints)).fetchone()[0]


def claim(conn: psycopg.Connection, worker: uuid.UUID, entrypoints: list[str], n: int) -> list[int]:
    rows = conn.execute("SELECT id FROM pgq.claim(%s::uuid, %s::text[], %s)", (worker, entrypoints, n))
    return [r[0] for r in rows.fetchall()]


def running(conn: psycopg.Connection, entrypoint: str, key: str | None = None) -> int:
    return conn.execute(
        "SELECT count(*) FROM pgq._jobs WHERE entrypoint = %s AND status = 'running'"
        " AND (%s::text IS NULL OR concurrency_key = %s)",
        (entrypoint, key, key),
    ).fetchone()[0]


def claim_while(
    admin: psycopg.Connection, dsn: str, worker: uuid.UUID, eps: list[str], n: int, change
) -> list[int]:
    """Claim in a session of its own; while that claim waits at the hook, run change(admin)."""
    with psycopg.connect(dsn, autocommit=True) as claimer, ThreadPoolExecutor(max_workers=1) as pool:
        admin.execute("SELECT pg_advisory_lock(%s)", (HOOK,))
        try:
            claimed = pool.submit(claim, claimer, worker, eps, n)
            assert wait_until_waiting_on_lock(admin, claimer.info.backend_pid), (
                "the claim never reached the hook"
            )
            change(admin)
        finally:
            admin.execute("SELECT pg_advisory_unlock(%s)", (HOOK,))
        return claimed.result(timeout=30)


# --- limits decided in the claim's first step hold in its last ------------------------------

# The claim decides its limits under the settings rows' locks, then claims in later
# statements, each with a fresh snapshot. An entrypoint that it did not lock (paused, or
# without limits or keyed jobs when it looked) but that has them now took the whole batch,
# ignoring them (3 running jobs under a limit of 1).
CHANGES = {
    "resumed": (
        "SELECT pgq.configure('lim', concurrency => 1); SELECT pgq.pause('lim')",
        "SELECT pgq.resume('lim')",
    ),
    "limited": ("SELECT 1", "SELECT pgq.configure('lim', concurrency => 1)"),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
@pytest.mark.parametrize(
    "others",
    [[], ["other"], ["keyed"]],
    ids=["alone", "beside_a_limited_entrypoint", "beside_keyed_jobs"],  # the claim's 3 statements
)
def test_an_entrypoint_that_gained_a_limit_during_the_claim_gives_it_nothing(
    db: str, change: str, others: list[str]
) -> None:
    before, during = CHANGES[change]
    with psycopg.connect(db, autocommit=True) as admin:
        hook(admin, "pgq.claim_v3(uuid, text[], integer)", "-- Three statements")
        admin.execute(before)
        if others == ["other"]:
            admin.execute("SELECT pgq.configure('other', concurrency => 5)")
        if others == ["keyed"]:
            admin.execute("SELECT pgq.enqueue('keyed', '{}', concurrency_key => 'k')")
        admin.execute("SELECT count(*) FROM pgq.enqueue_batch('lim', array_fill('{}'::jsonb, ARRAY[3]))")
        worker = register(admin, "w", ["lim", *others])
        claim_while(admin, db, worker, ["lim", *others], 10, lambda c: c.execute(during))
        assert running(admin, "lim") == 0
        # The next claim sees the limit.
        claim(admin, worker, ["lim", *others], 10)
        assert running(admin, "lim") == 1


def test_the_first_keyed_jobs_during_a_claim_are_not_claimed_past_key_concurrency(db: str) -> None:
    """The producer's transaction began before the claim (its jobs are due to it) and
    commits the entrypoint's first keyed jobs while the claim waits between its steps."""
    with psycopg.connect(db, autocommit=True) as admin, psycopg.connect(db) as producer:
        hook(admin, "pgq.claim_v3(uuid, text[], integer)", "-- Three statements")
        admin.execute("SELECT pgq.configure('keys', key_concurrency => 1)")
        admin.execute("SELECT pgq.configure('other', concurrency => 5)")
        worker = register(admin, "w", ["keys", "other"])
        for _ in range(3):
            producer.execute("SELECT pgq.enqueue('keys', '{}', concurrency_key => 'tenant-a')")
        claim_while(admin, db, worker, ["keys", "other"], 10, lambda c: producer.commit())
        assert running(admin, "keys", "tenant-a") == 0
        claim(admin, worker, ["keys", "other"], 10)
        assert running(admin, "keys", "tenant-a") == 1


# --- a keyed claim locks only the jobs it chose, as it chose them -----------------------------


@pytest.mark.parametrize(
    ("key", "due"), [("b", True), ("b", False), ("a", False)], ids=["other_key", "other_key_later", "later"]
)
def test_a_keyed_job_replaced_between_its_choice_and_its_lock_is_left(db: str, key: str, due: bool) -> None:
    """pgq._claim_keyed chooses the jobs (room per key), then locks them. A dedupe_mode
    'replace' enqueue committed in between gave the chosen job another key (one already at
    its key_concurrency) or a later run_at; the lock took it anyway: two running jobs of
    key 'b' under a limit of 1, or a job claimed an hour early."""
    with psycopg.connect(db, autocommit=True) as admin:
        hook(admin, "pgq._claim_keyed(text, integer, integer, text)", "-- Lock in claim order")
        admin.execute("SELECT pgq.configure('kk', key_concurrency => 1)")
        worker = register(admin, "w", ["kk"])
        admin.execute("SELECT pgq.enqueue('kk', '{}', concurrency_key => 'b')")
        assert len(claim(admin, worker, ["kk"], 1)) == 1  # key b is at its limit
        job = admin.execute(
            "SELECT pgq.enqueue('kk', '{}', priority => 1, concurrency_key => 'a', dedupe_key => 'dj')"
        ).fetchone()[0]
        run_at = "now()" if due else "now() + interval '1 hour'"
        replace = (
            "SELECT pgq.enqueue('kk', '{\"v\": 2}', priority => 1, concurrency_key => %s,"
            f" dedupe_key => 'dj', dedupe_mode => 'replace', run_at => {run_at})"
        )
        assert claim_while(admin, db, worker, ["kk"], 1, lambda c: c.execute(replace, (key,))) == []
        assert running(admin, "kk", "b") == 1
        assert admin.execute("SELECT status FROM pgq._jobs WHERE id = %s", (job,)).fetchone()[0] == "queued"


# --- one stuck transaction does not stop the sweep ------------------------------------------


def test_a_claim_left_open_in_a_transaction_does_not_stop_the_reaping_of_other_workers(db: str) -> None:
    """A claim that took jobs holds its worker's row (FOR SHARE) until it commits. The sweep
    marked every silent worker dead in one UPDATE, which waited for that row, under the
    sweep's lock: while a client sat in its claim's transaction, no worker was reaped."""
    with (
        psycopg.connect(db, autocommit=True) as admin,
        psycopg.connect(db, autocommit=True) as stuck,
        psycopg.connect(db, autocommit=True) as sweeper,
    ):
        admin.execute("SELECT pgq.configure('ep', lease => '1 second')")
        admin.execute("SELECT count(*) FROM pgq.enqueue_batch('ep', array_fill('{}'::jsonb, ARRAY[2]))")
        gone = register(admin, "gone", ["ep"])
        (lost,) = claim(admin, gone, ["ep"], 1)
        open_ = register(admin, "open", ["ep"])
        admin.execute("UPDATE pgq._workers SET heartbeat_at = now() - interval '1 minute'")
        with stuck.transaction():
            assert len(claim(stuck, open_, ["ep"], 1)) == 1  # its worker's row is held now
            sweeper.execute("SET statement_timeout = '10s'")
            assert sweeper.execute("SELECT pgq.reap()").fetchone()[0] == 1
            states = dict(admin.execute("SELECT name, state FROM pgq._workers").fetchall())
            assert states == {"gone": "dead", "open": "alive"}
            assert (
                admin.execute("SELECT status FROM pgq._jobs WHERE id = %s", (lost,)).fetchone()[0] == "queued"
            )
        # Once the claim commits, the next sweep reaps its worker too.
        assert sweeper.execute("SELECT pgq.reap()").fetchone()[0] == 1
        assert admin.execute("SELECT state FROM pgq._workers WHERE id = %s", (open_,)).fetchone()[0] == "dead"


# --- a finished job's status is its fate ------------------------------------------------------


def test_a_job_snoozed_before_a_cancel_that_began_earlier_reads_canceled(db: str) -> None:
    """The outcome log stamps a cancel with its transaction's start and a snooze with the
    clock. A cancel whose transaction began before a snooze of the job logged an earlier
    time than the snooze, and the lookups of a finished job's fate took the newest row that
    is not 'failed': the job read 'snoozed', which is no status at all."""
    with (
        psycopg.connect(db, autocommit=True) as admin,
        psycopg.connect(db, autocommit=True) as canceler,
    ):
        job = admin.execute("SELECT pgq.enqueue('ep', '{}')").fetchone()[0]
        worker = register(admin, "w", ["ep"])
        with canceler.transaction():
            canceler.execute("SELECT now()")  # the transaction's timestamp is taken
            assert claim(admin, worker, ["ep"], 1) == [job]
            admin.execute("SELECT pgq.snooze(%s, %s, '0 seconds')", (worker, job))
            canceler.execute("SELECT pgq.cancel(ARRAY[%s]::bigint[])", (job,))
        assert admin.execute("SELECT pgq.job_status(%s)", (job,)).fetchone()[0] == "canceled"
        assert admin.execute("SELECT pgq.job(%s)->>'status'", (job,)).fetchone()[0] == "canceled"
