"""pgq.isolate and pgq.unisolate: an entrypoint's partition of the job table of its own.

The jobs move with everything they carry (ids, deliveries, attempts, keys, dependencies,
batch membership, watchers), in any state, and a move is no delivery and no end: the
worker that holds a job settles it after the move, a stale delivery still cannot, nobody
waiting for a job hears that it finished, a batch does not count a member as ended, and
dedupe keys keep their one live job. Every call that takes job ids, and the claim of a
worker whose entrypoints are in different partitions, acts on exactly its jobs.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from conftest import admin_execute, create_database, db_dsn, drop_database
from pgq import migrate
from support.workers import wait_until_waiting_on_lock


@pytest.fixture
def db(template_db: str) -> Iterator[str]:
    """A database of the test's own: partitions outlive TRUNCATE."""
    name = f"pgq_isolate_{uuid.uuid4().hex[:12]}"
    yield create_database(name, template=template_db)
    drop_database(name)


def scalar(conn: psycopg.Connection, query: str, params: tuple | dict | None = None):
    row = conn.execute(query, params).fetchone()
    return row[0] if row else None


def partition_of(conn: psycopg.Connection, job_id: int) -> str:
    return scalar(conn, "SELECT tableoid::regclass::text FROM pgq._jobs WHERE id = %s", (job_id,))


def jobs(conn: psycopg.Connection, entrypoint: str) -> list[tuple]:
    """Every column of the entrypoint's jobs, by id."""
    return conn.execute("SELECT * FROM pgq._jobs WHERE entrypoint = %s ORDER BY id", (entrypoint,)).fetchall()


def test_jobs_move_whole_in_every_state_and_back(db: str) -> None:
    with psycopg.connect(db, autocommit=True) as c:
        c.execute("SELECT pgq.enqueue_batch('iso', array_fill('{}'::jsonb, ARRAY[6]))")
        c.execute("SELECT pgq.enqueue_batch('other', array_fill('{}'::jsonb, ARRAY[3]))")
        worker = scalar(c, "SELECT pgq.register_worker('w', ARRAY['iso'])")
        held = [r[0] for r in c.execute("SELECT id FROM pgq.claim_v3(%s, ARRAY['iso'], 2)", (worker,))]
        failed = scalar(c, "SELECT id FROM pgq.claim_v3(%s, ARRAY['iso'], 1)", (worker,))
        c.execute("SELECT pgq.configure('iso', max_attempts => 1)")
        c.execute("SELECT pgq.fail(%s, %s, 'boom')", (worker, failed))  # dead
        waiting = scalar(c, "SELECT pgq.enqueue('iso', depends_on => %s)", ([held[0]],))
        keyed = scalar(c, "SELECT pgq.enqueue('iso', concurrency_key => 'k', dedupe_key => 'd')")
        before = jobs(c, "iso")
        others = jobs(c, "other")
        assert {r[2] for r in before} == {"queued", "running", "dead", "waiting"}

        assert scalar(c, "SELECT pgq.isolate('iso')") == len(before)
        assert jobs(c, "iso") == before and jobs(c, "other") == others
        own = partition_of(c, held[0])
        assert own != "pgq._jobs_default" and partition_of(c, keyed) == own == partition_of(c, waiting)
        assert scalar(c, "SELECT count(*) FROM pgq._jobs_default WHERE entrypoint = 'iso'") == 0
        assert scalar(c, "SELECT obj_description(%s::regclass)", (own,)) == (
            "The jobs of entrypoint iso (pgq.isolate)."
        )
        assert scalar(c, "SELECT pgq.isolate('iso')") == 0  # already: nothing changes
        assert jobs(c, "iso") == before

        assert scalar(c, "SELECT pgq.unisolate('iso')") == len(before)
        assert jobs(c, "iso") == before and jobs(c, "other") == others
        assert partition_of(c, held[0]) == "pgq._jobs_default"
        assert scalar(c, "SELECT to_regclass(%s)", (own,)) is None
        assert scalar(c, "SELECT pgq.unisolate('iso')") == 0
        # Ids go on from the one sequence.
        assert scalar(c, "SELECT pgq.enqueue('iso')") > max(r[0] for r in before)


