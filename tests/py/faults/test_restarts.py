"""When the server itself fails: real `pgq worker` processes and producers through a fast
stop longer than the lease, an immediate stop, a backend killed (crash recovery), every
connection slot taken, and a role's idle_session_timeout.

Each drain asserts that no job is lost, stuck or settled twice, and prints the time from
"the server accepts connections again" (a probe that connects every 20 ms) to "the first
job runs" (the worker's ledger). The bound asserted is generous (the goal is 2 s); the
figures are printed (`-s`). These tests restart the cluster under test (see cluster.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import PoolTimeout

import pgq
from pgq.worker.listener import Listener
from pgq.worker.wakeups import Wakeups
from support.cluster import db_sh
from support.workers import WorkerProcess, execute, ledger_lines, scalar, wait_until

N = 300
LEASE = 4.0
# Goal: 2 s. Asserted: a bound a loaded machine should not reach, well below what a pool
# backing off 1, 2, 4 ... 128 s took (20 s after a 40 s outage).
BOUND = 5.0


class Probe(threading.Thread):
    """Connects every 20 ms: `down` is when that first failed, `up` when it first worked
    again after that (wall-clock, as the ledger's times)."""

    def __init__(self, dsn: str) -> None:
        super().__init__(daemon=True)
        self.dsn = dsn
        self.down: float | None = None
        self.up: float | None = None
        self.start()

    def run(self) -> None:
        deadline = time.monotonic() + 120
        while self.up is None and time.monotonic() < deadline:
            try:
                psycopg.connect(self.dsn, connect_timeout=2).close()
                if self.down is not None:
                    self.up = time.time()
            except psycopg.OperationalError:
                if self.down is None:
                    self.down = time.time()
            time.sleep(0.02)


def started_runs(tmp_path: Path) -> list[float]:
    return sorted(t for _, _, _, event, t in ledger_lines(tmp_path) if event == "start")


def drain(dsn: str, spawn, tmp_path: Path, **env: str) -> WorkerProcess:
    """N jobs of 0.1 s on a worker of concurrency 5 (some 6 s of work), well under way."""
    execute(dsn, "SELECT pgq.configure('slow', lease => make_interval(secs => %s))", (LEASE,))
    execute(
        dsn,
        "SELECT pgq.enqueue_batch('slow', array_fill('{\"sleep\": 0.1}'::jsonb, ARRAY[%s]))",
        (N,),
    )
    worker = spawn(APP_CONCURRENCY="5", **env)
    wait_until(lambda: len(started_runs(tmp_path)) >= 30, 60, "the drain to be under way")
    return worker


def settle_and_check(dsn: str, worker: WorkerProcess, since: float, what: str) -> float:
    """Wait for the drain to end; assert 0 lost, 0 stuck, 0 settled twice; print and return
    the seconds from `since` (the server accepting again) to the first job run after it."""
    ledger = Path(worker.log_path).parent
    first = wait_until(lambda: [t for t in started_runs(ledger) if t >= since], 120, "a job after the fault")[
        0
    ]
    wait_until(
        lambda: scalar(dsn, "SELECT count(*) FROM pgq._jobs WHERE entrypoint = 'slow'") == 0, 120, "drain"
    )
    outcomes = execute(
        dsn,
        "SELECT outcome, count(*) FROM pgq.outcomes WHERE entrypoint = 'slow'"
        " AND outcome IN ('succeeded', 'canceled', 'dead') GROUP BY outcome",
    )
    per_job = scalar(
        dsn,
        "SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM pgq.outcomes WHERE entrypoint = 'slow'"
        " AND outcome IN ('succeeded', 'canceled', 'dead') GROUP BY job_id) AS o",
    )
    assert dict(outcomes) == {"succeeded": N}, "every job succeeded once: none lost, stuck or dead"
    assert per_job == 1, "no job has two outcomes"
    assert worker.terminate() == 0
    seconds = first - since
    print(f"\n{what}: the first job ran {seconds:.2f} s later")
    return seconds


def sessions(conn: psycopg.Connection, db: str) -> int:
    # Client backends only: an autovacuum worker of the database (the drain left dead rows)
    # takes no connection slot.
    return conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend'", (db,)
    ).fetchone()[0]


