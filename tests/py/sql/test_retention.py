"""The outcome log at volume: pgq.prune (retention) and pgq.stats.

Old history is made directly: the old daily partitions are created as the superuser (as
pgq._ensure_partitions would have, had the queue been running then) and filled with
INSERT ... SELECT generate_series. Each test knows exactly which rows are past retention.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import date, datetime, timedelta, timezone

import psycopg
import pytest
from psycopg import sql


def utc_today(conn: psycopg.Connection) -> date:
    return conn.execute("SELECT (now() AT TIME ZONE 'UTC')::date").fetchone()[0]


def skip_past_midnight(conn: psycopg.Connection, today: date) -> None:
    """The days a test filled are counted from the day it began: if midnight (UTC) passed
    since, its expectations moved by a day (one run in thousands)."""
    if utc_today(conn) != today:
        pytest.skip("midnight UTC passed during the test")


def ensure_partition(conn: psycopg.Connection, day: date) -> str:
    name = f"_outcomes_{day:%Y%m%d}"
    start = datetime(day.year, day.month, day.day, tzinfo=timezone.utc)
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS pgq.{} PARTITION OF pgq._outcomes FOR VALUES FROM ({}) TO ({})"
        ).format(sql.Identifier(name), sql.Literal(start), sql.Literal(start + timedelta(days=1)))
    )
    # As pgq._ensure_partitions makes it: owned by pgq_owner, as pgq.prune runs.
    conn.execute(sql.SQL("ALTER TABLE pgq.{} OWNER TO pgq_owner").format(sql.Identifier(name)))
    return name


def partitions(conn: psycopg.Connection) -> set[str]:
    rows = conn.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = 'pgq._outcomes'::regclass"
    ).fetchall()
    return {r[0] for r in rows}


def fill_days(
    conn: psycopg.Connection, entrypoint: str, days_ago: list[int], rows: int, first_id: int = 1
) -> None:
    """`rows` succeeded outcomes spread evenly over the given UTC days (by days ago),
    at deterministic times of day across the whole day."""
    conn.execute(
        """
        INSERT INTO pgq._outcomes (
            job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, started_at, finished_at
        )
        SELECT g, %(ep)s, 'succeeded', 0, 0, 1, t - interval '2 seconds', t - interval '1 second', t
        FROM generate_series(%(first)s::bigint, %(first)s::bigint + %(rows)s - 1) AS g,
        LATERAL (
            SELECT (((now() AT TIME ZONE 'UTC')::date - (%(days)s::int[])[1 + g %% %(n)s])::timestamp
                    AT TIME ZONE 'UTC') + make_interval(secs => (g * 7919) %% 86400) AS t
        ) AS x
        """,
        {"ep": entrypoint, "first": first_id, "rows": rows, "days": days_ago, "n": len(days_ago)},
    )


def count(conn: psycopg.Connection, where: str = "TRUE", params: tuple[object, ...] = ()) -> int:
    return conn.execute(f"SELECT count(*) FROM pgq._outcomes WHERE {where}", params).fetchone()[0]


# --- pgq.prune --------------------------------------------------------------------------


def test_prune_drops_partitions_past_the_default_retention(dsn: str, conn: psycopg.Connection) -> None:
    today = utc_today(conn)
    old_days = list(range(1, 11))
    for d in old_days:
        ensure_partition(conn, today - timedelta(days=d))
    fill_days(conn, "old", old_days, 200_000)
    assert count(conn) == 200_000

    with psycopg.connect(dsn) as tx:  # one transaction: one now() for the count and the prune
        expired = count(tx, "finished_at < now() - interval '7 days'")
        removed = tx.execute("SELECT pgq.prune()").fetchone()[0]
        tx.commit()
    skip_past_midnight(conn, today)
    # Days 8 to 10 ago are wholly past 7 days (60k rows), and part of day 7.
    assert 60_000 <= expired <= 80_000
    assert removed == expired
    assert count(conn) == 200_000 - expired
    assert count(conn, "finished_at < now() - interval '7 days' - interval '1 minute'") == 0

    left = partitions(conn)
    for d in old_days:
        name = f"_outcomes_{today - timedelta(days=d):%Y%m%d}"
        assert (name in left) == (d < 8), f"{name} (day -{d}) {'kept' if name in left else 'dropped'}"
    # The coming days' partitions are there (prune creates them).
    assert {f"_outcomes_{today + timedelta(days=d):%Y%m%d}" for d in range(4)} <= left
    # Again: only what expired since (rows of day -7 keep passing 7 days as the clock moves,
    # about one every 4 s here).
    with psycopg.connect(dsn) as tx:
        since = count(tx, "finished_at < now() - interval '7 days'")
        assert tx.execute("SELECT pgq.prune()").fetchone()[0] == since
    assert since < 100


def test_per_entrypoint_retention_removes_only_that_entrypoints_old_rows(
    dsn: str, conn: psycopg.Connection
) -> None:
    """'short' keeps 2 days, 'long' the default 7, 'keep' 30 days: over 6 old days nothing is
    past 7 days, so only 'short' loses rows (those of days 3 to 6 ago: 520k), in batches of
    10000, at most 50 batches a call, over as many calls as it takes."""
    today = utc_today(conn)
    for d in range(0, 7):
        ensure_partition(conn, today - timedelta(days=d))
    conn.execute("SELECT pgq.configure('short', retention => '2 days')")
    conn.execute("SELECT pgq.configure('keep', retention => '30 days')")
    fill_days(conn, "short", [1, 3, 4, 5, 6], 650_000)
    fill_days(conn, "long", [1, 2, 3, 4, 5, 6], 30_000, first_id=10_000_000)
    fill_days(conn, "keep", [1, 2, 3, 4, 5, 6], 30_000, first_id=20_000_000)
    partitions_before = partitions(conn)

    expired = count(conn, "entrypoint = 'short' AND finished_at < now() - interval '2 days'")
    assert expired == 520_000
    calls = [conn.execute("SELECT pgq.prune()").fetchone()[0]]
    while calls[-1] and len(calls) < 10:
        calls.append(conn.execute("SELECT pgq.prune()").fetchone()[0])
    skip_past_midnight(conn, today)
    assert calls[-1] == 0
    assert sum(calls) == expired, calls
    # One call removes at most 50 batches of 10000: this took more than one.
    assert all(0 < n <= 500_000 for n in calls[:-1]) and len(calls) >= 3, calls

    assert count(conn, "entrypoint = 'short'") == 130_000
    assert count(conn, "entrypoint = 'short' AND finished_at < now() - interval '2 days'") == 0
    assert count(conn, "entrypoint = 'long'") == 30_000
    assert count(conn, "entrypoint = 'keep'") == 30_000
    assert partitions(conn) >= partitions_before, "no partition holds only expired rows of every entrypoint"


def test_a_longer_retention_keeps_old_partitions_and_its_rows(conn: psycopg.Connection) -> None:
    """With one entrypoint kept 30 days, the 10-day-old partition is not dropped: only the
    rows of the others are deleted from it."""
    today = utc_today(conn)
    day = today - timedelta(days=10)
    name = ensure_partition(conn, day)
    conn.execute("SELECT pgq.configure('keep', retention => '30 days')")
    fill_days(conn, "keep", [10], 5_000)
    fill_days(conn, "other", [10], 15_000, first_id=1_000_000)
    assert conn.execute("SELECT pgq.prune()").fetchone()[0] == 15_000
    assert name in partitions(conn)
    assert count(conn, "entrypoint = 'keep'") == 5_000
    assert count(conn, "entrypoint = 'other'") == 0
    # Without the long retention, the partition goes as a whole.
    conn.execute("SELECT pgq.configure('keep', retention => '7 days')")
    assert conn.execute("SELECT pgq.prune()").fetchone()[0] == 5_000
    assert name not in partitions(conn)


# --- pgq.stats --------------------------------------------------------------------------


def percentile_cont(values: list[float], q: float) -> float:
    """PostgreSQL's percentile_cont: linear interpolation between the closest ranks."""
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