def test_a_held_job_is_settled_by_its_delivery_after_the_move_and_only_by_it(db: str) -> None:
    with psycopg.connect(db, autocommit=True) as c:
        c.execute("SELECT pgq.enqueue_batch('iso', array_fill('{}'::jsonb, ARRAY[3]))")
        worker = scalar(c, "SELECT pgq.register_worker('w', ARRAY['iso'])")
        claimed = c.execute(
            "SELECT id, deliveries FROM pgq.claim_v3(%s, ARRAY['iso'], 3)", (worker,)
        ).fetchall()
        c.execute("SELECT pgq.isolate('iso')")
        (done, delivery), (stale, stale_delivery), (failed, failed_delivery) = claimed
        assert c.execute(
            "SELECT * FROM pgq.complete(%s, %s, NULL, %s)",
            (worker, [done, stale], [delivery, stale_delivery + 1]),
        ).fetchall() == [(done,)]
        c.execute("SELECT pgq.fail(%s, %s, 'boom', delivery => %s)", (worker, failed, failed_delivery))
        assert scalar(c, "SELECT status FROM pgq._jobs WHERE id = %s", (stale,)) == "running"
        assert scalar(c, "SELECT status FROM pgq._jobs WHERE id = %s", (failed,)) == "queued"
        assert scalar(c, "SELECT pgq.job_status(%s)", (done,)) == "succeeded"


def test_a_move_is_no_end_for_watchers_batches_or_dedupe(db: str) -> None:
    with psycopg.connect(db, autocommit=True) as c, psycopg.connect(db, autocommit=True) as listener:
        with c.transaction():
            batch = scalar(c, "SELECT pgq.batch()")
            members = c.execute(
                "SELECT * FROM pgq.enqueue_batch('iso', array_fill('{}'::jsonb, ARRAY[2]), batch => %s)",
                (batch,),
            ).fetchall()
        watched = scalar(c, "SELECT pgq.enqueue('iso', dedupe_key => 'once')")
        c.execute("SELECT pgq.watch(%s)", (watched,))
        listener.execute("LISTEN pgq_finished")
        c.execute("SELECT pgq.isolate('iso')")
        c.execute("SELECT pgq.unisolate('iso')")
        c.execute("SELECT pgq.isolate('iso')")
        assert [n.payload for n in listener.notifies(timeout=0.5, stop_after=1)] == []
        assert c.execute(
            "SELECT total, succeeded, dead, canceled FROM pgq._batches WHERE id = %s", (batch,)
        ).fetchone() == (
            2,
            0,
            0,
            0,
        )
        assert (
            scalar(
                c,
                "SELECT count(*) FROM pgq._batch_members WHERE batch_id = %s AND ended_xact IS NOT NULL",
                (batch,),
            )
            == 0
        )
        # The dedupe key still names its one live job, in its new partition.
        assert scalar(c, "SELECT pgq.enqueue('iso', dedupe_key => 'once')") == watched
        # Its real end is told.
        c.execute("SELECT pgq.cancel(%s)", ([watched],))
        assert [n.payload for n in listener.notifies(timeout=5, stop_after=1)] == [str(watched)]
        assert len(members) == 2


def test_a_worker_of_entrypoints_in_two_partitions_takes_exactly_what_it_claims(db: str) -> None:
    """The claim updates the rows it locked by their ctid, which names a row within one
    partition only: a job of the other partition at the same ctid must stay queued."""
    with psycopg.connect(db, autocommit=True) as c:
        c.execute("SELECT pgq.isolate('iso')")
        # The first row of each partition: both at ctid (0,1).
        first = scalar(c, "SELECT pgq.enqueue('iso', priority => 1)")
        second = scalar(c, "SELECT pgq.enqueue('shared')")
        ctids = c.execute("SELECT ctid::text FROM pgq._jobs WHERE id IN (%s, %s)", (first, second)).fetchall()
        assert ctids == [("(0,1)",), ("(0,1)",)]
        worker = scalar(c, "SELECT pgq.register_worker('w', ARRAY['iso', 'shared'])")
        for _ in range(7):  # past the custom plans, to the cached generic one
            claimed = c.execute(
                "SELECT id FROM pgq.claim_v3(%s, ARRAY['iso', 'shared'], 1)", (worker,)
            ).fetchall()
            assert claimed == [(first,)]
            assert c.execute("SELECT id, status FROM pgq._jobs ORDER BY id").fetchall() == [
                (first, "running"),
                (second, "queued"),
            ]
            assert scalar(c, "SELECT pgq.release(%s, '{}')", (worker,)) == 1
        assert sorted(
            r[0] for r in c.execute("SELECT id FROM pgq.claim_v3(%s, ARRAY['iso', 'shared'], 5)", (worker,))
        ) == [
            first,
            second,
        ]
        assert c.execute(
            "SELECT * FROM pgq.complete(%s, %s) ORDER BY 1", (worker, [first, second])
        ).fetchall() == [
            (first,),
            (second,),
        ]
        assert scalar(c, "SELECT count(*) FROM pgq._jobs") == 0


