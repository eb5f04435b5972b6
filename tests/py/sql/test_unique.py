"""Uniqueness across sessions: dedupe_scope 'queued' while the standing job runs, a
dedupe_window that a concurrent completion fills, dedupe_mode 'replace' racing a claim,
each interleaving forced with held transactions; the Client's Enqueued, the AsyncClient,
enqueue_batch's dedupe_keys, the isolation check and `pgq enqueue --dedupe-*`.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

import pgq
from pgq import Client, Enqueued
from pgq.cli.main import main
from support.workers import wait_until_waiting_on_lock
from test_sql_concurrency import complete, register


@pytest.fixture
def client(dsn: str) -> Iterator[Client]:
    with Client(dsn) as c:
        yield c


def enqueue_job(c: psycopg.Connection, ep: str, key: str, **options: Any) -> tuple[int, bool, bool]:
    names = "".join(f", {name} => %({name})s" for name in options if name != "payload")
    row = c.execute(
        "SELECT id, created, replaced FROM pgq.enqueue_job("
        f"%(ep)s, %(payload)s::jsonb, dedupe_key => %(key)s{names})",
        {"ep": ep, "key": key, "payload": options.pop("payload", None), **options},
    ).fetchone()
    assert row is not None
    return row[0], row[1], row[2]


def claim_ids(c: psycopg.Connection, worker: uuid.UUID, ep: str) -> list[int]:
    return [r[0] for r in c.execute("SELECT id FROM pgq.claim(%s, ARRAY[%s], 10)", (worker, ep))]


def start(conn: psycopg.Connection, ep: str, key: str) -> tuple[uuid.UUID, int]:
    """Enqueue a job with the key and claim it: (worker, job id), the job running."""
    job_id = enqueue_job(conn, ep, key)[0]
    worker = register(conn, f"w-{ep}", [ep])
    assert claim_ids(conn, worker, ep) == [job_id]
    return worker, job_id


def race(
    dsn: str,
    watcher: psycopg.Connection,
    first: Callable[[psycopg.Connection], Any],
    second: Callable[[psycopg.Connection], Any],
    *,
    commit_first: bool = True,
) -> tuple[Any, Any]:
    """Session A runs `first` and holds its transaction open; session B runs `second`,
    which must wait for A's locks; then A commits (or rolls back) and B finishes and
    commits. Returns both results."""
    with psycopg.connect(dsn) as a, psycopg.connect(dsn) as b:
        first_result = first(a)
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(second, b)
            blocked = wait_until_waiting_on_lock(watcher, b.info.backend_pid)
            early = pending.done()
            if commit_first:
                a.commit()
            else:
                a.rollback()
            second_result = pending.result(timeout=30)
        b.commit()
    assert blocked and not early, "the second session did not wait for the first"
    return first_result, second_result


def keyed_jobs(conn: psycopg.Connection, ep: str) -> list[tuple[int, str, str | None]]:
    return conn.execute(
        "SELECT id, status, dedupe_key FROM pgq._jobs WHERE entrypoint = %s ORDER BY id", (ep,)
    ).fetchall()


# --- scope 'queued' -----------------------------------------------------------------------


def test_scope_queued_two_sessions_while_the_job_runs_make_one_new_job(
    dsn: str, conn: psycopg.Connection
) -> None:
    _, running = start(conn, "sq", "k")
    first, second = race(
        dsn,
        conn,
        lambda c: enqueue_job(c, "sq", "k", dedupe_scope="queued"),
        lambda c: enqueue_job(c, "sq", "k", dedupe_scope="queued"),
    )
    assert first[1] is True and first[0] != running
    assert second == (first[0], False, False), "the second call found the job the first made"
    assert keyed_jobs(conn, "sq") == [(running, "running", None), (first[0], "queued", "k")]


def test_scope_queued_first_rolls_back_second_makes_the_job(dsn: str, conn: psycopg.Connection) -> None:
    _, running = start(conn, "sq_rb", "k")
    first, second = race(
        dsn,
        conn,
        lambda c: enqueue_job(c, "sq_rb", "k", dedupe_scope="queued"),
        lambda c: enqueue_job(c, "sq_rb", "k", dedupe_scope="queued"),
        commit_first=False,
    )
    assert second[1] is True and second[0] not in (first[0], running)
    assert keyed_jobs(conn, "sq_rb") == [(running, "running", None), (second[0], "queued", "k")]


def test_scope_queued_the_job_that_gave_its_key_up_can_fail_and_retry(conn: psycopg.Connection) -> None:
    worker, running = start(conn, "sq_fail", "k")
    fresh = enqueue_job(conn, "sq_fail", "k", dedupe_scope="queued")[0]
    assert (
        conn.execute("SELECT pgq.fail(%s, %s, 'boom', interval '0')", (worker, running)).fetchone()[0]
        == "queued"
    )
    assert keyed_jobs(conn, "sq_fail") == [(running, "queued", None), (fresh, "queued", "k")]


# --- windows ------------------------------------------------------------------------------


def test_window_sees_a_success_committed_while_the_enqueue_waited(dsn: str, conn: psycopg.Connection) -> None:
    """Session A completes the running job and holds its transaction; B's enqueue with a
    window waits on the key, and when A commits, B finds the success, not a free key."""
    worker, running = start(conn, "win", "k")
    done, enqueued = race(
        dsn,
        conn,
        lambda c: complete(c, worker, [running]),
        lambda c: enqueue_job(c, "win", "k", dedupe_window=timedelta(hours=1)),
    )
    assert done == [running]
    assert enqueued == (running, False, False)
    assert keyed_jobs(conn, "win") == []


def test_window_without_history_two_sessions_one_job(dsn: str, conn: psycopg.Connection) -> None:
    first, second = race(
        dsn,
        conn,
        lambda c: enqueue_job(c, "win2", "k", dedupe_window=timedelta(hours=1)),
        lambda c: enqueue_job(c, "win2", "k", dedupe_window=timedelta(hours=1)),
    )
    assert first[1] is True and second == (first[0], False, False)


def test_window_needs_read_committed(dsn: str, client: Client) -> None:
    with psycopg.connect(dsn) as c:
        c.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        with pytest.raises(pgq.WrongIsolation, match="dedupe_window needs READ COMMITTED"):
            client.enqueue_job("win3", dedupe_key="k", dedupe_window="1 hour", conn=c)
        c.rollback()
        # Without a window a REPEATABLE READ transaction may enqueue with a key.
        assert client.enqueue_job("win3", dedupe_key="k", conn=c).created


# --- replace ------------------------------------------------------------------------------


def test_replace_waits_for_a_claim_in_progress_and_keeps_the_running_job(
    dsn: str, conn: psycopg.Connection
) -> None:
    job_id = enqueue_job(conn, "rep", "k", payload='{"v": 1}')[0]
    worker = register(conn, "w-rep", ["rep"])
    claimed, replaced = race(
        dsn,
        conn,
        lambda c: claim_ids(c, worker, "rep"),
        lambda c: enqueue_job(c, "rep", "k", payload='{"v": 2}', dedupe_mode="replace"),
    )
    assert claimed == [job_id]
    assert replaced == (job_id, False, False), "a job that started is not replaced"
    payload = conn.execute("SELECT payload FROM pgq._jobs WHERE id = %s", (job_id,)).fetchone()[0]
    assert payload == {"v": 1}


def test_a_claim_skips_a_job_being_replaced_then_runs_the_new_payload(
    dsn: str, conn: psycopg.Connection
) -> None:
    job_id = enqueue_job(conn, "rep2", "k", payload='{"v": 1}')[0]
    worker = register(conn, "w-rep2", ["rep2"])
    with psycopg.connect(dsn) as a:
        assert enqueue_job(a, "rep2", "k", payload='{"v": 2}', dedupe_mode="replace") == (job_id, False, True)
        assert claim_ids(conn, worker, "rep2") == [], "the row being replaced is skipped, not run stale"
        a.commit()
    rows = conn.execute("SELECT id, payload FROM pgq.claim(%s, ARRAY['rep2'], 10)", (worker,)).fetchall()
    assert rows == [(job_id, {"v": 2})]


def test_replace_two_sessions_the_last_commit_wins(dsn: str, conn: psycopg.Connection) -> None:
    job_id = enqueue_job(conn, "rep3", "k", payload='{"v": 1}')[0]
    first, second = race(
        dsn,
        conn,
        lambda c: enqueue_job(c, "rep3", "k", payload='{"v": 2}', dedupe_mode="replace"),
        lambda c: enqueue_job(c, "rep3", "k", payload='{"v": 3}', dedupe_mode="replace"),
    )
    assert first == second == (job_id, False, True)
    assert conn.execute("SELECT payload FROM pgq._jobs WHERE id = %s", (job_id,)).fetchone()[0] == {"v": 3}


# --- the clients and the CLI --------------------------------------------------------------


def test_client_enqueue_job_returns_enqueued_and_enqueue_still_an_int(
    client: Client, conn: psycopg.Connection
) -> None:
    first = client.enqueue_job("cl", {"v": 1}, dedupe_key="k")
    assert first == Enqueued(id=first.id, created=True, replaced=False)
    assert isinstance(first.id, int)
    with pytest.raises(AttributeError):
        first.id = 0  # type: ignore[misc]
    assert client.enqueue_job("cl", {"v": 2}, dedupe_key="k") == Enqueued(first.id, False, False)
    assert client.enqueue_job("cl", {"v": 3}, dedupe_key="k", dedupe_mode="replace") == Enqueued(
        first.id, False, True
    )
    same = client.enqueue("cl", {"v": 4}, dedupe_key="k", dedupe_scope="queued")
    assert type(same) is int and same == first.id
    assert client.job(first.id)["payload"] == {"v": 3}


def test_client_window_as_text_or_timedelta_and_bad_values(client: Client, conn: psycopg.Connection) -> None:
    worker, running = start(conn, "cl_win", "k")
    complete(conn, worker, [running])
    assert client.enqueue_job("cl_win", dedupe_key="k", dedupe_window="1 hour") == Enqueued(
        running, False, False
    )
    assert client.enqueue("cl_win", dedupe_key="k", dedupe_window=timedelta(minutes=5)) == running
    with pytest.raises(pgq.InvalidArgument, match="dedupe_window: 'an hour' is not an interval"):
        client.enqueue("cl_win", dedupe_key="k", dedupe_window="an hour")
    with pytest.raises(pgq.InvalidArgument, match="dedupe_scope"):
        client.enqueue_job("cl_win", dedupe_key="k", dedupe_scope="started")
    with pytest.raises(pgq.InvalidArgument, match="dedupe_mode: needs a dedupe_key"):
        client.enqueue("cl_win", dedupe_mode="replace")


def test_client_enqueue_batch_with_dedupe_keys(client: Client, conn: psycopg.Connection) -> None:
    ids = client.enqueue_batch("cl_batch", [1, 2, 3], dedupe_keys=["a", None, "a"], dedupe_mode="replace")
    assert ids[0] == ids[2] and len(set(ids)) == 2
    assert client.job(ids[0])["payload"] == 3
    again = client.enqueue_batch("cl_batch", [4], dedupe_keys=["a"])
    assert again == [ids[0]]


def test_async_client_enqueue_job(dsn: str) -> None:
    async def scenario() -> tuple[pgq.Enqueued, pgq.Enqueued, int]:
        async with pgq.AsyncClient(dsn) as client:
            first = await client.enqueue_job("async_u", {"v": 1}, dedupe_key="k")
            second = await client.enqueue_job("async_u", {"v": 2}, dedupe_key="k", dedupe_mode="replace")
            plain = await client.enqueue("async_u", {"v": 3}, dedupe_key="k")
            return first, second, plain

    first, second, plain = asyncio.run(scenario())
    assert first.created and not first.replaced
    assert second == Enqueued(first.id, False, True)
    assert plain == first.id


def test_cli_enqueue_dedupe_options(dsn: str) -> None:
    def run(*args: str) -> Any:
        return CliRunner().invoke(main, ["enqueue", "--dsn", dsn, *args])

    first = run("cli_u", '{"v": 1}', "--dedupe-key", "k")
    assert first.exit_code == 0, first.output
    assert first.stderr == ""
    replaced = run(
        "cli_u", '{"v": 2}', "--dedupe-key", "k", "--dedupe-mode", "replace", "--dedupe-scope", "queued"
    )
    assert replaced.exit_code == 0 and replaced.stdout == first.stdout
    assert "replaced job" in replaced.stderr
    kept = run("cli_u", "--dedupe-key", "k", "--dedupe-window", "1 hour")
    assert kept.stdout == first.stdout and "not created" in kept.stderr
    bad = run("cli_u", "--dedupe-key", "k", "--dedupe-scope", "started")
    assert bad.exit_code == 2
    refused = run("cli_u", "--dedupe-mode", "replace")
    assert refused.exit_code == 1 and "needs a dedupe_key" in refused.stderr
    counted = run("cli_u", "--count", "2", "--dedupe-scope", "queued")
    assert counted.exit_code == 1 and "--count cannot be combined" in counted.stderr


# --- the window's lookup plan ---------------------------------------------------------------

# The window lookup of pgq.enqueue_job (sql/functions/enqueue_job.sql).
WINDOW_QUERY = """
    SELECT o.job_id FROM pgq._outcomes AS o
    WHERE o.entrypoint = $1 AND o.dedupe_key = $2
      AND o.dedupe_key IS NOT NULL AND o.outcome = 'succeeded' AND o.finished_at >= now() - $3::interval
    ORDER BY o.finished_at DESC
    LIMIT 1