@pytest.fixture
def big_log(conn: psycopg.Connection) -> None:
    """1M outcomes in older partitions (days 2 to 6 ago: yesterday's last minutes would fall
    in a 5-minute window just after midnight), 10k in the last 4 minutes and 1k in the 5
    minutes before (yesterday's partition takes those that are older than midnight)."""
    today = utc_today(conn)
    for d in range(1, 7):
        ensure_partition(conn, today - timedelta(days=d))
    fill_days(conn, "big", [2, 3, 4, 5, 6], 1_000_000)
    # Recent: two entrypoints, every outcome kind, finished within the last 4 minutes, with
    # varied waits and run times.
    conn.execute(
        """
        INSERT INTO pgq._outcomes (
            job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, started_at,
            finished_at, error, fatal
        )
        SELECT g,
               CASE WHEN g % 3 = 0 THEN 'recent_a' ELSE 'recent_b' END,
               CASE WHEN g % 10 < 7 THEN 'succeeded' WHEN g % 10 < 9 THEN 'failed' ELSE 'canceled' END,
               0, 0, 1,
               f - run - wait, f - run, f,
               CASE WHEN g % 10 >= 7 THEN 'err' END,
               g % 20 = 7
        FROM generate_series(5000001, 5011000) AS g,
        LATERAL (
            -- The last 1000 finished 6 to 10 minutes ago: outside a 5-minute window.
            SELECT clock_timestamp() - make_interval(
                       secs => CASE WHEN g > 5010000 THEN 360 + g % 240 ELSE (g * 37) % 240 END
                   ) AS f,
                   make_interval(secs => ((g * 13) % 1000) / 100.0) AS wait,
                   make_interval(secs => ((g * 7) % 500) / 1000.0) AS run
        ) AS x
        """
    )
    conn.execute("ANALYZE pgq._outcomes")