def failures_once_back(worker: WorkerProcess) -> list[str]:
    """Failed claims, heartbeats, settlements after the worker's pool connected again: a
    connection that died while idle must not be lent (each would fail one call)."""
    lines = worker.log().splitlines()
    back = [
        n for n, line in enumerate(lines) if re.search(r"worker \S+: connected to the database again", line)
    ]
    assert back, "the worker never said it was connected again"
    return [line for line in lines[back[-1] :] if re.search(r"[a-z] failed( \(|:)", line)]


def connection_lines(worker: WorkerProcess) -> list[str]:
    return [line for line in worker.log().splitlines() if "cannot connect to the database" in line]


def test_a_fast_stop_longer_than_the_lease_under_a_drain(
    dsn: str, crashable: None, spawn, tmp_path: Path
) -> None:
    worker = drain(dsn, spawn, tmp_path)
    probe = Probe(dsn)
    db_sh("stop")  # pg_ctl -m fast
    time.sleep(20.0)  # five leases; the old pool then waited 15 s more before it tried again
    db_sh("start")
    probe.join()
    assert probe.up is not None
    seconds = settle_and_check(dsn, worker, probe.up, "fast stop, 20 s outage: server accepting again")
    assert seconds < BOUND
    assert not failures_once_back(worker)
    # Why it cannot connect, each reason once per outage, not a line per claim.
    lines = connection_lines(worker)
    assert 1 <= len(lines) <= 8, lines  # pool and LISTEN: shutting down, refused, starting up
    assert "claim failed (couldn't get a connection" not in worker.log()


def test_an_immediate_stop_under_a_drain(dsn: str, crashable: None, spawn, tmp_path: Path) -> None:
    worker = drain(dsn, spawn, tmp_path)
    probe = Probe(dsn)
    db_sh("crash")  # pg_ctl -m immediate, then start: crash recovery
    probe.join()
    assert probe.up is not None
    assert settle_and_check(dsn, worker, probe.up, "immediate stop: server accepting again") < BOUND
    assert not failures_once_back(worker)


def test_a_backend_killed_crash_recovery_under_a_drain(
    dsn: str, crashable: None, spawn, tmp_path: Path
) -> None:
    worker = drain(dsn, spawn, tmp_path)
    db = conninfo_to_dict(dsn)["dbname"]
    pid = scalar(
        dsn,
        "SELECT max(pid) FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend'"
        " AND pid <> pg_backend_pid() AND query <> 'LISTEN pgq'",
        (db,),
    )
    probe = Probe(dsn)
    killed = time.time()
    os.kill(pid, signal.SIGKILL)  # the postmaster restarts every backend: crash recovery
    wait_until(lambda: probe.up is not None or not probe.is_alive(), 60, "the server back")
    since = probe.up or killed
    assert (
        settle_and_check(dsn, worker, since, "backend SIGKILL: server accepting again after crash recovery")
        < BOUND
    )
    assert not failures_once_back(worker)