def test_isolate_waits_for_an_open_claim_and_moves_what_it_took(db: str) -> None:
    """Forced: a worker's claim is left open in a transaction; pgq.isolate waits for it (the
    default partition's lock), then moves the claimed jobs, which the worker completes."""
    with psycopg.connect(db, autocommit=True) as c, psycopg.connect(db) as worker_conn:
        c.execute("SELECT pgq.enqueue_batch('iso', array_fill('{}'::jsonb, ARRAY[4]))")
        worker = scalar(c, "SELECT pgq.register_worker('w', ARRAY['iso'])")
        taken = [
            r[0] for r in worker_conn.execute("SELECT id FROM pgq.claim_v3(%s, ARRAY['iso'], 2)", (worker,))
        ]
        result: list[int] = []
        with psycopg.connect(db, autocommit=True) as admin:
            pid = scalar(admin, "SELECT pg_backend_pid()")
            thread = threading.Thread(
                target=lambda: result.append(scalar(admin, "SELECT pgq.isolate('iso')"))
            )
            thread.start()
            assert wait_until_waiting_on_lock(c, pid)
            assert result == []
            worker_conn.commit()
            thread.join(10)
        assert result == [4]
        assert c.execute("SELECT * FROM pgq.complete(%s, %s) ORDER BY 1", (worker, taken)).fetchall() == [
            (i,) for i in sorted(taken)
        ]
        assert scalar(c, "SELECT count(*) FROM pgq._jobs WHERE status = 'queued'") == 2


def test_only_pgq_admin_may_move_partitions(db: str) -> None:
    with psycopg.connect(db, autocommit=True) as c:
        for function in ("isolate", "unisolate"):
            grantees = {
                r[0]
                for r in c.execute(
                    "SELECT a.grantee::regrole::text FROM pg_proc AS p,"
                    " aclexplode(p.proacl) AS a WHERE p.oid = %s::regprocedure",
                    (f"pgq.{function}(text)",),
                )
            }
            assert grantees == {"pgq_owner", "pgq_admin"}, (function, grantees)


def test_calls_during_a_move_wait_for_it_and_find_their_jobs(db: str) -> None:
    """Forced: pgq.isolate is left uncommitted while a worker completes jobs it holds and a
    producer enqueues one of the moving entrypoint. Both wait for the move, then act on the
    jobs where the move put them (locking the default partition alone, the completion
    found nothing and the enqueue broke the default partition's constraint)."""
    with (
        psycopg.connect(db, autocommit=True) as c,
        psycopg.connect(db) as admin,
        psycopg.connect(db, autocommit=True) as worker_conn,
        psycopg.connect(db, autocommit=True) as producer,
    ):
        c.execute("SELECT pgq.enqueue_batch('iso', array_fill('{}'::jsonb, ARRAY[3]))")
        worker = scalar(c, "SELECT pgq.register_worker('w', ARRAY['iso'])")
        held = sorted(r[0] for r in c.execute("SELECT id FROM pgq.claim_v3(%s, ARRAY['iso'], 2)", (worker,)))
        assert scalar(admin, "SELECT pgq.isolate('iso')") == 3  # not committed yet
        done: list[list[int]] = []
        enqueued: list[int] = []
        threads = [
            threading.Thread(
                target=lambda: done.append(
                    sorted(
                        r[0]
                        for r in worker_conn.execute("SELECT * FROM pgq.complete(%s, %s)", (worker, held))
                    )
                )
            ),
            threading.Thread(target=lambda: enqueued.append(scalar(producer, "SELECT pgq.enqueue('iso')"))),
        ]
        for thread in threads:
            thread.start()
        for conn in (worker_conn, producer):
            assert wait_until_waiting_on_lock(c, conn.info.backend_pid)
        admin.commit()
        for thread in threads:
            thread.join(10)
        assert done == [held]
        assert partition_of(c, enqueued[0]) != "pgq._jobs_default"
        assert scalar(c, "SELECT count(*) FROM pgq._jobs WHERE entrypoint = 'iso' AND status = 'queued'") == 2


