"""Producers and workers through PgBouncer in transaction pooling mode.

The worker's claims and completions go through the pooler; its LISTEN needs a direct
connection (listen_dsn), and without one it notices that notifications do not come back
and falls back to polling with a warning.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

import pgq
from support.pgbouncer import pgbouncer
from support.workers import WorkerProcess, ledger_lines, outcome_count, wait_until


@pytest.fixture(scope="module")
def bouncer() -> Iterator[int]:
    """A PgBouncer on a loopback port, transaction pooling, in front of the test cluster."""
    with pgbouncer() as port:
        yield port


def _through(dsn: str, port: int) -> str:
    return make_conninfo(dsn, host="127.0.0.1", port=str(port))


def _enqueue_through_bouncer(dsn: str, n: int) -> None:
    # One transaction per enqueue, like a busy web app behind the pooler.
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as conn:
        for i in range(n):
            conn.execute("SELECT pgq.enqueue('noop', %s::jsonb)", (f'{{"i": {i}}}',))


def test_drain_through_pgbouncer_with_a_direct_listen_connection(
    dsn: str, bouncer: int, tmp_path: Path
) -> None:
    pooled = _through(dsn, bouncer)
    worker = WorkerProcess(pooled, tmp_path, PGQ_LISTEN_DSN=dsn, APP_POLL="10")
    wait_until(lambda: "registered" in worker.log(), 20, "the worker to register")
    time.sleep(0.5)
    started = time.time()
    _enqueue_through_bouncer(pooled, 1000)
    wait_until(lambda: outcome_count(dsn) == 1000, 60, "1000 jobs through PgBouncer")
    assert worker.terminate() == 0
    assert "NOTIFY does not reach" not in worker.log()
    runs = ledger_lines(tmp_path)
    assert len({r[0] for r in runs}) == 1000
    # Woken by NOTIFY, not by the 10 s poll.
    assert min(r[4] for r in runs) - started < 5


def test_without_listen_dsn_the_worker_warns_and_polls(dsn: str, bouncer: int, tmp_path: Path) -> None:
    pooled = _through(dsn, bouncer)
    worker = WorkerProcess(pooled, tmp_path, APP_POLL="0.2")
    wait_until(lambda: "NOTIFY does not reach" in worker.log(), 20, "the polling warning")
    _enqueue_through_bouncer(pooled, 200)
    wait_until(lambda: outcome_count(dsn) == 200, 60, "200 jobs by polling")
    assert worker.terminate() == 0


def test_without_listen_dsn_a_chain_of_dependents_runs_back_to_back(
    dsn: str, bouncer: int, tmp_path: Path
) -> None:
    """Polling: the NOTIFY of a dependent that our own completion released is not heard, so
    the completion itself must send the worker to claim again (else one link per poll)."""
    pooled = _through(dsn, bouncer)
    worker = WorkerProcess(pooled, tmp_path, APP_POLL="5")
    wait_until(lambda: "NOTIFY does not reach" in worker.log(), 20, "the polling warning")
    ids: list[int] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        for i in range(4):
            ids += conn.execute(
                "SELECT pgq.enqueue('noop', %s::jsonb, depends_on => %s::bigint[])",
                (f'{{"i": {i}}}', ids[-1:] or None),
            ).fetchone()
    wait_until(lambda: outcome_count(dsn) == 4, 40, "the chain of four")
    assert worker.terminate() == 0
    started = sorted(r[4] for r in ledger_lines(tmp_path))
    assert started[-1] - started[0] < 3, started


def test_client_through_pgbouncer(dsn: str, bouncer: int) -> None:
    """Through a pooler in transaction mode the clients prepare nothing: the next call may
    run on another server connection, where a prepared statement does not exist. They tell
    PgBouncer by the backend key it hands out (its own, not the server's)."""
    with pgq.Client(_through(dsn, bouncer)) as client:
        ids = [client.enqueue("noop", {"i": i}) for i in range(20)]
        with client._pool.connection() as conn:
            assert conn.prepare_threshold is None
        assert [client.job_status(i) for i in ids] == ["queued"] * 20
        assert client.cancel(ids) == 20


def _hold_server_connection(dsn: str, bouncer: int) -> psycopg.Connection[Any]:
    """A client of the pooler inside a transaction: PgBouncer gives it the server connection
    released last, so the next call of anyone else goes to a different one."""
    other = psycopg.connect(_through(dsn, bouncer), prepare_threshold=None)
    other.execute("SELECT 1")
    return other


def test_a_pooler_that_passes_the_server_key_on_costs_no_call(
    dsn: str, bouncer: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If a pooler passed the server's backend key on, the clients would prepare through it.
    The first call that then meets a server connection without its statement has not run:
    it runs again unprepared, and the client prepares nothing from then on."""
    monkeypatch.setattr(pgq.queries, "pooled_threshold", lambda *args: pgq.queries.PREPARE_THRESHOLD)
    with pgq.Client(_through(dsn, bouncer), min_size=1, max_size=1) as client:
        ids = [client.enqueue("noop", {"i": i}) for i in range(2)]  # the second one prepares
        with _hold_server_connection(dsn, bouncer):
            ids.append(client.enqueue("noop", {"i": 2}))
        assert client._prepare is False
        ids += [client.enqueue("noop", {"i": i}) for i in range(3, 6)]
        assert [client.job_status(i) for i in ids] == ["queued"] * 6

    async def scenario() -> list[int]:
        async with pgq.AsyncClient(_through(dsn, bouncer), min_size=1, max_size=1) as client:
            ids = [await client.enqueue("noop", {"i": i}) for i in range(2)]
            with _hold_server_connection(dsn, bouncer):
                ids.append(await client.enqueue("noop", {"i": 2}))
            assert client._prepare is False
            return ids

    assert len(set(asyncio.run(scenario()))) == 3
    # Each call inserted its job once: the one that met the missing statement had not run.
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM pgq._jobs WHERE entrypoint = 'noop'").fetchone() == (9,)


def test_async_client_through_pgbouncer(dsn: str, bouncer: int) -> None:
    async def scenario() -> int | None:
        async with pgq.AsyncClient(_through(dsn, bouncer)) as client:
            for i in range(3):
                await client.enqueue("noop", {"i": i})
            async with client._pool.connection() as conn:
                threshold = conn.prepare_threshold
        return threshold

    assert asyncio.run(scenario()) is None
