"""Durability: with synchronous_commit = on, an enqueue whose COMMIT returned survives
`pg_ctl stop -m immediate` (a crash of every PostgreSQL process), and so does a claim:
the claimed jobs are still held after the restart and are re-delivered once their lease
has run out, with deliveries = 2. This test restarts the cluster under test (see cluster.py).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter

import psycopg

from support.cluster import db_sh, wait_for_server
from support.workers import execute, scalar

N = 200
CLAIMED = 20
COMPLETED = 5
LEASE = 2.0


class RacingProducer(threading.Thread):
    """Enqueues in separate transactions until the server goes away under it."""

    def __init__(self, dsn: str) -> None:
        super().__init__(daemon=True)
        self.dsn = dsn
        self.committed: list[int] = []
        self.unknown = 0
        self.running = threading.Event()

    def run(self) -> None:
        deadline = time.monotonic() + 30
        with contextlib.suppress(psycopg.OperationalError), psycopg.connect(self.dsn) as conn:
            conn.execute("SET synchronous_commit = on")
            conn.commit()
            while time.monotonic() < deadline:
                job_id = conn.execute("SELECT pgq.enqueue('durable_race', '{}')").fetchone()[0]
                try:
                    conn.commit()
                except psycopg.OperationalError:
                    self.unknown += 1  # the crash came during COMMIT: either outcome is correct
                    raise
                self.committed.append(job_id)
                self.running.set()


def test_committed_enqueues_and_claims_survive_an_immediate_stop(dsn: str, crashable: None) -> None:
    execute(dsn, "SELECT pgq.configure('durable', lease => make_interval(secs => %s))", (LEASE,))

    # N enqueues, each in its own transaction; count one only once its COMMIT returned.
    ids: list[int] = []
    with psycopg.connect(dsn) as conn:
        conn.execute("SET synchronous_commit = on")
        for n in range(N):
            ids.append(
                conn.execute(
                    "SELECT pgq.enqueue('durable', jsonb_build_object('n', %s::int))", (n,)
                ).fetchone()[0]
            )
            conn.commit()
    # One more whose transaction is still open at the crash: it must not appear.
    open_tx = psycopg.connect(dsn)
    open_tx.execute("SELECT pgq.enqueue('durable', '{\"n\": -1}')")

    # Worker A claims some jobs and completes a few of them, then the server crashes.
    with psycopg.connect(dsn, autocommit=True) as conn:
        worker_a = conn.execute("SELECT pgq.register_worker('before-crash', ARRAY['durable'])").fetchone()[0]
        claimed = [
            r[0]
            for r in conn.execute("SELECT id FROM pgq.claim(%s, ARRAY['durable'], %s)", (worker_a, CLAIMED))
        ]
        completed = [
            r[0] for r in conn.execute("SELECT pgq.complete(%s, %s)", (worker_a, claimed[:COMPLETED]))
        ]
    assert len(claimed) == CLAIMED and sorted(completed) == sorted(claimed[:COMPLETED])
    held = set(claimed) - set(completed)

    racer = RacingProducer(dsn)
    racer.start()
    assert racer.running.wait(10), "the racing producer did not start"
    db_sh("crash")  # pg_ctl stop -m immediate, then start
    racer.join(timeout=30)
    with contextlib.suppress(psycopg.Error):
        open_tx.close()
    wait_for_server(dsn)

    # Every committed enqueue is there: live, or in the outcome log for the completed ones.
    live = {
        r[0]: r[1:]
        for r in execute(
            dsn, "SELECT id, status, deliveries, worker_id FROM pgq.jobs WHERE entrypoint = 'durable'"
        )
    }
    succeeded = [
        r[0]
        for r in execute(
            dsn, "SELECT job_id FROM pgq.outcomes WHERE entrypoint = 'durable' AND outcome = 'succeeded'"
        )
    ]
    assert sorted(succeeded) == sorted(completed), "completions committed before the crash are kept"
    assert set(live) == set(ids) - set(completed), "every committed enqueue survived, nothing else appeared"
    assert scalar(dsn, "SELECT count(*) FROM pgq.jobs WHERE payload->>'n' = '-1'") == 0, (
        "the open transaction rolled back"
    )
    assert {i: live[i] for i in held} == {i: ("running", 1, worker_a) for i in held}, "claims survived"
    assert all(live[i][:2] == ("queued", 0) for i in set(live) - held)
    race_live = {r[0] for r in execute(dsn, "SELECT id FROM pgq.jobs WHERE entrypoint = 'durable_race'")}
    assert racer.committed and set(racer.committed) <= race_live, (
        "enqueues racing the crash: committed means kept"
    )
    assert len(race_live) - len(racer.committed) <= racer.unknown

    # Worker B: the held jobs come back only after A's lease ran out, with deliveries = 2.
    deliveries: dict[int, int] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        worker_b = conn.execute("SELECT pgq.register_worker('after-crash', ARRAY['durable'])").fetchone()[0]
        deadline = time.monotonic() + 30
        while len(deliveries) < len(live) and time.monotonic() < deadline:
            conn.execute("SELECT pgq.heartbeat(%s)", (worker_b,))  # runs the sweep
            for job_id, n in conn.execute(
                "SELECT id, deliveries FROM pgq.claim(%s, ARRAY['durable'], 1000)", (worker_b,)
            ):
                assert job_id not in deliveries, f"job {job_id} delivered twice to the same worker"
                deliveries[job_id] = n
            time.sleep(0.1)
        early = conn.execute(
            "SELECT j.id, j.started_at - w.heartbeat_at FROM pgq.jobs AS j, pgq.workers AS w"
            " WHERE w.id = %s AND j.id = ANY(%s)"
            " AND j.started_at - w.heartbeat_at < make_interval(secs => %s)",
            (worker_a, list(held), LEASE),
        ).fetchall()
        done = [r[0] for r in conn.execute("SELECT pgq.complete(%s, %s)", (worker_b, list(deliveries)))]
    assert set(deliveries) == set(live), "every surviving job is delivered after the restart"
    assert {i: n for i, n in deliveries.items() if i in held} == {i: 2 for i in held}, (
        "re-delivery is visible"
    )
    assert set(n for i, n in deliveries.items() if i not in held) == {1}
    assert early == [], "a held job was re-delivered before its lease ran out"
    assert sorted(done) == sorted(deliveries)

    # Nothing lost, nothing twice: each enqueued job has exactly one terminal outcome.
    outcomes = Counter(
        r[0]
        for r in execute(
            dsn, "SELECT job_id FROM pgq.outcomes WHERE entrypoint = 'durable' AND outcome <> 'failed'"
        )
    )
    assert outcomes == Counter(ids)
    assert scalar(dsn, "SELECT count(*) FROM pgq.jobs WHERE entrypoint = 'durable'") == 0