def test_a_move_gives_way_to_a_long_transaction_and_then_gives_up(db: str) -> None:
    """Forced: a transaction keeps a lock on the job table. pgq.isolate tries in turns of
    half a second, so the queue's statements get through between them, and raises 55P03
    after 12 seconds, changing nothing."""
    with (
        psycopg.connect(db, autocommit=True) as c,
        psycopg.connect(db) as long_reader,
        psycopg.connect(db, autocommit=True) as admin,
    ):
        c.execute("SELECT pgq.enqueue('iso')")
        long_reader.execute("SELECT count(*) FROM pgq._jobs")  # ACCESS SHARE until it ends
        errors: list[str] = []

        def move() -> None:
            try:
                admin.execute("SELECT pgq.isolate('iso')")
            except psycopg.Error as exc:
                errors.append(exc.sqlstate or "")

        thread = threading.Thread(target=move)
        started = time.monotonic()
        thread.start()
        slowest = 0.0
        while thread.is_alive() and time.monotonic() - started < 30:
            t0 = time.monotonic()
            c.execute("SELECT pgq.enqueue('other')")
            slowest = max(slowest, time.monotonic() - t0)
            time.sleep(0.05)
        thread.join(1)
        assert errors == ["55P03"]
        assert 11 < time.monotonic() - started < 20
        assert slowest < 1.5, slowest  # never held up for a whole try and more
        long_reader.rollback()
        assert (
            partition_of(c, scalar(c, "SELECT id FROM pgq._jobs WHERE entrypoint = 'iso'"))
            == "pgq._jobs_default"
        )


def test_the_setting_of_a_move_cannot_silence_a_real_end(db: str) -> None:
    """pgq.moving is a session setting anyone may set: only the value of the moving
    transaction itself (its id) silences the end-of-job triggers."""
    with psycopg.connect(db, autocommit=True) as c, psycopg.connect(db, autocommit=True) as listener:
        job = scalar(c, "SELECT pgq.enqueue('iso')")
        c.execute("SELECT pgq.watch(%s)", (job,))
        listener.execute("LISTEN pgq_finished")
        c.execute("SET pgq.moving = 'on'")
        c.execute("SELECT pgq.cancel(%s)", ([job],))
        assert [n.payload for n in listener.notifies(timeout=5, stop_after=1)] == [str(job)]


def rename_partition(conn: psycopg.Connection, entrypoint: str, to: str) -> None:
    """Rename the partition pgq.isolate made for `entrypoint` (its hashed name) to `to`."""
    conn.execute(
        scalar(
            conn,
            "SELECT format('ALTER TABLE pgq.%%I RENAME TO %%I', pgq._job_partition(%s), %s::text)",
            (entrypoint, to),
        )
    )


def test_a_partition_is_found_by_what_it_holds_not_by_its_name(db: str) -> None:
    """The partition's name is a 64-bit hash of the entrypoint's: two names may share it,
    and earlier builds named partitions otherwise. pgq.isolate and pgq.unisolate go by the
    entrypoint a partition holds: a partition named otherwise is found and given back; a
    table that holds another entrypoint under this one's name is neither taken for this
    entrypoint's partition nor detached by its unisolate."""
    with psycopg.connect(db, autocommit=True) as c:
        a, b = (scalar(c, "SELECT pgq.enqueue(%s)", (ep,)) for ep in ("a", "b"))
        assert scalar(c, "SELECT pgq.isolate('a')") == 1
        rename_partition(c, "a", "_jobs_old_name")
        assert partition_of(c, a) == "pgq._jobs_old_name"
        assert scalar(c, "SELECT pgq.isolate('a')") == 0  # it has one
        assert scalar(c, "SELECT pgq.unisolate('a')") == 1
        assert partition_of(c, a) == "pgq._jobs_default"
        assert scalar(c, "SELECT to_regclass('pgq._jobs_old_name')") is None

        # b's partition under the name a's would have: a collision of the two hashes.
        assert scalar(c, "SELECT pgq.isolate('b')") == 1
        a_name = scalar(c, "SELECT pgq._job_partition('a')")
        rename_partition(c, "b", a_name)
        assert scalar(c, "SELECT pgq.unisolate('a')") == 0
        assert partition_of(c, b) == f"pgq.{a_name}"
        with pytest.raises(psycopg.errors.DuplicateTable):
            c.execute("SELECT pgq.isolate('a')")
        assert partition_of(c, a) == "pgq._jobs_default"
        assert scalar(c, "SELECT pgq.isolate('b')") == 0
        assert scalar(c, "SELECT pgq.unisolate('b')") == 1
        assert partition_of(c, b) == "pgq._jobs_default"