def test_every_connection_slot_taken_then_freed(dsn: str, crashable: None, spawn, tmp_path: Path) -> None:
    worker = drain(dsn, spawn, tmp_path)
    db = conninfo_to_dict(dsn)["dbname"]
    other = make_conninfo(dsn, dbname="postgres")
    producer = pgq.Client(dsn, min_size=1, max_size=1, timeout=1.0)
    producer.job_status(1)  # its connection is open, then terminated below
    admin = psycopg.connect(other, autocommit=True)
    fillers: list[psycopg.Connection] = [admin]  # its slot too, until the end
    try:
        # Keep the worker out while the slots fill up, then take every one of them.
        admin.execute(f'ALTER DATABASE "{db}" ALLOW_CONNECTIONS false')
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (db,))
        # Terminated backends free their slots only as they exit.
        wait_until(lambda: not sessions(admin, db), 30, "the database's sessions to end")
        while True:
            try:
                fillers.append(psycopg.connect(other, autocommit=True))
            except psycopg.OperationalError as exc:
                assert "too many clients" in str(exc)
                break
        admin.execute(f'ALTER DATABASE "{db}" ALLOW_CONNECTIONS true')
        time.sleep(8.0)  # the old pool's next attempt was then 7 s away
        assert not sessions(admin, db), "every slot was taken: the worker could not connect"
        # A producer: a PoolTimeout that says why.
        with pytest.raises(PoolTimeout, match="too many clients"):
            producer.enqueue("noop")
        assert any("too many clients" in line for line in connection_lines(worker)), worker.log()
        for conn in fillers[-10:]:
            conn.close()
        freed = time.time()
    finally:
        for conn in fillers:
            conn.close()
    seconds = settle_and_check(dsn, worker, freed, "max_connections exhausted: slots freed")
    assert seconds < BOUND
    assert not failures_once_back(worker)
    assert producer.enqueue("noop") > 0
    producer.close()
    assert len(connection_lines(worker)) <= 8, connection_lines(worker)


def test_producers_do_not_fail_on_connections_that_died_while_idle(dsn: str, crashable: None) -> None:
    """Client and AsyncClient, four pooled connections each, across a fast restart: once the
    server is back, no call fails (the old pools lent each dead connection once)."""
    client = pgq.Client(dsn, min_size=4, max_size=4)
    client.job_status(1)
    wait_until(lambda: client._pool.get_stats()["pool_available"] == 4, 30, "four idle connections")

    async def main() -> list[int]:
        async with pgq.AsyncClient(dsn, min_size=4, max_size=4) as aclient:
            await aclient.job_status(1)
            for _ in range(300):
                if aclient._pool.get_stats()["pool_available"] == 4:
                    break
                await asyncio.sleep(0.05)
            await asyncio.to_thread(db_sh, "restart")  # pg_ctl -m fast, then start
            ids = [await aclient.enqueue("noop") for _ in range(8)]
            return ids + list(await asyncio.gather(*(aclient.enqueue("noop") for _ in range(8))))

    try:
        async_ids = asyncio.run(main())  # restarts the server in the middle
        sync_ids = [client.enqueue("noop") for _ in range(8)]
    finally:
        client.close()
    assert len(set(async_ids + sync_ids)) == 24
    assert scalar(dsn, "SELECT count(*) FROM pgq._jobs WHERE id = ANY(%s)", (async_ids + sync_ids,)) == 24


