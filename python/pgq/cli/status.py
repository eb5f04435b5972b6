"""`pgq status`: queues, recent statistics and workers, printed once or as a live dashboard."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import click
import psycopg
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.text import Text

from ..client import Client
from ..rows import QueueRow, StatsRow, SweepRow, WorkerRow
from .output import (
    build_table,
    dsn_option,
    handle_errors,
    job_count,
    latency,
    make_client,
    number,
    one_line,
    per_second,
    print_table,
    show,
)

LATENCIES = ("wait p50", "wait p95", "wait p99", "run p50", "run p95", "run p99")


@dataclass(frozen=True)
class Snapshot:
    queues: list[QueueRow]
    stats: list[StatsRow]
    workers: list[WorkerRow]
    taken_at: datetime
    # Succeeded per second over the last refresh interval and the last minute (--watch).
    recent: dict[str, Decimal] = field(default_factory=dict)
    minute: dict[str, Decimal] = field(default_factory=dict)


def take_snapshot(client: Client, since: str, interval: float | None = None) -> Snapshot:
    """The views now; with `interval`, also the rates over the last interval and minute."""
    rates: dict[str, dict[str, Decimal]] = {}
    if interval is not None:
        for key, window in (
            ("recent", timedelta(seconds=max(interval, 1.0))),
            ("minute", timedelta(minutes=1)),
        ):
            rates[key] = {s.entrypoint: s.per_second for s in client.stats(window)}
    return Snapshot(
        queues=client.queues(),
        stats=client.stats(since),
        workers=client.workers(),
        taken_at=datetime.now(timezone.utc),
        **rates,
    )


@click.command()
@dsn_option
@click.option(
    "--since",
    default="5 minutes",
    show_default=True,
    metavar="INTERVAL",
    help="The statistics window, PostgreSQL interval text.",
)
@click.option("--watch", is_flag=True, help="A live dashboard, refreshed until Ctrl-C.")
@click.option(
    "--interval",
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds between refreshes with --watch (default 2).",
)
@click.option("--iterations", type=click.IntRange(min=1), hidden=True, help="Stop after N refreshes.")
@handle_errors
def status(dsn: str | None, since: str, watch: bool, interval: float | None, iterations: int | None) -> None:
    """Show the queues (pgq.queues), statistics of the last 5 minutes (pgq.stats) and the
    workers (pgq.workers).

    With --watch: a dashboard of queue depths, jobs per second, wait and run percentiles
    and workers, refreshed every --interval seconds until Ctrl-C.
    """
    if not watch and (interval is not None or iterations is not None):
        raise ValueError("--interval and --iterations go with --watch")
    with make_client(dsn) as client:
        if watch:
            _watch(client, since, 2.0 if interval is None else interval, iterations)
            return
        snapshot = take_snapshot(client, since)
        # pgq.sweeps: a stopped pg_cron shows as sweeps that no longer run.
        sweeps: list[SweepRow] = client.sweeps()
    _print_once(snapshot, since)
    click.echo()
    print_table(
        "sweeps",
        ["sweep", "every", "last run", "age", "late"],
        [[s.sweep, s.every, s.last_run or "never", s.age, s.late or ""] for s in sweeps],
    )


# --- once ----------------------------------------------------------------------------------


def _print_once(snapshot: Snapshot, since: str) -> None:
    # pgq.queues has a row for an entrypoint with live jobs or settings only: one drained
    # a moment ago is listed from its statistics, with nothing queued and the defaults.
    queues = {q.entrypoint: q for q in snapshot.queues}
    rows: list[Sequence[object]] = []
    for name in sorted(queues.keys() | {s.entrypoint for s in snapshot.stats}):
        q = queues.get(name)
        if q is None:
            rows.append([name, 0, 0, 0, 0, 0, None, False, None, None])
            continue
        rows.append(
            [
                *(q.entrypoint, *_counts(q)),
                *(q.oldest_queued_age, q.paused, q.concurrency, per_second(q.rate)),
            ]
        )
    print_table(
        "queues",
        [
            *("entrypoint", "queued", "scheduled", "waiting", "running", "dead"),
            *("oldest queued age", "paused", "concurrency", "rate"),
        ],
        rows,
        right=("queued", "scheduled", "dead"),
    )
    click.echo()
    print_table(
        f"stats for the last {since}",
        ["entrypoint", "succeeded", "failed", "dead", "canceled", "per second", *LATENCIES],
        [
            [
                *(s.entrypoint, s.succeeded, s.failed, s.dead, s.canceled, number(s.per_second)),
                *(latency(s.wait_p50), latency(s.wait_p95), latency(s.wait_p99)),
                *(latency(s.run_p50), latency(s.run_p95), latency(s.run_p99)),
            ]
            for s in snapshot.stats
        ],
        right=("per second", *LATENCIES),
    )
    click.echo()
    print_table(
        "workers",
        ["name", "state", "heartbeat age", "jobs held"],
        [[w.name, w.state, w.heartbeat_age, w.jobs_held] for w in snapshot.workers],
    )


# --- watch ---------------------------------------------------------------------------------


def _watch(client: Client, since: str, interval: float, iterations: int | None) -> None:
    """Refresh the dashboard until Ctrl-C (or `iterations` refreshes). On a terminal, one
    rich Live display redrawn in place; piped, one snapshot after another.

    The first snapshot's errors end the command (a wrong DSN, a bad --since); later
    connection errors are shown in the dashboard, which keeps retrying.
    """
    console = Console()
    refreshes = 0
    last: Snapshot | None = None
    with contextlib.suppress(KeyboardInterrupt), contextlib.ExitStack() as stack:
        live = None
        if console.is_terminal:
            live = stack.enter_context(Live(console=console, auto_refresh=False))
        while True:
            error = None
            try:
                last = take_snapshot(client, since, interval)
            except psycopg.OperationalError as exc:
                if last is None:
                    raise
                error = one_line(exc)
            assert last is not None
            frame = dashboard(last, since, interval, error)
            refreshes += 1
            if live is not None:
                live.update(frame, refresh=True)
            else:
                if refreshes > 1:
                    click.echo()
                show(frame)
            if iterations is not None and refreshes >= iterations:
                break
            time.sleep(interval)


def dashboard(snapshot: Snapshot, since: str, interval: float, error: str | None = None) -> RenderableType:
    """One frame: a header, one row per entrypoint (depths, rate, latencies), the workers."""
    header = Text(
        f"pgq status at {snapshot.taken_at:%Y-%m-%d %H:%M:%S}Z; jobs succeeded per second over the last"
        f" {number(max(interval, 1))}s (now/s) and minute; counts and percentiles over the last {since};"
        f" every {number(interval)}s, Ctrl-C to quit",
        style="bold",
    )
    parts: list[RenderableType] = [header]
    if error is not None:
        parts.append(Text(f"error: {error} (showing the last snapshot; retrying)", style="red"))
    parts += [Text(), _entrypoints(snapshot), Text(), *_workers(snapshot.workers)]
    return Group(*parts)


def _entrypoints(snapshot: Snapshot) -> RenderableType:
    queues = {q.entrypoint: q for q in snapshot.queues}
    stats = {s.entrypoint: s for s in snapshot.stats}
    rows: list[Sequence[object]] = []
    for name in sorted(queues.keys() | stats.keys()):
        q, s = queues.get(name), stats.get(name)
        rows.append(
            [
                name,
                *(_counts(q) if q else (0, 0, 0, 0, 0)),
                q.oldest_queued_age if q else None,
                "paused" if q and q.paused else None,
                number(snapshot.recent.get(name, Decimal(0))),
                number(snapshot.minute.get(name, Decimal(0))),
                *((s.succeeded, s.failed) if s else (0, 0)),
                *(latency(v) for v in ((s.wait_p50, s.wait_p99, s.run_p50, s.run_p99) if s else [None] * 4)),
            ]
        )
    return build_table(
        "queues",
        [
            *("entrypoint", "queued", "scheduled", "waiting", "running", "dead", "oldest", "paused"),
            *("now/s", "1 min/s", "succeeded", "failed", "wait p50", "wait p99", "run p50", "run p99"),
        ],
        rows,
        right=(
            "queued",
            "scheduled",
            "dead",
            "oldest",
            "now/s",
            "1 min/s",
            "wait p50",
            "wait p99",
            "run p50",
            "run p99",
        ),
        squeeze=("entrypoint",),
        # Least useful first, left out while the table is wider than the terminal.
        drop=(
            "scheduled",
            "wait p50",
            "run p50",
            "waiting",
            "failed",
            "paused",
            "succeeded",
            "oldest",
            "run p99",
            "wait p99",
        ),
    )


def _counts(q: QueueRow) -> tuple[int | str, ...]:
    """queued, scheduled, waiting, running, dead; estimates (above the exact limit of
    pgq.queues) shown as ~1.0M. Only queued, scheduled and dead are ever estimated."""
    a = q.approximate
    return (job_count(q.queued, a), job_count(q.scheduled, a), q.waiting, q.running, job_count(q.dead, a))


def _workers(workers: list[WorkerRow]) -> list[RenderableType]:
    """The alive workers, and how many there are in each state."""
    alive = [w for w in workers if w.state == "alive"]
    counts = {state: sum(w.state == state for w in workers) for state in ("alive", "dead", "stopped")}
    summary = Text("workers: " + ", ".join(f"{n} {state}" for state, n in counts.items()))
    if not alive:
        return [summary]
    table = build_table(
        "alive workers",
        ["name", "entrypoints", "heartbeat age", "jobs held"],
        [[w.name, ", ".join(w.entrypoints), w.heartbeat_age, w.jobs_held] for w in alive],
    )
    return [table, summary]
