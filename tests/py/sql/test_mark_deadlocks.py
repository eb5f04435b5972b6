"""No deadlock in the claim marks (pgq._raise_mark, pgq._verify_mark, pgq._lower_mark): every
pair of mark operations that can meet, forced into the interleaving that would close a
cycle, ends without 40P01 (deadlock_detected).

The cycle that was there: a claim's verify updates the mark row of each entrypoint it checks
(SKIP LOCKED) and keeps that row lock until it commits; a raise in another claim takes the
entrypoint's mark lock, then waited for that row in its upsert. Two claims of the same two
entrypoints that each verified one of them then raised both: each waited for the row the
other held. A raise now never waits for the mark row: one that finds it held by a verifying
claim leaves the mark to the next claim (the producers and sweeps that lower a mark hold
the mark lock in share mode, which no raise can hold then).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from support.hooks import HOOK
from support.marks import BELOW_MARK
from support.workers import wait_until_waiting_on_lock

EPS = ["dl_a", "dl_b"]


@pytest.fixture
def other(dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(dsn, autocommit=True) as c:
        yield c


@pytest.fixture
def gated_raise(conn: psycopg.Connection) -> Iterator[None]:
    """pgq._raise_mark waits at its start on advisory lock (HOOK, the session's
    application_name), so that the test releases each session's raises in the order it
    wants; the function is restored afterwards."""
    fn = "pgq._raise_mark(text)"
    source = conn.execute("SELECT pg_get_functiondef(%s::regprocedure)", (fn,)).fetchone()[0]
    gate = (
        f"    PERFORM pg_advisory_lock({HOOK}, hashtext(current_setting('application_name')));\n"
        f"    PERFORM pg_advisory_unlock({HOOK}, hashtext(current_setting('application_name')));\n"
    )
    lines = source.splitlines(keepends=True)
    first = "IF current_setting('transaction_isolation')"
    spot = [i for i, line in enumerate(lines) if line.strip().startswith(first)]
    assert len(spot) == 1
    conn.execute("".join([*lines[: spot[0]], gate, *lines[spot[0] :]]))
    try:
        yield
    finally:
        conn.execute(source)


def gate(c: psycopg.Connection, name: str) -> None:
    c.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (HOOK, name))


def open_gate(c: psycopg.Connection, name: str) -> None:
    c.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (HOOK, name))


def setup_marks(c: psycopg.Connection) -> None:
    """Both entrypoints with queued jobs and marks that are due for a verify and a raise."""
    c.execute("DELETE FROM pgq._jobs WHERE entrypoint = ANY (%s)", (EPS,))
    for ep in EPS:
        c.execute("SELECT count(*) FROM pgq.enqueue_batch(%s, array_fill('{}'::jsonb, ARRAY[6]))", (ep,))
        c.execute("SELECT pgq._raise_mark(%s)", (ep,))
    c.execute(
        "UPDATE pgq._marks SET raised_at = now() - interval '1 hour', verified_at = now() - interval '1 hour'"
        " WHERE entrypoint = ANY (%s)",
        (EPS,),
    )


def register(c: psycopg.Connection, name: str) -> uuid.UUID:
    return c.execute("SELECT pgq.register_worker(%s, %s::text[])", (name, EPS)).fetchone()[0]


def start(dsn: str, app: str, query: str, params: tuple) -> tuple[threading.Thread, dict]:
    """Run one autocommit statement as application_name app in a thread."""
    out: dict = {}
    ready = threading.Event()

    def run() -> None:
        with psycopg.connect(dsn, autocommit=True, application_name=app) as c:
            out["pid"] = c.info.backend_pid
            ready.set()
            try:
                out["result"] = c.execute(query, params).fetchall()
            except psycopg.Error as exc:
                out["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert ready.wait(10)
    return t, out


def waits_or_ends(conn: psycopg.Connection, t: threading.Thread, out: dict) -> None:
    """Until the thread's statement waits for a lock or has ended."""
    for _ in range(100):
        if not t.is_alive() or wait_until_waiting_on_lock(conn, out["pid"], 0.1):
            return
    raise AssertionError("the session neither waited nor ended")


CLAIM = "SELECT id FROM pgq.claim(%s, %s::text[], 2)"