def test_a_call_lost_before_its_statement_was_sent_runs_once_more(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """configure casts its interval text first, on the same connection: the connection dies
    there (its backend terminated), before pgq.configure was sent, so the call runs again on
    a fresh connection and succeeds."""
    execute(dsn, "DROP SEQUENCE IF EXISTS conn_unsent; CREATE SEQUENCE conn_unsent")
    monkeypatch.setattr(
        pgq.queries,
        "INTERVAL_CHECK",
        "SELECT CASE WHEN nextval('conn_unsent') = 1 THEN pg_terminate_backend(pg_backend_pid()) END,"
        " %s::text::interval",
    )
    with pgq.Client(dsn) as client:
        client.configure("unsent", lease="17 seconds")
    assert scalar(dsn, "SELECT lease FROM pgq.settings(entrypoints => ARRAY['unsent'])").total_seconds() == 17

    async def main() -> None:
        async with pgq.AsyncClient(dsn) as aclient:
            await aclient.configure("unsent", lease="19 seconds")

    execute(dsn, "ALTER SEQUENCE conn_unsent RESTART")
    asyncio.run(main())
    assert scalar(dsn, "SELECT lease FROM pgq.settings(entrypoints => ARRAY['unsent'])").total_seconds() == 19


def test_a_call_lost_after_its_statement_was_sent_is_not_retried(dsn: str) -> None:
    """Commit unknown: raised, never sent twice."""
    execute(dsn, "DROP SEQUENCE IF EXISTS conn_sent; CREATE SEQUENCE conn_sent")
    dies = pgq.queries.Call("SELECT nextval('conn_sent'), pg_terminate_backend(pg_backend_pid())")
    with pgq.Client(dsn) as client, pytest.raises(psycopg.OperationalError):
        client._run(dies)
    assert scalar(dsn, "SELECT last_value FROM conn_sent") == 1

    async def main() -> None:
        async with pgq.AsyncClient(dsn) as aclient:
            await aclient._run(dies)

    with pytest.raises(psycopg.OperationalError):
        asyncio.run(main())
    assert scalar(dsn, "SELECT last_value FROM conn_sent") == 2


def test_the_listen_session_outlives_a_short_idle_session_timeout(dsn: str, spawn, tmp_path: Path) -> None:
    """idle_session_timeout 1 s as a default of the database (as of a role): the worker's
    LISTEN connection turns it off for itself and stays up; NOTIFYs keep waking it."""
    db = conninfo_to_dict(dsn)["dbname"]
    execute(dsn, f"ALTER DATABASE \"{db}\" SET idle_session_timeout = '1s'")
    try:
        worker = spawn(APP_POLL="30")  # only a NOTIFY can wake it in time
        wait_until(lambda: "registered as" in worker.log(), 30, "registration")
        listening = (
            "SELECT max(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND query = 'LISTEN pgq'"
        )
        listener = wait_until(lambda: scalar(dsn, listening), 30, "LISTEN")
        time.sleep(4.0)  # four timeouts
        assert scalar(dsn, listening) == listener
        assert "LISTEN connection lost" not in worker.log()
        job = scalar(dsn, "SELECT pgq.enqueue('noop')")
        wait_until(lambda: any(j == job for j, *_ in ledger_lines(tmp_path)), 10, "the NOTIFY to wake it")
        assert worker.terminate() == 0
        # Pooled connections the timeout closed while idle were replaced, never lent.
        assert not re.search(r"(claim|heartbeat|complete) failed", worker.log()), worker.log()
    finally:
        execute(dsn, f'ALTER DATABASE "{db}" RESET idle_session_timeout')


def test_an_outage_names_each_reason_once_however_they_alternate(caplog: pytest.LogCaptureFixture) -> None:
    """While the server is stopped, attempts are refused, and the pool's connections opened
    before the stop fail one by one as they are found broken: the reasons alternate. Each
    is said once per outage, not at every turn; after the link connected, again."""
    link = pgq.pools.Link("flapping", logging.getLogger("pgq.test"))
    at = 'connection to server at "127.0.0.1", port 54329 failed: '
    refused = psycopg.OperationalError(at + "Connection refused\n\tIs the server running on that host?")
    closed = psycopg.OperationalError(
        at + "server closed the connection unexpectedly\n\tThis probably means the server terminated"
    )
    with caplog.at_level(logging.INFO, logger="pgq.test"):
        for exc in (refused, closed, refused, closed, refused, closed):
            assert link.failed(exc)
        link.connected()
        assert link.failed(refused)
    told = [r.getMessage() for r in caplog.records if r.name == "pgq.test"]
    assert told == [
        "flapping: cannot connect to the database: Connection refused; trying again every 0.5 s",
        "flapping: cannot connect to the database: server closed the connection unexpectedly;"
        " trying again every 0.5 s",
        told[2],
        "flapping: cannot connect to the database: Connection refused; trying again every 0.5 s",
    ]
    assert told[2].startswith("flapping: connected to the database again after ")


def test_a_refused_pool_says_why_once_and_its_timeout_carries_it(caplog: pytest.LogCaptureFixture) -> None:
    """Nothing listens on the port: the pool tries every half second at most, logs the
    reason once (not per attempt), and its PoolTimeout says it; closing ends the attempts."""
    link = pgq.pools.Link("refused", logging.getLogger("pgq.test"))
    refused = "host=127.0.0.1 port=1 connect_timeout=2"
    with caplog.at_level(logging.INFO, logger="pgq.test"):
        pool = pgq.pools.Pool(refused, link=link, min_size=1, timeout=2.0, open=True)
        try:
            with pytest.raises(PoolTimeout, match="refuses connections: Connection refused"):
                pool.getconn()
        finally:
            pool.close(timeout=2.0)

        async def main() -> None:
            alink = pgq.pools.Link("refused async", logging.getLogger("pgq.test"))
            apool = pgq.pools.AsyncPool(refused, link=alink, min_size=1, timeout=2.0, open=False)
            await apool.open()
            try:
                with pytest.raises(PoolTimeout, match="refuses connections: Connection refused"):
                    await apool.getconn()
            finally:
                await apool.close(timeout=2.0)

        asyncio.run(main())
    told = [r.getMessage() for r in caplog.records if "cannot connect" in r.getMessage()]
    assert told == [
        "refused: cannot connect to the database: Connection refused; trying again every 0.5 s",
        "refused async: cannot connect to the database: Connection refused; trying again every 0.5 s",
    ]


def test_a_pool_tells_of_a_connection_found_dead_while_idle(dsn: str) -> None:
    """pgq.pools.AsyncPool's `lost`: called when its check finds an idle connection dead
    (the server ended it: a restart, a failover), before the pool lends a fresh one; the
    worker's ledger then becomes unsure though no call failed (test_worker_faults.py)."""
    lost: list[float] = []

    async def main() -> None:
        link = pgq.pools.Link("idle", logging.getLogger("pgq.test"))
        pool = pgq.pools.AsyncPool(dsn, link=link, lost=lambda: lost.append(1.0), min_size=1, open=False)
        await pool.open(wait=True)
        try:
            async with pool.connection() as conn:
                pid = (await (await conn.execute("SELECT pg_backend_pid()")).fetchone())[0]
            assert lost == []
            assert scalar(dsn, "SELECT pg_terminate_backend(%s)", (pid,))
            wait_until(
                lambda: not scalar(dsn, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)),
                5,
                "the end",
            )
            async with pool.connection() as conn:
                assert (await (await conn.execute("SELECT 1")).fetchone())[0] == 1
            assert len(lost) == 1
        finally:
            await pool.close(timeout=2.0)

    asyncio.run(main())


