"""Job dependencies (pgq.enqueue(depends_on => ...)): races between sessions, and a real worker.

A waiting job is queued once every job it depends on has succeeded, canceled (with the
reason in the outcome log) once one of them ends dead or canceled. The races: the last two
dependencies completing in two transactions at once, and an enqueue racing the completion of
its dependency. Neither may leave a job waiting for ever, nor release it early.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest

from support.plans import explain_nested, logged_plans, plan_nodes
from support.workers import WorkerProcess, ledger_lines, wait_until, wait_until_waiting_on_lock


def register(conn: psycopg.Connection, entrypoints: list[str]) -> uuid.UUID:
    return conn.execute(
        "SELECT pgq.register_worker(%s, %s::text[])", (f"dep-{uuid.uuid4().hex[:8]}", entrypoints)
    ).fetchone()[0]


def enqueue(
    conn: psycopg.Connection,
    entrypoint: str,
    depends_on: list[int] | None = None,
    payload: str | None = None,
    max_attempts: int | None = None,
) -> int:
    return conn.execute(
        "SELECT pgq.enqueue(%s::text, payload => %s::jsonb, max_attempts => %s::int,"
        " depends_on => %s::bigint[])",
        (entrypoint, payload, max_attempts, depends_on),
    ).fetchone()[0]


def claim_one(conn: psycopg.Connection, worker: uuid.UUID, entrypoint: str) -> int:
    rows = conn.execute("SELECT id FROM pgq.claim(%s::uuid, ARRAY[%s])", (worker, entrypoint)).fetchall()
    assert len(rows) == 1, rows
    return rows[0][0]


def complete(conn: psycopg.Connection, worker: uuid.UUID, job_id: int) -> list[int]:
    return [
        r[0]
        for r in conn.execute("SELECT * FROM pgq.complete(%s::uuid, ARRAY[%s]::bigint[])", (worker, job_id))
    ]


def status(conn: psycopg.Connection, job_id: int) -> str | None:
    return conn.execute("SELECT pgq.job_status(%s)", (job_id,)).fetchone()[0]


# --- the last two dependencies complete at once ------------------------------------------


def running_pair(conn: psycopg.Connection, ep: str) -> tuple[int, int, int, uuid.UUID, uuid.UUID]:
    """A and B running (held by two workers), W waiting for both."""
    a, b = enqueue(conn, ep), enqueue(conn, ep)
    w = enqueue(conn, f"{ep}_w", [a, b])
    assert status(conn, w) == "waiting"
    wa, wb = register(conn, [ep]), register(conn, [ep])
    assert claim_one(conn, wa, ep) == a
    assert claim_one(conn, wb, ep) == b
    return a, b, w, wa, wb


def assert_released_once(conn: psycopg.Connection, w: int, ep: str) -> None:
    row = conn.execute("SELECT status, deliveries FROM pgq._jobs WHERE id = %s", (w,)).fetchall()
    assert row == [("queued", 0)], f"W is {row}, not queued: stuck waiting"
    taker = register(conn, [ep])
    got = conn.execute("SELECT id FROM pgq.claim(%s::uuid, ARRAY[%s], 10)", (taker, ep)).fetchall()
    assert got == [(w,)], "W is claimable exactly once"


def _complete_then_commit_at_barrier(
    barrier: threading.Barrier, s: psycopg.Connection, wid: uuid.UUID, job: int, delay: float
) -> list[int]:
    done = complete(s, wid, job)
    barrier.wait()
    time.sleep(delay)
    s.commit()
    return done


def _complete_at_barrier_then_commit(
    barrier: threading.Barrier, s: psycopg.Connection, wid: uuid.UUID, job: int, delay: float
) -> list[int]:
    barrier.wait()
    time.sleep(delay)
    done = complete(s, wid, job)  # waits for the other's lock on W until it commits
    s.commit()
    return done


def test_two_dependencies_completing_in_lockstep_transactions_release_the_waiter(
    dsn: str, conn: psycopg.Connection
) -> None:
    """A's and B's completions run in two open transactions: A completes, then at one
    barrier A commits while B completes (B waits for A's lock on W), then B commits. The
    order and the delays vary; every time W must end queued, once."""
    rng = random.Random(7)
    with psycopg.connect(dsn) as s1, psycopg.connect(dsn) as s2:  # open transactions
        for rep in range(20):
            ep = f"pair{rep}"
            a, b, w, wa, wb = running_pair(conn, ep)
            first, second = ((s1, wa, a), (s2, wb, b)) if rep % 2 else ((s2, wb, b), (s1, wa, a))
            barrier = threading.Barrier(2, timeout=30)
            d1, d2 = rng.uniform(0, 0.005), rng.uniform(0, 0.005)
            with ThreadPoolExecutor(max_workers=2) as pool:
                f1 = pool.submit(_complete_then_commit_at_barrier, barrier, *first, d1)
                f2 = pool.submit(_complete_at_barrier_then_commit, barrier, *second, d2)
                assert f1.result(timeout=30) == [first[2]]
                assert f2.result(timeout=30) == [second[2]]
            assert_released_once(conn, w, f"{ep}_w")


def test_two_dependencies_completing_at_the_same_instant_release_the_waiter(
    dsn: str, conn: psycopg.Connection
) -> None:
    """Two autocommit sessions complete A and B from one barrier, 20 times."""
    with psycopg.connect(dsn, autocommit=True) as s1, psycopg.connect(dsn, autocommit=True) as s2:
        for rep in range(20):
            ep = f"inst{rep}"
            a, b, w, wa, wb = running_pair(conn, ep)
            barrier = threading.Barrier(2, timeout=30)

            def go(
                s: psycopg.Connection, wid: uuid.UUID, job: int, barrier: threading.Barrier = barrier
            ) -> list[int]:
                barrier.wait()
                return complete(s, wid, job)

            with ThreadPoolExecutor(max_workers=2) as pool:
                fa, fb = pool.submit(go, s1, wa, a), pool.submit(go, s2, wb, b)
                assert (fa.result(timeout=30), fb.result(timeout=30)) == ([a], [b])
            assert_released_once(conn, w, f"{ep}_w")


def test_one_of_two_dependencies_completing_does_not_release_the_waiter(conn: psycopg.Connection) -> None:
    a, b, w, wa, wb = running_pair(conn, "half")
    assert complete(conn, wa, a) == [a]
    assert status(conn, w) == "waiting"
    taker = register(conn, ["half_w"])
    assert conn.execute("SELECT id FROM pgq.claim(%s::uuid, ARRAY['half_w'], 10)", (taker,)).fetchall() == []
    # B fails and is retried: still not succeeded, so W still waits.
    assert conn.execute("SELECT pgq.fail(%s, %s, 'oops', retry_in => '0')", (wb, b)).fetchone()[0] == "queued"
    assert status(conn, w) == "waiting"
    assert claim_one(conn, wb, "half") == b
    assert complete(conn, wb, b) == [b]
    assert status(conn, w) == "queued"


# --- an enqueue racing the completion of its dependency -----------------------------------


def test_enqueue_first_then_completion_does_not_wait_and_the_commit_releases(
    dsn: str, conn: psycopg.Connection
) -> None:
    """The producer's transaction is open (enqueue with depends_on): the completion of A does
    not wait for it; the producer's commit finds A succeeded and releases the new job."""
    a = enqueue(conn, "race1")
    wid = register(conn, ["race1"])
    assert claim_one(conn, wid, "race1") == a
    with psycopg.connect(dsn) as producer, psycopg.connect(dsn, autocommit=True) as finisher:
        w = enqueue(producer, "race1_w", [a])
        finisher.execute("SET lock_timeout = '5s'")
        assert complete(finisher, wid, a) == [a]
        assert status(conn, w) is None, "not committed yet"
        producer.commit()
    assert status(conn, w) == "queued"


def test_completion_first_then_enqueue_sees_the_success(dsn: str, conn: psycopg.Connection) -> None:
    """A's completion is uncommitted when the enqueue locks A: the enqueue waits, then finds
    A succeeded and queues the job at once."""
    a = enqueue(conn, "race2")
    wid = register(conn, ["race2"])
    assert claim_one(conn, wid, "race2") == a
    with psycopg.connect(dsn) as finisher, psycopg.connect(dsn, autocommit=True) as producer:
        assert complete(finisher, wid, a) == [a]
        with ThreadPoolExecutor(max_workers=1) as pool:
            fut = pool.submit(enqueue, producer, "race2_w", [a])
            assert wait_until_waiting_on_lock(conn, producer.info.backend_pid), "enqueue did not wait"
            finisher.commit()
            w = fut.result(timeout=30)
    assert status(conn, w) == "queued"


@pytest.mark.parametrize("isolation", ["REPEATABLE_READ", "SERIALIZABLE"])
@pytest.mark.parametrize("end", ["complete", "fail", "cancel"])
def test_a_repeatable_read_end_older_than_the_dependent_fails_rather_than_strand_it(
    dsn: str, conn: psycopg.Connection, end: str, isolation: str
) -> None:
    """A REPEATABLE READ or SERIALIZABLE transaction (a role's default_transaction_isolation,
    a handler's own) whose snapshot predates a dependent's commit would not see the dependent: ending
    A there left it waiting on a job that was gone, for ever. The dependent's commit now
    writes its dependencies' rows, so such an end fails with a serialization error (40001)
    and changes nothing; ended again, in a fresh transaction, it settles the dependent."""
    ep = f"rr_{end}_{isolation.lower()}"
    a = enqueue(conn, ep, max_attempts=1)
    wid = register(conn, [ep])
    if end != "cancel":  # a queued job is canceled at once; a running one only asked to stop
        assert claim_one(conn, wid, ep) == a
    call = {
        "complete": ("SELECT * FROM pgq.complete(%s::uuid, ARRAY[%s]::bigint[])", (wid, a)),
        "fail": ("SELECT pgq.fail(%s::uuid, %s::bigint, 'boom')", (wid, a)),
        "cancel": ("SELECT pgq.cancel(ARRAY[%s]::bigint[])", (a,)),
    }[end]
    with psycopg.connect(dsn) as ender:
        ender.isolation_level = psycopg.IsolationLevel[isolation]
        ender.execute("SELECT 1 FROM pgq._workers LIMIT 1")  # its snapshot is taken
        w = enqueue(conn, f"{ep}_w", [a])  # conn is autocommit: committed now
        assert status(conn, w) == "waiting"
        with pytest.raises(psycopg.errors.SerializationFailure):
            ender.execute(*call).fetchall()
        ender.rollback()
        assert status(conn, a) == ("queued" if end == "cancel" else "running")
        ender.isolation_level = psycopg.IsolationLevel.READ_COMMITTED
        ender.execute(*call).fetchall()
        ender.commit()
    assert status(conn, w) == ("queued" if end == "complete" else "canceled")


def test_completion_rolled_back_leaves_the_new_dependent_waiting(dsn: str, conn: psycopg.Connection) -> None:
    """Never released early: the completion the enqueue waited for rolled back."""
    a = enqueue(conn, "race3")
    wid = register(conn, ["race3"])
    assert claim_one(conn, wid, "race3") == a
    with psycopg.connect(dsn) as finisher, psycopg.connect(dsn, autocommit=True) as producer:
        assert complete(finisher, wid, a) == [a]
        with ThreadPoolExecutor(max_workers=1) as pool:
            fut = pool.submit(enqueue, producer, "race3_w", [a])
            assert wait_until_waiting_on_lock(conn, producer.info.backend_pid)
            finisher.rollback()
            w = fut.result(timeout=30)
    assert status(conn, w) == "waiting"
    assert status(conn, a) == "running"
    assert complete(conn, wid, a) == [a]
    assert status(conn, w) == "queued"


def _produce(
    barrier: threading.Barrier, producer: psycopg.Connection, ep: str, deps: list[int], d0: float, d1: float
) -> int:
    barrier.wait()
    time.sleep(d0)
    w = enqueue(producer, ep, deps)
    time.sleep(d1)
    producer.commit()
    return w


def _finish(
    barrier: threading.Barrier, finisher: psycopg.Connection, wid: uuid.UUID, job: int, d0: float, d1: float
) -> list[int]:
    barrier.wait()
    time.sleep(d0)
    done = complete(finisher, wid, job)
    time.sleep(d1)
    finisher.commit()
    return done


def test_enqueue_racing_completion_never_sticks_nor_releases_early(
    dsn: str, conn: psycopg.Connection
) -> None:
    """Free-running: producer and finisher start together from a barrier, each in its own
    transaction with random delays before the call and before the commit. W depends on A
    (completed in the race) and on C (completed only at the end): after the race W waits,
    after C it is queued. 20 times."""
    rng = random.Random(11)
    with psycopg.connect(dsn) as producer, psycopg.connect(dsn) as finisher:
        for rep in range(20):
            ep = f"free{rep}"
            a, c = enqueue(conn, ep), enqueue(conn, ep)
            wid = register(conn, [ep])
            assert claim_one(conn, wid, ep) == a
            barrier = threading.Barrier(2, timeout=30)
            with ThreadPoolExecutor(max_workers=2) as pool:
                fw = pool.submit(
                    _produce,
                    barrier,
                    producer,
                    f"{ep}_w",
                    [a, c],
                    rng.uniform(0, 0.003),
                    rng.uniform(0, 0.01),
                )
                fd = pool.submit(
                    _finish, barrier, finisher, wid, a, rng.uniform(0, 0.003), rng.uniform(0, 0.01)
                )
                w = fw.result(timeout=30)
                assert fd.result(timeout=30) == [a]
            assert status(conn, a) == "succeeded"
            assert status(conn, w) == "waiting", f"rep {rep}: released before C succeeded"
            assert claim_one(conn, wid, ep) == c
            assert complete(conn, wid, c) == [c]
            assert status(conn, w) == "queued", f"rep {rep}: stuck waiting"


def test_enqueue_racing_the_only_dependency_never_sticks(dsn: str, conn: psycopg.Connection) -> None:
    """As above with A as the only dependency: whichever commits first, W ends queued."""
    rng = random.Random(13)
    with psycopg.connect(dsn) as producer, psycopg.connect(dsn) as finisher:
        for rep in range(20):
            ep = f"only{rep}"
            a = enqueue(conn, ep)
            wid = register(conn, [ep])
            assert claim_one(conn, wid, ep) == a
            barrier = threading.Barrier(2, timeout=30)
            with ThreadPoolExecutor(max_workers=2) as pool:
                fw = pool.submit(
                    _produce, barrier, producer, f"{ep}_w", [a], rng.uniform(0, 0.003), rng.uniform(0, 0.01)
                )
                fd = pool.submit(
                    _finish, barrier, finisher, wid, a, rng.uniform(0, 0.003), rng.uniform(0, 0.01)
                )
                w = fw.result(timeout=30)
                assert fd.result(timeout=30) == [a]
            assert status(conn, w) == "queued", f"rep {rep}: stuck waiting"


# --- dead and canceled dependencies ---------------------------------------------------------


def outcome(conn: psycopg.Connection, job_id: int) -> tuple[str, str] | None:
    return conn.execute(
        "SELECT outcome, error FROM pgq.outcomes WHERE job_id = %s AND outcome <> 'failed'", (job_id,)
    ).fetchone()


def test_a_dead_dependency_cancels_the_chain_with_the_reason(conn: psycopg.Connection) -> None:
    a = enqueue(conn, "chain", max_attempts=1)
    b = enqueue(conn, "chain_b", [a])
    c = enqueue(conn, "chain_c", [b])
    other = enqueue(conn, "chain")
    d = enqueue(conn, "chain_d", [other])  # an unrelated waiter stays waiting
    wid = register(conn, ["chain"])
    assert claim_one(conn, wid, "chain") == a
    assert conn.execute("SELECT pgq.fail(%s, %s, 'boom')", (wid, a)).fetchone()[0] == "dead"

    assert status(conn, a) == "dead"
    assert status(conn, b) == "canceled"
    assert status(conn, c) == "canceled"
    assert status(conn, d) == "waiting"
    reason = f"dependency {a} is dead"
    assert outcome(conn, b) == ("canceled", reason)
    assert outcome(conn, c)[0] == "canceled"
    assert str(a) in outcome(conn, c)[1], "the chain's reason names the dead job"
    assert conn.execute("SELECT count(*) FROM pgq._jobs WHERE id IN (%s, %s)", (b, c)).fetchone()[0] == 0

    # A job enqueued later with the dead job as a dependency is born canceled, with the reason.
    late = enqueue(conn, "chain_b", [a])
    assert status(conn, late) == "canceled"
    assert outcome(conn, late) == ("canceled", reason)


def test_a_canceled_dependency_cancels_its_waiters(conn: psycopg.Connection) -> None:
    a = enqueue(conn, "cx")
    b = enqueue(conn, "cx_b", [a])
    c = enqueue(conn, "cx_c", [b])
    assert conn.execute("SELECT pgq.cancel(ARRAY[%s]::bigint[])", (a,)).fetchone()[0] == 1
    assert [status(conn, j) for j in (a, b, c)] == ["canceled"] * 3
    assert outcome(conn, b)[0] == "canceled" and outcome(conn, b)[1]
    late = enqueue(conn, "cx_b", [a])
    assert outcome(conn, late) == ("canceled", f"dependency {a} ended canceled")


def test_a_dependency_dying_while_a_dependent_is_enqueued(dsn: str, conn: psycopg.Connection) -> None:
    """The fail is uncommitted when the enqueue locks A: the new job must end canceled (A is
    dead), whichever way the race goes, never waiting for ever on a dead job."""
    a = enqueue(conn, "die", max_attempts=1)
    wid = register(conn, ["die"])
    assert claim_one(conn, wid, "die") == a
    with psycopg.connect(dsn) as failer, psycopg.connect(dsn, autocommit=True) as producer:
        assert failer.execute("SELECT pgq.fail(%s, %s, 'boom')", (wid, a)).fetchone()[0] == "dead"
        with ThreadPoolExecutor(max_workers=1) as pool:
            fut = pool.submit(enqueue, producer, "die_w", [a])
            assert wait_until_waiting_on_lock(conn, producer.info.backend_pid)
            failer.commit()
            w = fut.result(timeout=30)
    assert status(conn, w) == "canceled"
    assert outcome(conn, w) == ("canceled", f"dependency {a} is dead")


# --- fan-out / fan-in with a real worker ----------------------------------------------------


def test_fan_out_fan_in_with_a_worker_process(dsn: str, conn: psycopg.Connection, tmp_path: Path) -> None:
    rng = random.Random(3)
    split = enqueue(conn, "split", payload='{"sleep": 0.2}')
    parts = [
        enqueue(conn, "part", [split], payload=f'{{"sleep": {rng.uniform(0.05, 0.6):.3f}}}')
        for _ in range(20)
    ]
    merge = enqueue(conn, "merge", parts, payload='{"sleep": 0.01}')
    assert [status(conn, j) for j in (split, *parts, merge)] == ["queued"] + ["waiting"] * 21

    worker = WorkerProcess(dsn, tmp_path, APP_POLL="5")  # NOTIFY, not polling, wakes it
    try:
        wait_until(lambda: status(conn, merge) == "succeeded", 30, "the merge to succeed")
        time.sleep(0.3)  # nothing more may run
        assert worker.terminate() == 0
    finally:
        if worker.proc.poll() is None:
            worker.kill()

    lines = ledger_lines(tmp_path)
    runs = Counter((r[0], r[3]) for r in lines)
    assert all(n == 1 for n in runs.values()), "a job ran twice"
    assert {j for j, _ in runs} == {split, *parts, merge}
    t = {(r[0], r[3]): r[4] for r in lines}
    assert min(t[p, "start"] for p in parts) >= t[split, "end"], "a part started before the split ended"
    assert t[merge, "start"] >= max(t[p, "end"] for p in parts), "the merge started before a part ended"
    # The parts ran concurrently (the worker's concurrency is 20), not one by one.
    assert max(t[p, "start"] for p in parts) < min(t[p, "end"] for p in parts) + 0.5

    # The log agrees: the merge was claimed after every part had succeeded, and ran once.
    merge_started, parts_done, merge_runs = conn.execute(
        "SELECT (SELECT started_at FROM pgq.outcomes WHERE job_id = %(m)s AND outcome = 'succeeded'),"
        " (SELECT max(finished_at) FROM pgq.outcomes WHERE job_id = ANY(%(p)s) AND outcome = 'succeeded'),"
        " (SELECT deliveries FROM pgq.outcomes WHERE job_id = %(m)s AND outcome = 'succeeded')",
        {"m": merge, "p": parts},
    ).fetchone()
    assert merge_started >= parts_done
    assert merge_runs == 1
    counts = dict(
        conn.execute(
            "SELECT outcome, count(*) FROM pgq.outcomes WHERE job_id = ANY(%s) GROUP BY outcome",
            ([split, *parts, merge],),
        ).fetchall()
    )
    assert counts == {"succeeded": 22}


@pytest.mark.parametrize("n", [1, 100])
def test_many_waiters_on_one_job_are_released_together(conn: psycopg.Connection, n: int) -> None:
    a = enqueue(conn, f"many{n}")
    waiters = [enqueue(conn, f"many{n}_w", [a]) for _ in range(n)]
    wid = register(conn, [f"many{n}"])
    assert claim_one(conn, wid, f"many{n}") == a
    assert complete(conn, wid, a) == [a]
    queued = conn.execute(
        "SELECT count(*) FROM pgq._jobs WHERE id = ANY(%s) AND status = 'queued'", (waiters,)
    ).fetchone()[0]
    assert queued == n


def test_a_completion_looks_for_dependents_only_when_a_job_waits(conn: psycopg.Connection) -> None:
    """Looking for a completion's dependents probes the waiting jobs' GIN index once per
    completed id. With no job waiting, one descent of the index of waiting jobs
    (_jobs_waiting_any_idx, nearly always empty) answers instead. With a job waiting, the
    dependents are found through the GIN index as before (never by walking every waiting
    job in id order) and released."""

    def probes(job: int, worker: uuid.UUID) -> list[tuple[str, str]]:
        """(statement, index) for each waiting index a statement of the completion read."""
        notices = explain_nested(conn, "auto_explain.log_analyze = on")
        assert complete(conn, worker, job) == [job]
        conn.execute("SET auto_explain.log_min_duration = -1")
        return sorted(
            {
                ("pre-check" if "worker_id IS NULL" in doc["Query Text"] else "lookup", n["Index Name"])
                for doc in logged_plans(notices)
                for n in plan_nodes(doc["Plan"])
                if n.get("Index Name") in ("_jobs_default_waiting_idx", "_jobs_default_waiting_any_idx")
                and n.get("Actual Loops")
            }
        )

    worker = register(conn, ["probe"])
    first = enqueue(conn, "probe")
    assert claim_one(conn, worker, "probe") == first
    assert probes(first, worker) == [("pre-check", "_jobs_default_waiting_any_idx")]

    second = enqueue(conn, "probe")
    waiter = enqueue(conn, "probe_w", [second])
    assert claim_one(conn, worker, "probe") == second
    assert probes(second, worker) == [
        ("lookup", "_jobs_default_waiting_idx"),
        ("pre-check", "_jobs_default_waiting_any_idx"),
        ("pre-check", "_jobs_default_waiting_idx"),
    ]
    assert status(conn, waiter) == "queued"
