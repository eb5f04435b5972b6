"""Faults of the worker found by an audit, each forced in a real `pgq worker` process:
handlers past their timeout, re-registration, a read-only window, a database that goes
away during shutdown, lost claim replies, concurrency limits. The invariants: a slot is
held until the handler really stops, a stale run never settles a newer delivery, no
background task dies, shutdown is bounded, nothing stays stuck.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgq.worker.statements import HEARTBEAT, SETTINGS
from support.hooks import HOOK, hook
from support.proxy import Proxy
from support.workers import execute, ledger_lines, listeners, outcome_count, scalar, wait_until


def enqueue(dsn: str, entrypoint: str, payload: str = "{}", n: int = 1, **kwargs: str) -> list[int]:
    extra = "".join(f", {k} => {v}" for k, v in kwargs.items())
    return [scalar(dsn, f"SELECT pgq.enqueue(%s, %s::jsonb{extra})", (entrypoint, payload)) for _ in range(n)]


def events(ledger: Path, event: str, entrypoint: str | None = None) -> list[tuple[int, int]]:
    return [
        (job, deliveries)
        for job, deliveries, ep, ev, _ in ledger_lines(ledger)
        if ev == event and (entrypoint is None or ep == entrypoint)
    ]


def most_at_once(ledger: Path) -> int:
    """The most handler runs of the process that were between their start and end at once."""
    marks = sorted(
        (t, 1 if ev == "start" else -1) for _, _, _, ev, t in ledger_lines(ledger) if ev in ("start", "end")
    )
    now = peak = 0
    for _, step in marks:
        now += step
        peak = max(peak, now)
    return peak


def outcomes(dsn: str, job_id: int) -> list[tuple[str, int]]:
    return [
        (r[0], r[1])
        for r in execute(
            dsn,
            "SELECT outcome, deliveries FROM pgq.outcomes WHERE job_id = %s ORDER BY finished_at",
            (job_id,),
        )
    ]


def alive_worker(dsn: str) -> str:
    return wait_until(
        lambda: scalar(dsn, "SELECT max(id::text) FROM pgq._workers WHERE state = 'alive'"), 30, "a worker"
    )


def ghost_job(dsn: str, worker_id: str) -> int:
    """A job the database says the worker holds, but the worker never heard of (a claim's
    reply lost, or completions lost in a failover)."""
    [ghost] = enqueue(dsn, "noop", run_at="now() + interval '1 hour'")
    execute(
        dsn,
        "UPDATE pgq._jobs SET status = 'running', worker_id = %s, deliveries = 1, started_at = now()"
        " WHERE id = %s",
        (worker_id, ghost),
    )
    return ghost


def test_a_transactional_handler_past_its_timeout_cannot_settle_the_next_delivery(
    dsn: str, ledger: Path, spawn
) -> None:
    execute(dsn, "CREATE TABLE IF NOT EXISTS tx_effects (job_id bigint)")
    scalar(dsn, "SELECT pgq.configure('tx_slow', timeout => '1 second', backoff_base => '0.1 seconds')")
    [job] = enqueue(dsn, "tx_slow", '{"sleep": 3}')
    worker = spawn(APP_CONCURRENCY="1")
    wait_until(lambda: ("succeeded", 2) in outcomes(dsn, job), 60, "the second delivery to succeed")
    assert worker.terminate() == 0
    assert outcomes(dsn, job)[0][0] == "failed", "the first run timed out"
    assert execute(dsn, "SELECT job_id FROM tx_effects") == [(job,)], (
        "the first run's writes were rolled back"
    )
    assert most_at_once(ledger) == 1, "two handlers ran at concurrency 1"
    assert sorted(events(ledger, "end")) == [(job, 1), (job, 2)]


def test_a_sync_handler_that_overran_keeps_its_slot_and_the_next_job_starts_fresh(
    dsn: str, ledger: Path, spawn
) -> None:
    scalar(dsn, "SELECT pgq.configure('stubborn', timeout => '1 second', backoff_base => '1 hour')")
    [slow] = enqueue(dsn, "stubborn", '{"sleep": 3}', priority="1")
    [quick] = enqueue(dsn, "stubborn")
    worker = spawn(APP_CONCURRENCY="1")
    wait_until(lambda: outcomes(dsn, quick) == [("succeeded", 1)], 60, "the quick job to succeed")
    assert worker.terminate() == 0
    assert outcomes(dsn, slow) == [("failed", 1)], "the overrunning job timed out once"
    assert most_at_once(ledger) == 1, "the next job started while the timed-out thread still ran"
    assert sorted(events(ledger, "start")) == sorted([(slow, 1), (quick, 1)])


def test_re_registration_keeps_each_delivery_in_its_own_books(dsn: str, ledger: Path, spawn) -> None:
    """The worker is declared dead while a handler it cannot interrupt runs; registered
    again, it claims the same job. The first run ending must not take the second's entry
    with it: a cancel must still reach the second, and the slots stay counted."""
    scalar(dsn, "SELECT pgq.configure('two_lives', lease => '1 second')")
    [job] = enqueue(dsn, "two_lives", '{"sleep": 3}')
    worker = spawn(APP_CONCURRENCY="2")
    wait_until(lambda: events(ledger, "start"), 30, "the first run to start")
    wid = alive_worker(dsn)

    def declared_dead() -> bool:
        # One transaction: the worker row stays locked from the UPDATE to the reap, so no
        # heartbeat (every 0.25 s) comes in between to make the worker look alive again.
        # A sweep of the worker's own may hold the reap's lock meanwhile: then try again.
        with psycopg.connect(dsn) as c:
            c.execute(
                "UPDATE pgq._workers SET heartbeat_at = now() - interval '1 hour' WHERE id = %s", (wid,)
            )
            c.execute("SELECT pgq.reap()")
            return c.execute("SELECT state FROM pgq._workers WHERE id = %s", (wid,)).fetchone()[0] == "dead"

    wait_until(declared_dead, 10, "the reap to declare the worker dead")
    wait_until(lambda: (job, 2) in events(ledger, "start"), 30, "the re-registered worker to run it again")
    wait_until(lambda: (job, 1) in events(ledger, "end"), 30, "the first run to end")
    scalar(dsn, "SELECT pgq.cancel(ARRAY[%s]::bigint[])", (job,))
    wait_until(lambda: (job, 2) in events(ledger, "cancelled"), 10, "the cancel to reach the second run")
    wait_until(lambda: scalar(dsn, "SELECT pgq.job_status(%s)", (job,)) == "canceled", 10, "canceled")
    assert worker.terminate() == 0
    assert most_at_once(ledger) <= 2


def test_a_connection_lost_while_registering_again_does_not_end_the_worker(
    dsn: str, ledger: Path, spawn
) -> None:
    """Registered again (its row was gone), the worker read its settings outside the retries
    of its registration: a connection lost right then ended the process (exit 1), and its
    new worker row stayed alive with nobody behind it until the sweep."""
    worker = spawn()
    old = alive_worker(dsn)
    with psycopg.connect(dsn, autocommit=True) as admin:
        original = hook(admin, "pgq.settings(text[], integer)", "RETURN QUERY")
        try:
            admin.execute("SELECT pg_advisory_lock(%s)", (HOOK,))
            admin.execute("SELECT pgq.unregister_worker(%s)", (old,))
            enqueue(dsn, "noop")  # its NOTIFY wakes the claim loop, which finds the worker gone
            wait_until(lambda: alive_worker(dsn) != old, 30, "the worker to register again")
            waiting = (
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND datname = current_database() AND query LIKE %s"
            )
            wait_until(lambda: execute(dsn, waiting, ("%pgq.settings%",)), 30, "a settings read at the hook")
            for (pid,) in execute(dsn, waiting, ("%pgq.settings%",)):
                scalar(dsn, "SELECT pg_terminate_backend(%s)", (pid,))
            time.sleep(0.5)  # the worker sees the connection lost and retries
            assert worker.proc.poll() is None, worker.log()
        finally:
            admin.execute("SELECT pg_advisory_unlock_all()")
            admin.execute(original)
    jobs = enqueue(dsn, "noop")
    succeeded = "SELECT count(*) FROM pgq.outcomes WHERE entrypoint = 'noop' AND outcome = 'succeeded'"
    wait_until(lambda: scalar(dsn, succeeded) == 2, 30, f"both jobs ({jobs[0]} the second) to run")
    assert worker.terminate() == 0, worker.log()


def test_completions_survive_a_read_only_window(dsn: str, ledger: Path, spawn) -> None:
    """A failover's window during which the database is read-only: completions fail with a
    non-transient error; the worker must go on trying and complete every job."""
    ids = enqueue(dsn, "slow", '{"sleep": 1.5}', n=10)
    worker = spawn(APP_CONCURRENCY="10")
    wait_until(lambda: len(events(ledger, "start")) == 10, 30, "all ten to start")
    db = conninfo_to_dict(dsn)["dbname"]
    terminate = (
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE datname = %s AND pid <> pg_backend_pid()"
    )
    with psycopg.connect(make_conninfo(dsn, dbname="postgres"), autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{db}" SET default_transaction_read_only = on')
        admin.execute(terminate, (db,))
        try:
            wait_until(lambda: len(events(ledger, "end")) == 10, 30, "all ten to finish")
            time.sleep(1.0)  # completions fail meanwhile
        finally:
            admin.execute(f'ALTER DATABASE "{db}" RESET default_transaction_read_only')
            admin.execute(terminate, (db,))
    wait_until(lambda: outcome_count(dsn, entrypoint="slow") == 10, 60, "all ten to be completed")
    assert worker.terminate() == 0
    assert sorted(job for job, _ in events(ledger, "end")) == sorted(ids), "each job ran once"
    assert "complete failed" in worker.log(), "the window was not hit"


def test_shutdown_is_bounded_while_the_database_is_away(dsn: str, ledger: Path, spawn) -> None:
    proxy = Proxy(int(conninfo_to_dict(dsn).get("port", 5432)))
    try:
        enqueue(dsn, "slow", '{"sleep": 1}', n=5)
        worker = spawn(make_conninfo(dsn, port=str(proxy.port)), APP_GRACE="2")
        wait_until(lambda: len(events(ledger, "start")) == 5, 30, "five to start")
        proxy.cut()
        wait_until(lambda: len(events(ledger, "end")) == 5, 30, "five to finish")
        started = time.monotonic()
        assert worker.terminate(timeout=40) == 0
        # The grace period, then about 3 s for the final flush and the unregistration
        # (test_worker_shutdown.py: the same while the database blocks or is blackholed).
        seconds = time.monotonic() - started
        print(f"\ndatabase refusing connections: SIGTERM to exit {seconds:.2f} s (grace period 2 s)")
        assert seconds < 2 + 6  # it took 11 s before: 5 s each for the flush and the unregistration
    finally:
        proxy.close()


def test_a_claim_whose_reply_never_arrived_is_released_by_the_next_heartbeat(
    dsn: str, ledger: Path, spawn
) -> None:
    scalar(dsn, "SELECT pgq.configure('noop', lease => '2 seconds')")
    worker = spawn()
    wid = alive_worker(dsn)
    ghost = ghost_job(dsn, wid)
    wait_until(lambda: scalar(dsn, "SELECT pgq.job_status(%s)", (ghost,)) == "queued", 10, "the release")
    assert worker.terminate() == 0


# The heartbeat's own connection: its last statement a beat or the settings read after it
# (their text up to the first parameter, which the server sees as $1).
_LEASE_CONN = "(starts_with(query, %s) OR starts_with(query, %s))"
_LEASE_STATEMENTS = (HEARTBEAT.split("%s")[0], SETTINGS.split("%s")[0])
_WORKER_BACKENDS = (
    "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
    " AND backend_type = 'client backend'"
)


def test_connections_lost_while_idle_make_the_next_heartbeat_give_back_a_lost_job(
    dsn: str, ledger: Path, spawn
) -> None:
    """The same when no call failed: an idle worker (it polls only every minute here)
    loses its LISTEN connection and its pooled ones, while the heartbeat's own connection
    lives on. A failover may have lost what the worker committed before, so the next
    heartbeat says what the worker runs. (The test above passed by a race: it did so only
    when the cut also broke a beat.)"""
    worker = spawn(APP_POLL="60")
    wid = alive_worker(dsn)
    beat = "SELECT heartbeat_at > registered_at FROM pgq._workers WHERE id = %s"
    wait_until(lambda: scalar(dsn, beat, (wid,)), 10, "a first heartbeat")
    ghost = ghost_job(dsn, wid)
    others = f"SELECT count(pg_terminate_backend(pid)) {_WORKER_BACKENDS} AND NOT {_LEASE_CONN}"
    assert scalar(dsn, others, _LEASE_STATEMENTS) >= 2  # the LISTEN connection and the pool's
    wait_until(lambda: "LISTEN connection lost" in worker.log(), 10, "the listener to notice")
    wait_until(lambda: scalar(dsn, "SELECT pgq.job_status(%s)", (ghost,)) == "queued", 15, "the release")
    assert "heartbeat failed" not in worker.log()  # no call failed: the losses alone told it
    assert worker.terminate() == 0


def test_after_a_lost_connection_the_next_heartbeat_gives_back_a_job_the_worker_lost(
    dsn: str, ledger: Path, spawn
) -> None:
    """With the default lease a worker tells the database which jobs it runs only every
    minute, unless something failed: a lost connection (a failover may have lost a commit,
    a claim its reply) makes the next heartbeat do it."""
    proxy = Proxy(int(conninfo_to_dict(dsn).get("port", 5432)))
    try:
        worker = spawn(make_conninfo(dsn, port=str(proxy.port)))
        wid = alive_worker(dsn)
        ghost = ghost_job(dsn, wid)
        proxy.cut()
        wait_until(lambda: "failed" in worker.log(), 10, "a statement to fail")
        proxy.restore()
        wait_until(lambda: scalar(dsn, "SELECT pgq.job_status(%s)", (ghost,)) == "queued", 15, "the release")
        assert worker.terminate() == 0
    finally:
        proxy.close()


def test_without_failures_a_worker_reconciles_every_two_leases(dsn: str, ledger: Path, spawn) -> None:
    """The database walks every running-index entry of the worker to reconcile, and under a
    held snapshot that is one per job claimed since: heartbeats in between only beat."""
    scalar(dsn, "SELECT pgq.configure('noop', lease => '2 seconds')")  # beats every 0.4-0.5 s
    worker = spawn(None, "--log-level", "debug")
    wait_until(lambda: "registered as" in worker.log(), 30, "the registration")
    time.sleep(9)
    assert worker.terminate() == 0
    assert 1 <= worker.log().count("heartbeat: told the database") <= 3, worker.log()


def test_a_concurrency_limited_entrypoint_drains_without_waiting_for_the_poll(
    dsn: str, ledger: Path, spawn
) -> None:
    scalar(dsn, "SELECT pgq.configure('limited', concurrency => 1)")
    enqueue(dsn, "limited", n=10)
    worker = spawn(APP_POLL="60")
    # Ten jobs of 10 ms each: a poll interval per job would take ten minutes.
    wait_until(lambda: outcome_count(dsn, entrypoint="limited") == 10, 30, "ten jobs")
    assert worker.terminate() == 0
    assert most_at_once(ledger) == 1


def test_a_handlers_return_value_is_the_jobs_result(dsn: str, ledger: Path, spawn) -> None:
    [good] = enqueue(dsn, "returns", '{"n": 21}')
    [bad] = enqueue(dsn, "returns", '{"not_json": true}', max_attempts="1")
    worker = spawn()
    wait_until(lambda: outcome_count(dsn, entrypoint="returns") == 1, 30, "the good job")
    wait_until(lambda: scalar(dsn, "SELECT pgq.job_status(%s)", (bad,)) == "dead", 30, "the bad job to die")
    assert worker.terminate() == 0
    assert scalar(dsn, "SELECT result FROM pgq.outcomes WHERE job_id = %s", (good,)) == {"double": 42}
    assert "not JSON" in scalar(dsn, "SELECT last_error FROM pgq.jobs WHERE id = %s", (bad,))


def test_a_cancel_reaches_a_running_handler_without_waiting_for_a_heartbeat(
    dsn: str, ledger: Path, spawn
) -> None:
    """The lease is 30 s, so heartbeats come 5.6-7.5 s apart: once the one the worker sends
    when it starts listening has passed, the cancel's NOTIFY must be what brings it to the
    handler within 4 s."""
    [job] = enqueue(dsn, "slow_sync", '{"sleep": 20}')
    worker = spawn()
    wait_until(lambda: events(ledger, "start"), 30, "the handler to start")
    wait_until(
        lambda: scalar(dsn, "SELECT heartbeat_at > registered_at FROM pgq._workers WHERE state = 'alive'"),
        30,
        "the heartbeat the worker sends once it listens",
    )
    scalar(dsn, "SELECT pgq.cancel(ARRAY[%s]::bigint[])", (job,))
    wait_until(lambda: events(ledger, "cancelled"), 4, "the handler to see the cancel")
    wait_until(lambda: scalar(dsn, "SELECT pgq.job_status(%s)", (job,)) == "canceled", 10, "canceled")
    assert worker.terminate() == 0


def test_a_cancel_sent_before_the_worker_listens_is_not_lost(dsn: str, ledger: Path, spawn) -> None:
    """A cancel whose NOTIFY went out while the worker had no LISTEN connection (starting
    up, or reconnecting) reaches the handler once it listens, not at the next heartbeat
    (the lease is 30 s: the first heartbeat comes 5.6-7.5 s after the start)."""
    proxy = Proxy(int(conninfo_to_dict(dsn).get("port", 5432)))
    try:
        proxy.cut()  # the LISTEN connection cannot be made yet; claims go straight to the database
        [job] = enqueue(dsn, "slow_sync", '{"sleep": 20}')
        worker = spawn(dsn, "--listen-dsn", make_conninfo(dsn, port=str(proxy.port)))
        wait_until(lambda: events(ledger, "start"), 30, "the handler to start")
        scalar(dsn, "SELECT pgq.cancel(ARRAY[%s]::bigint[])", (job,))  # its NOTIFY reaches no one
        if not scalar(dsn, "SELECT heartbeat_at = registered_at FROM pgq._workers WHERE state = 'alive'"):
            pytest.skip("the machine was too slow: a periodic heartbeat came before the cancel was checked")
        proxy.restore()
        wait_until(lambda: listeners(dsn), 10, "the worker to listen")
        wait_until(
            lambda: events(ledger, "cancelled"), 2, "the handler to see the cancel once the worker listens"
        )
        assert worker.terminate() == 0
    finally:
        proxy.close()


def keepalive_timers(pid: int, port: int) -> list[bool | None]:
    """For each TCP connection that process `pid` has to `port`: whether its next keepalive
    probe comes within a minute (ss's timer column; "119min" for the system's default, and
    iproute2 6.1 writes 8.7 s as "8.692ms", so only minutes are told apart); None for a
    connection busy at the time (no keepalive timer)."""
    out = subprocess.run(
        ["ss", "-tnpo", "state", "established", f"( dport = :{port} )"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    timers: list[bool | None] = []
    for line in out.splitlines():
        if f"pid={pid}," in line:
            m = re.search(r"timer:\(keepalive,([^,]+),", line)
            timers.append(None if m is None else not re.search(r"min|h", m.group(1)))
    return timers


@pytest.mark.skipif(shutil.which("ss") is None, reason="ss (iproute2) is not installed")
@pytest.mark.parametrize("given", [None, "keepalives_idle=600"])
def test_the_worker_probes_a_database_that_went_silent(
    dsn: str, ledger: Path, spawn, given: str | None
) -> None:
    """A failover that leaves the old primary's address silent (no reset): a worker must
    find its connections dead in about 30 s, not after TCP's own limits (hours for a
    connection waiting for a reply). Every connection of the worker (both pools' and
    LISTEN's) probes the database after 10 s idle, unless the DSN says otherwise (here 10
    minutes). A silent peer cannot be faked on this machine: the kernel answers for any
    proxy, and there is no packet filter."""
    port = int(conninfo_to_dict(dsn).get("port", 5432))
    worker = spawn(f"{dsn} {given}" if given else dsn)
    wait_until(lambda: listeners(dsn), 30, "the worker to listen")
    timers = wait_until(
        lambda: (t := keepalive_timers(worker.pid, port)) and len(t) >= 3 and None not in t and t,
        10,
        "the worker's connections to be idle, each with its keepalive timer",
    )
    assert timers == [given is None] * len(timers), timers
    assert worker.terminate() == 0


def test_a_worker_against_a_database_without_pgq_says_so_in_one_line(
    fresh_db: str, ledger: Path, spawn
) -> None:
    worker = spawn(fresh_db)
    assert worker.proc.wait(timeout=30) == 1
    assert worker.log().strip() == "error: pgq is not installed in this database; run `pgq install`"


def test_sigterm_stops_a_worker_that_cannot_reach_the_database(dsn: str, ledger: Path, spawn) -> None:
    proxy = Proxy(int(conninfo_to_dict(dsn).get("port", 5432)))
    proxy.cut()
    try:
        worker = spawn(make_conninfo(dsn, port=str(proxy.port)))
        wait_until(lambda: "register failed" in worker.log(), 30, "a failed registration")
        assert worker.terminate(timeout=10) == 0
    finally:
        proxy.close()
