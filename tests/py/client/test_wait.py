"""Results and waiting: Client.result, Client.wait (woken by pgq.watch's NOTIFY, not by
polling), TimeoutError, unknown ids, and pgq.AsyncClient doing the same."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from uuid import UUID

import psycopg
import pytest

import pgq
from pgq import client as client_module


@pytest.fixture
def client(dsn: str) -> Iterator[pgq.Client]:
    with pgq.Client(dsn) as c:
        yield c


def claim(client: pgq.Client, entrypoint: str) -> UUID:
    with psycopg.connect(client.dsn, autocommit=True) as conn:
        worker = conn.execute("SELECT pgq.register_worker('t', ARRAY[%s])", (entrypoint,)).fetchone()[0]
        assert (
            conn.execute("SELECT count(*) FROM pgq.claim(%s, ARRAY[%s])", (worker, entrypoint)).fetchone()[0]
            == 1
        )
    return worker


def test_result_is_none_until_finished_then_the_return_value(client: pgq.Client) -> None:
    job_id = client.enqueue("w_result", {"n": 1})
    assert client.result(job_id) is None
    worker = claim(client, "w_result")
    assert client.result(job_id) is None
    assert client.complete(worker, [job_id], results=[{"sum": 3}]) == [job_id]
    assert client.result(job_id) == pgq.JobResult(job_id, "succeeded", {"sum": 3}, None)


def test_result_of_dead_and_canceled_jobs_carries_the_error(client: pgq.Client) -> None:
    dead = client.enqueue("w_dead", max_attempts=1)
    worker = claim(client, "w_dead")
    assert client.fail(worker, dead, "Traceback ...\nValueError: no") == "dead"
    assert client.result(dead) == pgq.JobResult(dead, "dead", None, "Traceback ...\nValueError: no")
    canceled = client.enqueue("w_dead")
    client.cancel(canceled)
    assert client.result(canceled) == pgq.JobResult(canceled, "canceled", None, "canceled by pgq.cancel")


def test_unknown_ids_raise_unknown_job(client: pgq.Client) -> None:
    with pytest.raises(pgq.UnknownJob, match="job 987654321 is unknown"):
        client.result(987654321)
    with pytest.raises(pgq.UnknownJob):
        client.wait(987654321, timeout=5)


def test_wait_on_a_finished_job_returns_at_once(client: pgq.Client) -> None:
    job_id = client.enqueue("w_done")
    client.cancel(job_id)
    assert client.wait(job_id, timeout=0).status == "canceled"


def test_wait_times_out_with_timeout_error(client: pgq.Client) -> None:
    job_id = client.enqueue("w_timeout")
    with pytest.raises(TimeoutError, match=f"job {job_id} unfinished after 0.2 s"):
        client.wait(job_id, timeout=0.2)
    with pytest.raises(pgq.InvalidArgument, match="timeout"):
        client.wait(job_id, timeout=-1)


def test_wait_is_woken_by_the_completion_not_by_polling(
    client: pgq.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The re-check interval is an hour: only the NOTIFY can end the wait in time."""
    monkeypatch.setattr(client_module, "RECHECK_SECONDS", 3600.0)
    job_id = client.enqueue("w_notify")
    worker = claim(client, "w_notify")
    outcome: list[pgq.JobResult] = []
    waiter = threading.Thread(target=lambda: outcome.append(client.wait(job_id, timeout=120)))
    waiter.start()
    # Complete only once the waiter has watched the job (the flag is set).
    with psycopg.connect(client.dsn, autocommit=True) as conn:
        for _ in range(6000):
            if conn.execute("SELECT watched FROM pgq._jobs WHERE id = %s", (job_id,)).fetchone()[0]:
                break
            threading.Event().wait(0.01)
    assert client.complete(worker, [job_id], results=[[1, 2]]) == [job_id]
    waiter.join(timeout=60)
    assert not waiter.is_alive(), "the completion did not wake the waiter"
    assert outcome == [pgq.JobResult(job_id, "succeeded", [1, 2], None)]


def test_a_job_going_dead_wakes_the_waiter(client: pgq.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_module, "RECHECK_SECONDS", 3600.0)
    job_id = client.enqueue("w_dies", max_attempts=1)
    worker = claim(client, "w_dies")
    outcome: list[pgq.JobResult] = []
    waiter = threading.Thread(target=lambda: outcome.append(client.wait(job_id, timeout=120)))
    waiter.start()
    with psycopg.connect(client.dsn, autocommit=True) as conn:
        for _ in range(6000):
            if conn.execute("SELECT watched FROM pgq._jobs WHERE id = %s", (job_id,)).fetchone()[0]:
                break
            threading.Event().wait(0.01)
    assert client.fail(worker, job_id, "boom") == "dead"
    waiter.join(timeout=60)
    assert outcome == [pgq.JobResult(job_id, "dead", None, "boom")]


def test_jobs_nobody_waits_for_do_not_notify(client: pgq.Client) -> None:
    job_id = client.enqueue("w_quiet")
    worker = claim(client, "w_quiet")
    with psycopg.connect(client.dsn, autocommit=True) as listener:
        listener.execute("LISTEN pgq_finished")
        client.complete(worker, [job_id])
        listener.execute("SELECT 1")  # receive anything pending
        assert list(listener.notifies(timeout=0.5)) == []


def test_async_client_enqueues_waits_and_reads_results(dsn: str) -> None:
    async def scenario() -> None:
        async with pgq.AsyncClient(dsn) as client:
            job_id = await client.enqueue("w_async", {"x": 1}, priority=3)
            assert await client.job_status(job_id) == "queued"
            assert await client.result(job_id) is None
            story = await client.job(job_id)
            assert story is not None and story["payload"] == {"x": 1} and story["priority"] == 3
            with pytest.raises(TimeoutError):
                await client.wait(job_id, timeout=0.1)
            waiting = asyncio.create_task(client.wait(job_id, timeout=60))
            await asyncio.sleep(0.3)
            assert await client.cancel([job_id]) == 1
            assert (await waiting).status == "canceled"
            await client.configure("w_async", max_attempts=3)
            assert "w_async" in {q.entrypoint for q in await client.queues()}
            with pytest.raises(pgq.InvalidArgument, match="backoff_base"):
                await client.configure("w_async", backoff_base="soon")
            with pytest.raises(pgq.UnknownJob):
                await client.result(987654321)

    asyncio.run(scenario())


def test_async_client_joins_the_callers_transaction(dsn: str) -> None:
    async def scenario() -> int:
        async with pgq.AsyncClient(dsn) as client:
            async with await psycopg.AsyncConnection.connect(dsn) as conn:
                job_id = await client.enqueue("w_tx", conn=conn)
                await conn.rollback()
            return job_id

    job_id = asyncio.run(scenario())
    with pgq.Client(dsn) as client:
        assert client.job_status(job_id) is None


def test_async_and_sync_clients_have_the_same_methods() -> None:
    public = {n for n in vars(pgq.Client) if not n.startswith("_")}
    assert public - {n for n in vars(pgq.AsyncClient) if not n.startswith("_")} == set()
