"""The `pgq` command line: a thin click layer over pgq.migrate and pgq.Client."""

from __future__ import annotations

import functools
import json
import logging
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import click
import psycopg
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from . import migrate
from .client import LIVE_STATUSES, Client, QueueRow
from .dsn import resolve_dsn
from .errors import PgqError
from .worker_cli import worker_command

dsn_option = click.option(
    "--dsn",
    envvar="PGQ_DSN",
    default=None,
    help="libpq connection string (default: $PGQ_DSN, then PG* variables).",
)


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """One clear line and a non-zero exit on failure; the traceback only with --debug."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (PgqError, psycopg.Error, ValueError, FileNotFoundError) as exc:
            if click.get_current_context().find_root().params.get("debug"):
                raise
            click.echo(f"error: {_one_line(exc)}", err=True)
            sys.exit(1)

    return wrapper


def _one_line(exc: BaseException) -> str:
    """The error as one line: a database error's primary message and hint, without the
    LINE/caret context psycopg appends."""
    text = str(exc)
    if isinstance(exc, psycopg.Error) and exc.diag.message_primary:
        text = exc.diag.message_primary
        if exc.diag.message_hint:
            text = f"{text} (hint: {exc.diag.message_hint})"
    return " ".join(text.split())


@click.group()
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logs.")
def main(debug: bool) -> None:
    """pgq: a job queue that lives inside PostgreSQL."""
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


@main.command()
@dsn_option
@click.option("--no-cron", is_flag=True, help="Do not schedule the sweeps with pg_cron.")
@handle_errors
def install(dsn: str | None, no_cron: bool) -> None:
    """Install pgq into a database (idempotent; upgrades an older install)."""
    for line in migrate.install(resolve_dsn(dsn), cron=not no_cron):
        click.echo(line)


@main.command()
@dsn_option
@handle_errors
def upgrade(dsn: str | None) -> None:
    """Apply pending migrations and refresh pgq's functions."""
    for line in migrate.upgrade(resolve_dsn(dsn)):
        click.echo(line)


@main.command()
@dsn_option
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@handle_errors
def uninstall(dsn: str | None, yes: bool) -> None:
    """Remove pgq's schema, every job in it, and its pg_cron jobs."""
    if not yes:
        click.confirm("Drop schema pgq and every job in it?", abort=True)
    for line in migrate.uninstall(resolve_dsn(dsn)):
        click.echo(line)


# --- queue administration ----------------------------------------------------------------

BATCH = 10000  # enqueue --count: jobs per pgq.enqueue_batch call (and per transaction)


def _client(dsn: str | None) -> Client:
    return Client(dsn, min_size=1, max_size=1)


def _duration(td: timedelta | None) -> str:
    """A short human duration: 4.2s, 3m05s, 2h10m00s, 7d00h00m."""
    if td is None:
        return "-"
    secs = td.total_seconds()
    if secs < 0:
        return "-" + _duration(-td)
    if secs < 60:
        return f"{secs:.0f}s" if secs == int(secs) or secs >= 10 else f"{secs:.1f}s"
    minutes, sec = divmod(int(secs), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours:02d}h{minutes:02d}m"
    if hours:
        return f"{hours}h{minutes:02d}m{sec:02d}s"
    return f"{minutes}m{sec:02d}s"


def _relative(when: datetime | None) -> str:
    if when is None:
        return "-"
    delta = when - datetime.now(timezone.utc)
    if abs(delta) < timedelta(seconds=1):
        return "now"
    return f"in {_duration(delta)}" if delta > timedelta(0) else f"{_duration(-delta)} ago"