@pytest.mark.usefixtures("big_log")
def test_stats_over_a_large_log_is_fast_and_exact(dsn: str, conn: psycopg.Connection) -> None:
    assert count(conn) == 1_011_000
    conn.execute("SELECT * FROM pgq.stats('5 minutes')").fetchall()  # warm the cache
    timings = []
    for _ in range(3):
        t0 = time.perf_counter()
        conn.execute("SELECT * FROM pgq.stats('5 minutes')").fetchall()
        timings.append(time.perf_counter() - t0)
    assert statistics.median(timings) < 1.0, f"pgq.stats took {timings} s on a 1M-row log"

    with psycopg.connect(dsn) as tx:  # one transaction: stats and the raw rows share now()
        cur = tx.execute("SELECT * FROM pgq.stats('5 minutes')")
        names = [c.name for c in cur.description]
        stats = {r[0]: dict(zip(names, r, strict=True)) for r in cur.fetchall()}
        raw = tx.execute(
            "SELECT entrypoint, outcome, fatal,"
            " extract(epoch FROM started_at - enqueued_at)::float8,"
            " extract(epoch FROM finished_at - started_at)::float8"
            " FROM pgq._outcomes WHERE finished_at >= now() - interval '5 minutes'"
        ).fetchall()
        tx.rollback()

    by_ep: dict[str, list[tuple[str, bool, float, float]]] = defaultdict(list)
    for ep, outcome, fatal, wait_s, run_s in raw:
        by_ep[ep].append((outcome, fatal, wait_s, run_s))
    assert set(by_ep) == {"recent_a", "recent_b"}, "old rows leaked into the window"
    assert set(stats) == set(by_ep)
    assert sum(len(v) for v in by_ep.values()) == 10_000
    assert sum(s["succeeded"] + s["failed"] + s["canceled"] for s in stats.values()) == 10_000
    for ep, rows in by_ep.items():
        s = stats[ep]
        ok = [r for r in rows if r[0] == "succeeded"]
        assert s["succeeded"] == len(ok)
        assert s["failed"] == sum(1 for r in rows if r[0] == "failed")
        assert s["dead"] == sum(1 for r in rows if r[1])
        assert s["canceled"] == sum(1 for r in rows if r[0] == "canceled")
        assert s["dead"] > 0 and s["canceled"] > 0
        assert float(s["per_second"]) == pytest.approx(len(ok) / 300, rel=1e-9)
        for key, index in (("wait", 2), ("run", 3)):
            values = [r[index] for r in ok]
            for q in (50, 95, 99):
                got = s[f"{key}_p{q}"].total_seconds()
                assert got == pytest.approx(percentile_cont(values, q / 100), abs=2e-6), (ep, key, q)


# --- pruning next to readers of the log ---------------------------------------------------


def test_prune_does_not_stall_completions_behind_a_reader_of_the_log(
    dsn: str, conn: psycopg.Connection
) -> None:
    today = utc_today(conn)
    ensure_partition(conn, today - timedelta(days=10))
    fill_days(conn, "old", [10], 1_000)
    job = conn.execute("SELECT pgq.enqueue('stall')").fetchone()[0]
    wid = conn.execute("SELECT pgq.register_worker('stall', ARRAY['stall'])").fetchone()[0]
    assert conn.execute("SELECT id FROM pgq.claim(%s::uuid, ARRAY['stall'])", (wid,)).fetchall() == [(job,)]

    with psycopg.connect(dsn) as reader, ThreadPoolExecutor(max_workers=2) as pool:
        # A dashboard or report: reads recent outcomes and keeps its transaction open.
        reader.execute("SELECT * FROM pgq.stats('5 minutes')").fetchall()

        def run(query: str, params: tuple[object, ...] = ()) -> tuple[list[tuple[object, ...]], float]:
            with psycopg.connect(dsn, autocommit=True) as c:
                t0 = time.monotonic()
                try:
                    rows = c.execute(query, params).fetchall()
                except (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled) as exc:
                    rows = [(type(exc).__name__,)]
                return rows, time.monotonic() - t0

        pruning = pool.submit(run, "SELECT pgq.prune()")
        time.sleep(0.5)  # prune is running (or waiting) now
        completing = pool.submit(run, "SELECT * FROM pgq.complete(%s::uuid, ARRAY[%s]::bigint[])", (wid, job))
        try:
            done, seconds = completing.result(timeout=3)
        except FutureTimeout:
            done, seconds = None, None
        finally:
            reader.rollback()  # release the reader, whatever happened
        pruning.result(timeout=30)
        completing.result(timeout=30)
    assert done == [(job,)] and seconds < 1.0, "pgq.complete waited for pgq.prune's lock"