"""


def test_window_lookup_uses_the_partial_index_on_a_large_log(conn: psycopg.Connection) -> None:
    """200000 outcomes, 2000 of them with a key: the lookup (as the function's generic plan)
    probes _outcomes_dedupe_idx in every partition that holds rows, never scans them. (Empty
    partitions, never analysed, may show a Seq Scan of nothing.)"""
    conn.execute(
        "INSERT INTO pgq._outcomes (job_id, entrypoint, outcome, priority, attempt, deliveries,"
        " enqueued_at, finished_at, dedupe_key)"
        " SELECT g, 'plan_' || (g % 10), 'succeeded', 0, 0, 1, now() - interval '1 hour',"
        "        now() - g * interval '10 milliseconds', CASE WHEN g % 100 = 0 THEN 'k' || g END"
        " FROM generate_series(1, 200000) AS g"
    )
    conn.execute("ANALYZE pgq._outcomes")
    with conn.transaction():
        conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE window_lookup (text, text, interval) AS {WINDOW_QUERY}")
        try:
            plan = conn.execute(
                "EXPLAIN (FORMAT JSON) EXECUTE window_lookup('plan_0', 'k100', '1 hour')"
            ).fetchone()[0]
        finally:
            conn.execute("DEALLOCATE window_lookup")
    filled = {r[0] for r in conn.execute("SELECT DISTINCT tableoid::regclass::text FROM pgq._outcomes")}
    scans = {name.removeprefix("pgq."): node for name, node in _scans(plan[0]["Plan"])}
    for partition in filled:
        node = scans[partition.removeprefix("pgq.")]
        assert node["Node Type"] in ("Index Scan", "Index Only Scan"), node
        assert "dedupe" in node["Index Name"], node


def _scans(node: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(relation, plan node) of every scan in a JSON plan."""
    if "Relation Name" in node:
        yield node["Relation Name"], node
    for child in node.get("Plans", []):
        yield from _scans(child)