class _ProbeOnly:
    """What the listener asks of its worker's Protocol: the poll pace, and its NOTIFY probe."""

    pace = SimpleNamespace(poll=1.0)

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn

    async def notify(self, payload: str) -> None:
        async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
            await conn.execute("SELECT pg_notify('pgq', %s)", (payload,))


def test_the_listener_tells_of_a_lost_session_not_of_a_failed_connect(
    dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The listener's `lost` (the worker's ledger becomes unsure): a session that was
    listening and ended may hide a failover; a connect that fails cannot have lost anything,
    and a wrong listen_dsn would otherwise make every beat reconcile."""
    lost: list[str] = []
    listening: list[bool] = []

    def listener() -> Listener:
        return Listener(
            "t",
            _ProbeOnly(dsn),  # type: ignore[arg-type]
            Wakeups(),
            ["x"],
            lambda: None,
            listening.append,
            lambda: lost.append("lost"),
        )

    async def until(what: str, predicate: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 10
        while not predicate():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.05)

    async def main() -> None:
        # A role that does not exist: refused at once, every try (a refusal that passes by
        # itself, a server starting, is retried inside the connect and raises nothing).
        refused = asyncio.create_task(listener().run(make_conninfo(dsn, user="pgq_no_such_role")))

        def tries() -> int:
            return sum(r.getMessage().startswith("LISTEN connection lost") for r in caplog.records)

        await until("two refused connects", lambda: tries() >= 2)
        refused.cancel()
        assert lost == [] and True not in listening
        task = asyncio.create_task(listener().run(dsn))
        try:
            await until("the session to listen", lambda: listening[-1:] == [True])
            assert scalar(
                dsn,
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = current_database() AND query = 'LISTEN pgq'",
            )
            await until("the loss to be told", lambda: lost == ["lost"])
            await until("the session to listen again", lambda: listening[-1:] == [True])
            assert lost == ["lost"]
        finally:
            task.cancel()

    asyncio.run(main())