def test_two_claims_of_the_same_entrypoints_do_not_deadlock(
    dsn: str, conn: psycopg.Connection, other: psycopg.Connection, gated_raise: None
) -> None:
    """A verifies dl_a (holds its mark row; dl_b's is held, so skipped), B verifies dl_b (dl_a's
    skipped); B's raise of dl_a takes its mark lock and meets A's row; then A raises dl_a
    (mark lock busy: skipped) and dl_b (B's row). Before the fix: 40P01 in one of them."""
    setup_marks(conn)
    a, b = register(conn, "A"), register(conn, "B")
    gate(conn, "A")
    gate(conn, "B")
    try:
        with other.transaction():
            other.execute("SELECT 1 FROM pgq._marks WHERE entrypoint = 'dl_b' FOR NO KEY UPDATE")
            ta, oa = start(dsn, "A", CLAIM, (a, EPS))
            assert wait_until_waiting_on_lock(conn, oa["pid"]), "A did not reach its raise"
        tb, ob = start(dsn, "B", CLAIM, (b, EPS))
        assert wait_until_waiting_on_lock(conn, ob["pid"]), "B did not reach its raise"
        open_gate(conn, "B")
        waits_or_ends(conn, tb, ob)
        open_gate(conn, "A")
    finally:
        conn.execute("SELECT pg_advisory_unlock_all()")
    ta.join(30)
    tb.join(30)
    assert not ta.is_alive() and not tb.is_alive()
    for out in (oa, ob):
        assert "error" not in out, f"{out['error'].sqlstate}: {out['error']}"
        assert len(out["result"]) == 2
    assert conn.execute(BELOW_MARK).fetchone()[0] is None


# --- every other meeting: one side holds what its operation locked (its transaction left
# open), the other must finish without waiting for it (a wait for the mark lock is at most
# 50 ms). A mark operation that never waits for another's lock cannot be in a cycle. ------


def claim_in(c: psycopg.Connection, worker: uuid.UUID) -> None:
    c.execute(CLAIM, (worker, EPS)).fetchall()


def lower_in(c: psycopg.Connection) -> None:
    """A producer whose jobs sort below both marks (they lower them in place)."""
    for ep in EPS:
        c.execute("SELECT pgq.enqueue(%s, '{}', priority => 5)", (ep,))


def reap_in(c: psycopg.Connection) -> None:
    """A sweep that gives back a dead worker's jobs of both entrypoints (lowering the marks)."""
    assert c.execute("SELECT pgq.reap()").fetchone()[0] > 0


def due_later(c: psycopg.Connection) -> None:
    c.execute("UPDATE pgq._jobs SET run_at = now() + interval '1 hour' WHERE entrypoint = ANY (%s)", (EPS,))


def due_now(c: psycopg.Connection) -> None:
    c.execute(
        "UPDATE pgq._jobs SET run_at = now() - interval '1 hour'"
        " WHERE entrypoint = ANY (%s) AND status = 'queued'",
        (EPS,),
    )


def a_dead_worker_holding_jobs(c: psycopg.Connection) -> None:
    gone = register(c, "gone")
    assert len(c.execute(CLAIM.replace(" 2)", " 4)"), (gone, EPS)).fetchall()) == 4
    c.execute("UPDATE pgq._workers SET heartbeat_at = now() - interval '1 hour' WHERE id = %s", (gone,))


MEETINGS = [
    # (holder, mover): a claim that verified the marks (it took nothing) meets a claim that
    # raises them: before the fix the raise waited for the verified rows (half the cycle).
    ("verify", "claim"),
    ("claim", "claim"),
    ("claim", "enqueue"),
    ("verify", "enqueue"),
    ("enqueue", "claim"),
    ("claim", "reap"),
    ("reap", "claim"),
    ("enqueue", "reap"),
    ("reap", "enqueue"),
]


@pytest.mark.parametrize(("holder", "mover"), MEETINGS)
def test_no_mark_operation_waits_for_another(
    dsn: str, conn: psycopg.Connection, other: psycopg.Connection, holder: str, mover: str
) -> None:
    setup_marks(conn)
    conn.execute("DELETE FROM pgq._workers")
    held, moving = register(conn, "held"), register(conn, "moving")
    if "reap" in (holder, mover):
        a_dead_worker_holding_jobs(conn)
        conn.execute(
            "UPDATE pgq._marks"
            " SET raised_at = now() - interval '1 hour', verified_at = now() - interval '1 hour'"
        )
    if holder == "verify":
        due_later(conn)
    ops = {
        "verify": lambda c: claim_in(c, held),
        "claim": lambda c: claim_in(c, held if c is other else moving),
        "enqueue": lower_in,
        "reap": reap_in,
    }
    with other.transaction():
        ops[holder](other)
        if holder == "verify":
            assert (
                other.execute("SELECT count(*) FROM pgq._jobs WHERE worker_id = %s", (held,)).fetchone()[0]
                == 0
            )
            due_now(conn)
        query = {
            "claim": (CLAIM, (moving, EPS)),
            "enqueue": (
                "SELECT pgq.enqueue(%s, '{}', priority => 5)"
                " UNION ALL SELECT pgq.enqueue(%s, '{}', priority => 5)",
                tuple(EPS),
            ),
            "reap": ("SELECT pgq.reap()", ()),
        }[mover]
        t, out = start(dsn, "mover", *query)
        t.join(10)
        waited = t.is_alive()
        if waited:
            assert wait_until_waiting_on_lock(conn, out["pid"], 1)
    t.join(30)
    assert not waited, f"the {mover} waited for the {holder}'s transaction"
    assert "error" not in out, f"{out['error'].sqlstate}: {out['error']}"
    assert conn.execute(BELOW_MARK).fetchone()[0] is None
