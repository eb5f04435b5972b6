"""Shutdown and leases whatever the database does, in real `pgq worker` processes.

SIGTERM while the job table is locked (a DBA's ALTER TABLE or VACUUM FULL), while
PgBouncer is paused, and while the database is unreachable (a blackholed network): the
worker exits within its grace period plus a few seconds, says which jobs it abandoned and
why, and those jobs run again (none lost). A partition of about half the lease, with a claim
in flight, does not cost the worker its lease: its heartbeat waits behind nothing.

Durations are printed (run with -s); the bounds asserted are generous (a loaded machine
must not fail them) but far below what the blocks last, which the old worker waited out.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgq.worker.connection import LeaseConnection
from pgq.worker.statements import HEARTBEAT, SETTINGS
from support.netns import Namespace
from support.pgbouncer import pgbouncer
from support.workers import WorkerProcess, execute, ledger_lines, outcome_count, scalar, wait_until

GRACE = 2.0
# SIGTERM to exit must stay under this (the goal is GRACE + about 3 s; docs/deploy.md gives
# supervisors a stop timeout of grace + 5 s); every block below lasts longer than it, so a
# worker that waits for the block to end fails.
BOUND = GRACE + 5
# Network namespaces and veth pairs need root and iproute2.
NETNS = pytest.mark.skipif(
    shutil.which("ip") is None or os.geteuid() != 0, reason="network namespaces need root and iproute2"
)


def enqueue(dsn: str, payload: str, n: int = 1) -> list[int]:
    return [scalar(dsn, "SELECT pgq.enqueue('slow_first', %s::jsonb)", (payload,)) for _ in range(n)]


def starts(ledger: Path) -> list[tuple[int, int]]:
    return [(job, deliveries) for job, deliveries, _, event, _ in ledger_lines(ledger) if event == "start"]


def ends(ledger: Path) -> list[int]:
    return [job for job, _, _, event, _ in ledger_lines(ledger) if event == "end"]


def sigterm_to_exit(worker: WorkerProcess, what: str) -> float:
    """SIGTERM, then the seconds until the process exited (printed); fails past BOUND."""
    started = time.monotonic()
    worker.proc.terminate()
    try:
        code = worker.proc.wait(timeout=BOUND)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what}: the worker was still running {BOUND:.0f} s after SIGTERM (grace {GRACE:.0f} s)")
    seconds = time.monotonic() - started
    print(f"\n{what}: SIGTERM to exit {seconds:.2f} s (grace period {GRACE:.1f} s)")
    assert code == 0, worker.log()
    return seconds


def check_abandoned_and_rerun(
    dsn: str, ledger: Path, spawn, log: str, finished: list[int], long: int
) -> None:
    """The log names what the worker gave up and why; a fresh worker then runs each of
    those jobs again (none lost, none stuck)."""
    line = next((x for x in log.splitlines() if "could not complete" in x), "")
    assert f"could not complete {len(finished)} finished jobs" in line, log
    assert all(str(job) in line for job in finished), line
    reason = re.search(r"could not unregister \((.*?)\)", log)
    assert reason and reason.group(1).strip(), log
    # The job cut short at the end of the grace period: named with what becomes of it.
    named = [x for x in log.splitlines() if re.search(rf"\b{long}\b", x) and re.search("run again|lease", x)]
    assert named, log
    worker = spawn(dsn)
    every = [*finished, long]
    wait_until(lambda: outcome_count(dsn, entrypoint="slow_first") == len(every), 60, "all to run again")
    assert worker.terminate() == 0
    again = {job for job, deliveries in starts(ledger) if deliveries > 1}
    assert again == set(every), starts(ledger)


def test_sigterm_while_the_job_table_is_locked(dsn: str, ledger: Path, spawn) -> None:
    """LOCK TABLE pgq._jobs IN ACCESS EXCLUSIVE MODE (ALTER TABLE, VACUUM FULL): claims,
    completions, heartbeats and the unregistration all wait for it."""
    scalar(dsn, "SELECT pgq.configure('slow_first', lease => '6 seconds')")
    finished = enqueue(dsn, '{"sleep": 2}', n=3)
    [long] = enqueue(dsn, '{"sleep": 60}')
    worker = spawn(dsn, APP_GRACE=str(GRACE), APP_POLL="0.2")
    wait_until(lambda: len(starts(ledger)) == 4, 30, "four jobs to start")
    with psycopg.connect(dsn) as locker:
        try:
            locker.execute("LOCK TABLE pgq._jobs IN ACCESS EXCLUSIVE MODE")
            wait_until(lambda: len(ends(ledger)) == 3, 30, "three jobs to finish (their completion waits)")
            time.sleep(1.0)
            sigterm_to_exit(worker, "job table locked")
        finally:
            locker.rollback()
            if worker.proc.poll() is None:
                worker.kill()
    check_abandoned_and_rerun(dsn, ledger, spawn, worker.log(), finished, long)


@pytest.fixture
def bouncer() -> Iterator[int]:
    """A PgBouncer in transaction mode, with an admin console (PAUSE, RESUME)."""
    with pgbouncer() as port:
        yield port


def _console(port: int, command: str) -> None:
    subprocess.run(
        ["psql", "-Xq", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "pgbouncer", "-c", command],
        check=True,
        capture_output=True,
        timeout=30,
    )


def test_sigterm_while_pgbouncer_is_paused(dsn: str, ledger: Path, spawn, bouncer: int) -> None:
    """PgBouncer's PAUSE (a pooler being restarted or reconfigured): every statement of the
    worker through it waits, however long the pause lasts."""
    scalar(dsn, "SELECT pgq.configure('slow_first', lease => '6 seconds')")
    finished = enqueue(dsn, '{"sleep": 2}', n=2)
    [long] = enqueue(dsn, '{"sleep": 60}')
    pooled = make_conninfo(dsn, host="127.0.0.1", port=str(bouncer))
    worker = spawn(pooled, APP_GRACE=str(GRACE), APP_POLL="0.2", PGQ_LISTEN_DSN=dsn)
    wait_until(lambda: len(starts(ledger)) == 3, 30, "three jobs to start")
    _console(bouncer, "PAUSE")
    try:
        wait_until(lambda: len(ends(ledger)) == 2, 30, "two jobs to finish (their completion waits)")
        time.sleep(1.0)
        sigterm_to_exit(worker, "PgBouncer paused")
    finally:
        _console(bouncer, "RESUME")
        if worker.proc.poll() is None:
            worker.kill()
    check_abandoned_and_rerun(dsn, ledger, spawn, worker.log(), finished, long)


@NETNS
def test_sigterm_while_the_database_is_unreachable(dsn: str, ledger: Path, spawn) -> None:
    """A network that drops every packet without a reset: nothing the worker sends gets an
    answer or an error (before tcp_user_timeout, 30 s)."""
    scalar(dsn, "SELECT pgq.configure('slow_first', lease => '6 seconds')")
    finished = enqueue(dsn, '{"sleep": 2}', n=2)
    [long] = enqueue(dsn, '{"sleep": 60}')
    with Namespace(int(conninfo_to_dict(dsn).get("port", 5432))) as ns:
        inside = make_conninfo(dsn, host=ns.host, port=str(ns.port))
        worker = WorkerProcess(inside, ledger, APP_GRACE=str(GRACE), APP_POLL="0.2", wrap=ns.wrap)
        try:
            wait_until(lambda: len(starts(ledger)) == 3, 30, "three jobs to start")
            ns.blackhole()
            wait_until(lambda: len(ends(ledger)) == 2, 30, "two jobs to finish (their completion waits)")
            time.sleep(1.0)
            sigterm_to_exit(worker, "database unreachable")
        finally:
            if worker.proc.poll() is None:
                worker.kill()
    check_abandoned_and_rerun(dsn, ledger, spawn, worker.log(), finished, long)


@NETNS
@pytest.mark.parametrize("flows_lost", [False, True], ids=["healed", "flows-lost"])
def test_a_partition_of_half_the_lease_with_a_claim_in_flight_keeps_the_lease(
    dsn: str, ledger: Path, flows_lost: bool
) -> None:
    """The worker claims every 10 ms (nothing is due), so a claim is in flight when the
    network starts dropping packets. The heartbeat must not wait for it, nor for its own
    statement sent into the partition: on a connection of its own, with a deadline, it
    reaches the database as soon as the network is back. With `flows-lost` the connections
    open during the partition never carry anything again once it heals (a NAT gateway or a
    failover lost them; new connections work): the claim then waits for a reply that does
    not come, and a heartbeat waiting behind it, or on such a connection, loses the lease.
    The test sweeps every 0.2 s meanwhile, so a lease that ran out is seen."""
    lease, partition = 12.0, 6.5
    scalar(dsn, "SELECT pgq.configure('slow_first', lease => make_interval(secs => %s))", (lease,))
    [job] = enqueue(dsn, '{"sleep": 120}')
    with Namespace(int(conninfo_to_dict(dsn).get("port", 5432))) as ns:
        inside = make_conninfo(dsn, host=ns.host, port=str(ns.port))
        worker = WorkerProcess(inside, ledger, APP_GRACE="1", APP_POLL="0.01", wrap=ns.wrap)
        try:
            wait_until(lambda: starts(ledger), 30, "the job to start")
            wid = scalar(dsn, "SELECT worker_id::text FROM pgq._jobs WHERE id = %s", (job,))
            beats: list[float] = []
            done = threading.Event()

            def sweep() -> None:
                # The sweep of another worker, or pg_cron's: a lease run out is re-delivered.
                with psycopg.connect(dsn, autocommit=True) as conn:
                    while True:
                        conn.execute("SELECT pgq.reap()")
                        at = conn.execute(
                            "SELECT extract(epoch FROM heartbeat_at)::float8 FROM pgq._workers WHERE id = %s",
                            (wid,),
                        ).fetchone()
                        if at and (not beats or at[0] != beats[-1]):
                            beats.append(at[0])
                        if done.is_set():  # the time now ends the last gap
                            now = conn.execute("SELECT extract(epoch FROM now())::float8").fetchone()
                            beats.append(now[0])
                            return
                        time.sleep(0.2)

            sweeper = threading.Thread(target=sweep, daemon=True)
            sweeper.start()
            time.sleep(1.0)
            ns.blackhole()
            time.sleep(partition)
            if flows_lost:
                ns.proxy.freeze()
            ns.heal()
            time.sleep(lease / 2)  # past the lease of the last beat before the partition
            done.set()
            sweeper.join(timeout=10)
            gap = max(b - a for a, b in itertools.pairwise(beats))
            print(f"\npartition {partition} s, lease {lease} s: longest gap between heartbeats {gap:.2f} s")
            status, deliveries, holder = execute(
                dsn, "SELECT status, deliveries, worker_id::text FROM pgq.jobs WHERE id = %s", (job,)
            )[0]
            assert (status, deliveries, holder) == ("running", 1, wid), worker.log()
            assert starts(ledger) == [(job, 1)], "not re-delivered"
            assert worker.proc.poll() is None, "the worker is alive"
            assert scalar(dsn, "SELECT state FROM pgq._workers WHERE id = %s", (wid,)) == "alive"
            assert worker.terminate(timeout=30) == 0
        finally:
            if worker.proc.poll() is None:
                worker.kill()


def test_a_claim_blocked_in_the_database_does_not_hold_up_the_heartbeat(dsn: str, ledger: Path) -> None:
    """A claim of a limited entrypoint locks its settings row: another transaction holding
    that row (an administrator's pgq.configure left open) blocks the claim for as long as
    it is held. The heartbeat must go on meanwhile: the worker's running job keeps its
    lease through two leases of a blocked claim."""
    lease = 4.0
    scalar(
        dsn,
        "SELECT pgq.configure('slow_first', lease => make_interval(secs => %s), concurrency => 5)",
        (lease,),
    )
    [job] = enqueue(dsn, '{"sleep": 120}')
    worker = WorkerProcess(dsn, ledger, APP_GRACE="1", APP_POLL="0.1")
    try:
        wait_until(lambda: starts(ledger), 30, "the job to start")
        wid = scalar(dsn, "SELECT worker_id::text FROM pgq._jobs WHERE id = %s", (job,))
        with psycopg.connect(dsn) as holder, psycopg.connect(dsn, autocommit=True) as sweeper:
            holder.execute("SELECT 1 FROM pgq._queues WHERE entrypoint = 'slow_first' FOR UPDATE")
            blocked = wait_until(
                lambda: sweeper.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND query LIKE %s AND datname = current_database()",
                    ("%pgq.claim%",),
                ).fetchone()[0],
                10,
                "a claim to wait for the lock",
            )
            assert blocked
            until = time.monotonic() + 2 * lease
            while time.monotonic() < until:
                sweeper.execute("SELECT pgq.reap()")  # another worker's sweep
                time.sleep(0.2)
            holder.rollback()
        status, deliveries, held_by = execute(
            dsn, "SELECT status, deliveries, worker_id::text FROM pgq.jobs WHERE id = %s", (job,)
        )[0]
        assert (status, deliveries, held_by) == ("running", 1, wid), worker.log()
        assert starts(ledger) == [(job, 1)], "not re-delivered"
        assert worker.terminate(timeout=30) == 0
    finally:
        if worker.proc.poll() is None:
            worker.kill()


def test_two_sigterms_back_to_back_are_one_and_a_later_one_still_exits_at_once(
    dsn: str, ledger: Path, spawn
) -> None:
    """`timeout -s TERM` (and other supervisors) signal the process and then its group: the
    worker gets two SIGTERMs a millisecond apart. Those are one request to stop, with the
    grace period; a second SIGTERM that comes later (someone insists) still exits at once."""
    # Back to back, while a job that needs less than the grace period runs: it finishes.
    [job] = enqueue(dsn, '{"sleep": 1.5}')
    worker = spawn(dsn, APP_GRACE="30", APP_POLL="0.2")
    wait_until(lambda: starts(ledger) == [(job, 1)], 30, "the job to start")
    started = time.monotonic()
    # Two signals, not one: the second is sent once the kernel delivered the first (a
    # standard signal still pending absorbs another of its kind).
    os.kill(worker.pid, signal.SIGTERM)
    wait_until(lambda: not _sigterm_pending(worker.pid), 10, "the first SIGTERM delivered", interval=0.0005)
    os.kill(worker.pid, signal.SIGTERM)
    gap = time.monotonic() - started
    code = worker.proc.wait(timeout=60)
    print(f"\ntwo SIGTERMs {gap * 1000:.1f} ms apart: exit {code} after {time.monotonic() - started:.2f} s")
    assert code == 0, worker.log()
    assert "second SIGTERM" not in worker.log()
    assert ends(ledger) == [job] and outcome_count(dsn, entrypoint="slow_first") == 1

    # Two seconds apart, while a job that would take a minute runs: the second one ends it.
    [long] = enqueue(dsn, '{"sleep": 60}')
    worker = spawn(dsn, APP_GRACE="30", APP_POLL="0.2")
    wait_until(lambda: (long, 1) in starts(ledger), 30, "the long job to start")
    os.kill(worker.pid, signal.SIGTERM)
    wait_until(lambda: "SIGTERM: stopping" in worker.log(), 30, "the first SIGTERM to be logged")
    time.sleep(2)
    started = time.monotonic()
    os.kill(worker.pid, signal.SIGTERM)
    code = worker.proc.wait(timeout=60)
    print(f"a second SIGTERM 2 s later: exit {code} after {time.monotonic() - started:.2f} s")
    assert code == 1 and "second SIGTERM" in worker.log(), worker.log()
    assert long not in ends(ledger)
    scalar(dsn, "SELECT pgq.cancel(ARRAY[%s]::bigint[])", (long,))


def _sigterm_pending(pid: int) -> bool:
    """Whether a SIGTERM sent to the process is still pending (not yet delivered)."""
    status = Path(f"/proc/{pid}/status").read_text()
    pending = int(re.search(r"^ShdPnd:\s*([0-9a-f]+)$", status, re.M)[1], 16)
    return bool(pending & (1 << (signal.SIGTERM - 1)))


def test_a_call_after_one_given_up_runs_on_a_fresh_connection(dsn: str) -> None:
    """The stop cancels a heartbeat under way, which abandons its connection, and then
    unregisters on the heartbeat's connection. The abandoned one was kept until the given-up
    work noticed, so a call made before that ran on it and failed (the connection is lost)."""

    async def main() -> list[list[dict[str, Any]]]:
        lease = LeaseConnection(dsn)
        try:
            await lease.execute([("SELECT 1", ())], 5, "a first beat")
            beat = asyncio.create_task(lease.execute([("SELECT pg_sleep(5)", ())], 30, "a beat"))
            await asyncio.sleep(0.3)  # on the wire
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
            return await lease.execute([("SELECT 1 AS one", ())], 5, "the unregistration")
        finally:
            await lease.close()

    assert asyncio.run(main()) == [[{"one": 1}]]


def test_a_heartbeat_connection_lost_while_idle_is_replaced_for_the_unregistration(
    dsn: str, ledger: Path, spawn
) -> None:
    """The heartbeat's connection ended while idle between beats (a restart, a failover, a
    DBA's idle_session_timeout), and SIGTERM before the next beat: the unregistration runs
    on a fresh connection. It failed at once on the dead one, and the worker stayed 'alive'
    until the sweep found it dead a lease later."""
    worker = spawn(dsn, APP_GRACE="1", APP_POLL="0.2")  # the default lease: a beat every 6 s
    alive = "SELECT max(id::text) FROM pgq._workers WHERE state = 'alive'"
    wid = wait_until(lambda: scalar(dsn, alive), 30, "a worker")
    beat = "SELECT heartbeat_at > registered_at FROM pgq._workers WHERE id = %s"
    wait_until(lambda: scalar(dsn, beat, (wid,)), 10, "a first heartbeat")
    # Idle connections whose last statement was a beat or the settings read after it: the
    # heartbeat's (a pooled one ended as well only makes the worker reconcile sooner).
    ended = scalar(
        dsn,
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database()"
        " AND pid <> pg_backend_pid() AND state = 'idle'"
        " AND (starts_with(query, %s) OR starts_with(query, %s))",
        (HEARTBEAT.split("%s")[0], SETTINGS.split("%s")[0]),  # up to the first parameter ($1)
    )
    assert ended >= 1
    assert worker.terminate() == 0, worker.log()
    assert "could not unregister" not in worker.log(), worker.log()
    assert scalar(dsn, "SELECT state FROM pgq._workers WHERE id = %s", (wid,)) == "stopped"