def test_a_partition_is_found_whatever_quotes_or_backslashes_its_entrypoint_holds(db: str) -> None:
    """pgq._partition_of compares the partition's bound as PostgreSQL prints it: a quoted
    literal, its quotes doubled and backslashes as they are. A quote, a backslash or both
    in the entrypoint still find its partition: a second isolate moves nothing, unisolate
    moves the job back and drops the partition."""
    with psycopg.connect(db, autocommit=True) as c:
        for ep in ("a'b", "a\\b", "''\\'; --", "\\'"):
            job = scalar(c, "SELECT pgq.enqueue(%s)", (ep,))
            assert scalar(c, "SELECT pgq.isolate(%s)", (ep,)) == 1, ep
            name = scalar(c, "SELECT pgq._partition_of(%s)", (ep,))
            assert name is not None and partition_of(c, job) == f"pgq.{name}", ep
            assert scalar(c, "SELECT pgq.isolate(%s)", (ep,)) == 0, ep
            assert scalar(c, "SELECT pgq.unisolate(%s)", (ep,)) == 1, ep
            assert partition_of(c, job) == "pgq._jobs_default", ep
            assert scalar(c, "SELECT to_regclass(format('pgq.%%I', %s::text))", (name,)) is None, ep


def test_isolate_in_a_database_of_another_encoding() -> None:
    """The partition's name hashes the entrypoint's bytes in the database's own encoding:
    converted to UTF-8 first, a byte over 127 in a SQL_ASCII database (which keeps any
    bytes) made pgq.isolate fail."""
    name = f"pgq_isolate_sql_ascii_{uuid.uuid4().hex[:8]}"
    admin_execute(f"CREATE DATABASE {name} ENCODING 'SQL_ASCII' LOCALE 'C' TEMPLATE template0")
    try:
        dsn = db_dsn(name)
        migrate.install(dsn, cron=False)
        with psycopg.connect(dsn, autocommit=True) as c:
            ep = "convert_from('\\x61e9'::bytea, 'SQL_ASCII')"
            job = scalar(c, f"SELECT pgq.enqueue({ep})")
            assert scalar(c, f"SELECT pgq.isolate({ep})") == 1
            # (text comes back as bytes from a SQL_ASCII database)
            shared = "SELECT tableoid = 'pgq._jobs_default'::regclass FROM pgq._jobs WHERE id = %s"
            assert scalar(c, shared, (job,)) is False
            assert scalar(c, f"SELECT pgq.unisolate({ep})") == 1
            assert scalar(c, shared, (job,)) is True
    finally:
        drop_database(name)


def test_a_move_needs_read_committed(db: str) -> None:
    """A move looks for the partition again once it holds the job table's lock, and moves
    the jobs it then sees: an older snapshot (REPEATABLE READ) would miss a partition or
    jobs committed meanwhile. Refused, as the claim refuses it, and nothing changes."""
    with psycopg.connect(db) as c:
        job = scalar(c, "SELECT pgq.enqueue('a')")
        c.commit()
        for call in ("isolate", "unisolate"):
            c.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            with pytest.raises(psycopg.Error) as err:
                c.execute(f"SELECT pgq.{call}('a')")
            assert err.value.sqlstate == "PQ007", err.value
            assert "READ COMMITTED" in str(err.value)
            c.rollback()
        c.isolation_level = None
        assert partition_of(c, job) == "pgq._jobs_default"