def _table(title: str, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Print an aligned table; numbers right-aligned. Cells are plain text, never markup."""
    if not rows:
        click.echo(f"{title}: none")
        return
    table = Table(
        title=Text(title),
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
    )
    for i, header in enumerate(headers):
        values = [row[i] for row in rows if row[i] is not None]
        numeric = bool(values) and all(type(v) is int for v in values)
        table.add_column(header, justify="right" if numeric else "left")
    for row in rows:
        table.add_row(*(Text(_cell(value)) for value in row))
    console = Console()
    if console.is_terminal:
        console.print(table)
        return
    # Piped or captured: no wrapping at 80 columns, no trailing blanks.
    console = Console(width=10000, no_color=True)
    with console.capture() as captured:
        console.print(table)
    click.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, timedelta):
        return _duration(value)
    return str(value)


@main.command()
@dsn_option
@handle_errors
def status(dsn: str | None) -> None:
    """Show the queues (pgq.queues) and the workers (pgq.workers)."""
    with _client(dsn) as client:
        queues, workers = client.queues(), client.workers()
    _table(
        "queues",
        [
            *("entrypoint", "queued", "scheduled", "waiting", "running", "dead"),
            *("oldest queued age", "paused", "concurrency"),
        ],
        [
            [
                *(q.entrypoint, q.queued, q.scheduled, q.waiting, q.running, q.dead),
                *(q.oldest_queued_age, q.paused, q.concurrency),
            ]
            for q in queues
        ],
    )
    click.echo()
    _table(
        "workers",
        ["name", "state", "heartbeat age", "jobs held"],
        [[w.name, w.state, w.heartbeat_age, w.jobs_held] for w in workers],
    )


def _parse_payload(text: str | None) -> Any:
    if text is None:
        return None
    if text == "-":
        text = sys.stdin.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"PAYLOAD_JSON is not valid JSON: {exc}") from None


def _parse_run_at(run_at: str | None, delay: float | None) -> datetime | timedelta | None:
    if run_at is not None and delay is not None:
        raise ValueError("--run-at and --delay exclude each other; pass one")
    if delay is not None:
        if delay < 0:
            raise ValueError(f"--delay must not be negative, got {delay}")
        return timedelta(seconds=delay)
    if run_at is None:
        return None
    text = run_at.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--run-at {run_at!r} is not an ISO 8601 time, e.g. 2030-01-31T09:00Z") from None
    return when if when.utcoffset() is not None else when.astimezone()


@main.command()
@dsn_option
@click.argument("entrypoint")
@click.argument("payload_json", required=False)
@click.option("--priority", type=int, default=0, show_default=True, help="Higher runs first.")
@click.option("--run-at", help="Not before this ISO 8601 time (local time without an offset).")
@click.option("--delay", type=float, help="Not before this many seconds from now.")
@click.option("--dedupe-key", help="Do not duplicate a live job with this key.")
@click.option("--max-attempts", type=int, help="Runs before the job is dead.")
@click.option("--count", type=click.IntRange(min=1), help="Enqueue this many copies, in batches.")
@handle_errors
def enqueue(
    dsn: str | None,
    entrypoint: str,
    payload_json: str | None,
    priority: int,
    run_at: str | None,
    delay: float | None,
    dedupe_key: str | None,
    max_attempts: int | None,
    count: int | None,
) -> None:
    """Enqueue a job of ENTRYPOINT with PAYLOAD_JSON ('-' reads it from stdin).

    Prints the job id, or with --count the number of jobs enqueued.
    """
    payload = _parse_payload(payload_json)
    when = _parse_run_at(run_at, delay)
    if count is None:
        with _client(dsn) as client:
            job_id = client.enqueue(
                entrypoint,
                payload,
                priority=priority,
                run_at=when,
                dedupe_key=dedupe_key,
                max_attempts=max_attempts,
            )
        click.echo(job_id)
        return
    if dedupe_key is not None or max_attempts is not None:
        raise ValueError(
            "--count cannot be combined with --dedupe-key or --max-attempts;"
            " set max attempts with `pgq configure ENTRYPOINT --max-attempts N`"
        )
    done = 0
    with (
        _client(dsn) as client,
        click.progressbar(length=count, label="enqueuing", file=sys.stderr) as bar,
    ):
        try:
            while done < count:
                size = min(BATCH, count - done)
                client.enqueue_batch(entrypoint, [payload] * size, priority=priority, run_at=when)
                done += size
                bar.update(size)
        except Exception:
            if done:
                click.echo(f"\n{done} of {count} jobs were enqueued before the error", err=True)
            raise
    click.echo(f"enqueued {done} job{'s' if done != 1 else ''}")


@main.command()
@dsn_option
@click.option("--entrypoint", help="Only this entrypoint.")
@click.option("--status", type=click.Choice(LIVE_STATUSES), help="Only jobs in this state.")
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True)
@handle_errors
def jobs(dsn: str | None, entrypoint: str | None, status: str | None, limit: int) -> None:
    """List live jobs (pgq.jobs), oldest first. Finished jobs are in pgq.outcomes."""
    with _client(dsn) as client:
        rows = client.jobs(entrypoint=entrypoint, status=status, limit=limit)
    _table(
        "jobs",
        ["id", "entrypoint", "status", "priority", "attempt", "deliveries", "run at", "last error"],
        [
            [
                j.id,
                j.entrypoint,
                j.status + (" (cancel requested)" if j.cancel_requested else ""),
                j.priority,
                f"{j.attempt}/{j.max_attempts}",
                j.deliveries,
                _relative(j.run_at),
                _short(j.last_error),
            ]
            for j in rows
        ],
    )


def _short(text: str | None, width: int = 60) -> str | None:
    if text is None:
        return None
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _plural(n: int) -> str:
    return f"{n} job" if n == 1 else f"{n} jobs"


@main.command()
@dsn_option
@click.argument("ids", nargs=-1, required=True, type=int)
@handle_errors
def cancel(dsn: str | None, ids: tuple[int, ...]) -> None:
    """Cancel jobs: queued, waiting and dead ones now, running ones at their next heartbeat."""
    with _client(dsn) as client:
        n = client.cancel(ids)
    click.echo(f"canceled {n} of {_plural(len(set(ids)))}")


@main.command()
@dsn_option
@click.argument("ids", nargs=-1, required=True, type=int)
@handle_errors
def retry(dsn: str | None, ids: tuple[int, ...]) -> None:
    """Re-queue dead jobs now, with their attempts reset."""
    with _client(dsn) as client:
        n = client.retry(ids)
    click.echo(f"re-queued {n} of {_plural(len(set(ids)))}")


@main.command()
@dsn_option
@click.argument("entrypoint")
@handle_errors
def pause(dsn: str | None, entrypoint: str) -> None:
    """Stop claims of ENTRYPOINT; running jobs finish, enqueue still works."""
    with _client(dsn) as client:
        client.pause(entrypoint)
    click.echo(f"paused {entrypoint}")


@main.command()
@dsn_option
@click.argument("entrypoint")
@handle_errors
def resume(dsn: str | None, entrypoint: str) -> None:
    """Let workers claim ENTRYPOINT's jobs again."""
    with _client(dsn) as client:
        client.resume(entrypoint)
    click.echo(f"resumed {entrypoint}")


def _settings(row: QueueRow) -> str:
    return (
        f"{row.entrypoint}: max_attempts={row.max_attempts}"
        f" backoff_base={_duration(row.backoff_base)} backoff_max={_duration(row.backoff_max)}"
        f" lease={_duration(row.lease)} timeout={_duration(row.timeout)}"
        f" concurrency={row.concurrency or 'unlimited'} retention={_duration(row.retention)}"
        f" paused={_cell(row.paused)}"
    )


@main.command()
@dsn_option
@click.argument("entrypoint")
@click.option("--max-attempts", type=int, help="Runs before a job is dead (1-1000).")
@click.option("--backoff-base", metavar="INTERVAL", help="First retry delay, e.g. '1 second'.")
@click.option("--backoff-max", metavar="INTERVAL", help="Longest retry delay, e.g. '1 hour'.")
@click.option("--lease", metavar="INTERVAL", help="Re-deliver after this long without a heartbeat.")
@click.option("--timeout", metavar="INTERVAL", help="The longest a handler may run.")
@click.option("--concurrency", type=int, help="Running jobs across all workers; 0: no limit.")
@click.option("--retention", metavar="INTERVAL", help="How long outcomes stay in the log.")
@handle_errors
def configure(
    dsn: str | None,
    entrypoint: str,
    max_attempts: int | None,
    backoff_base: str | None,
    backoff_max: str | None,
    lease: str | None,
    timeout: str | None,
    concurrency: int | None,
    retention: str | None,
) -> None:
    """Set ENTRYPOINT's settings (PostgreSQL interval text for intervals, e.g. '30 seconds').

    Options left out keep their value; without options, print the current settings.
    """
    settings = {
        "max_attempts": max_attempts,
        "backoff_base": backoff_base,
        "backoff_max": backoff_max,
        "lease": lease,
        "timeout": timeout,
        "concurrency": concurrency,
        "retention": retention,
    }
    with _client(dsn) as client:
        if any(v is not None for v in settings.values()):
            client.configure(entrypoint, **settings)
        row = next((q for q in client.queues() if q.entrypoint == entrypoint), None)
    if row is None:
        click.echo(f"{entrypoint}: no jobs and no settings (defaults apply)")
    else:
        click.echo(_settings(row))


main.add_command(worker_command)
