"""The `pgq` command line: a thin click layer over pgq.migrate and pgq.Client."""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import click

from .. import __version__
from ..bench.main import bench_command
from ..client import LIVE_STATUSES, QueueRow
from ..queries import OUTCOMES
from .act import COMMANDS as ACT
from .conformance import conformance_command
from .dashboard import dashboard_command
from .explain import explain_command
from .job import job_command, wait_command
from .lifecycle import COMMANDS as LIFECYCLE
from .output import (
    cell,
    dsn_option,
    duration,
    handle_errors,
    last_line,
    make_client,
    parse_payload,
    per_second,
    plural,
    print_table,
    relative,
)
from .schedule import schedule, schedules, unschedule
from .sql import sql_group
from .status import status
from .worker import worker_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pgq", message="%(prog)s %(version)s")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logs.")
def main(debug: bool) -> None:
    """pgq: a job queue that lives inside PostgreSQL.

    A failure prints one line (`error: ...`) and exits 1; a usage error (a bad option or
    argument) is reported by the command line parser and exits 2.
    """
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


# --- queue administration ----------------------------------------------------------------

BATCH = 10000  # enqueue --count: jobs per pgq.enqueue_batch call (and per transaction)


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
@click.option(
    "--dedupe-scope",
    type=click.Choice(["live", "queued"]),
    help="Which jobs with the key stand for this one: live (default) or queued (not started yet).",
)
@click.option("--dedupe-window", help="A job with the key that succeeded within this interval stands too.")
@click.option(
    "--dedupe-mode",
    type=click.Choice(["keep", "replace"]),
    help="replace: a standing job not started yet takes this payload, priority and run time.",
)
@click.option("--max-attempts", type=int, help="Runs before the job is dead.")
@click.option("--count", type=click.IntRange(min=1), help="Enqueue this many copies, in batches.")
@click.option("--concurrency-key", help="The key (tenant, customer) the job counts against.")
@click.option("--headers", "headers_json", metavar="JSON", help="Headers of the job, a JSON object.")
@click.option(
    "--depends-on",
    metavar="ID[,ID...]",
    multiple=True,
    help="Wait until these jobs have succeeded (repeatable, or comma separated).",
)
@handle_errors
def enqueue(
    dsn: str | None,
    entrypoint: str,
    payload_json: str | None,
    priority: int,
    run_at: str | None,
    delay: float | None,
    dedupe_key: str | None,
    dedupe_scope: str | None,
    dedupe_window: str | None,
    dedupe_mode: str | None,
    max_attempts: int | None,
    count: int | None,
    concurrency_key: str | None,
    headers_json: str | None,
    depends_on: tuple[str, ...],
) -> None:
    """Enqueue a job of ENTRYPOINT with PAYLOAD_JSON ('-' reads it from stdin).

    Prints the job id; with --count, the ids one a line (stderr says how many). When a job
    with the dedupe key stands for this one, its id is printed and stderr says so (kept or
    replaced).
    """
    payload = parse_payload(payload_json)
    when = _parse_run_at(run_at, delay)
    headers = _parse_headers(headers_json)
    parents = _parse_ids("--depends-on", depends_on)
    dedupe = {"dedupe_scope": dedupe_scope, "dedupe_window": dedupe_window, "dedupe_mode": dedupe_mode}
    if count is None:
        with make_client(dsn) as client:
            args: dict[str, Any] = dict(
                priority=priority,
                run_at=when,
                max_attempts=max_attempts,
                concurrency_key=concurrency_key,
                headers=headers,
                depends_on=parents,
            )
            if dedupe_key is None:
                # Plain jobs take pgq.enqueue; options without a key are refused by the database.
                click.echo(client.enqueue(entrypoint, payload, **args, **dedupe))
                return
            done_job = client.enqueue_job(entrypoint, payload, dedupe_key=dedupe_key, **args, **dedupe)
        click.echo(done_job.id)
        if done_job.replaced:
            click.echo(f"replaced job {done_job.id} (same dedupe key, not started yet)", err=True)
        elif not done_job.created:
            click.echo(f"not created: job {done_job.id} has the same dedupe key", err=True)
        return
    if (
        dedupe_key is not None
        or max_attempts is not None
        or headers is not None
        or parents is not None
        or any(v is not None for v in dedupe.values())
    ):
        # pgq.enqueue_batch, which --count uses, takes none of them.
        raise ValueError(
            "--count cannot be combined with --dedupe-key (or its options), --max-attempts,"
            " --headers or --depends-on; set max attempts with"
            " `pgq configure ENTRYPOINT --max-attempts N`"
        )
    done = 0
    with (
        make_client(dsn) as client,
        click.progressbar(length=count, label="enqueuing", file=sys.stderr) as bar,
    ):
        try:
            while done < count:
                size = min(BATCH, count - done)
                ids = client.enqueue_batch(
                    entrypoint,
                    [payload] * size,
                    priority=priority,
                    run_at=when,
                    concurrency_keys=None if concurrency_key is None else [concurrency_key] * size,
                )
                # Each batch's ids as soon as it is committed: after an error, the ids printed
                # are exactly the jobs that exist.
                click.echo("\n".join(map(str, ids)))
                done += size
                bar.update(size)
        except Exception:
            if done:
                click.echo(f"\n{done} of {count} jobs were enqueued before the error", err=True)
            raise
    click.echo(f"enqueued {plural(done)}", err=True)


def _parse_headers(text: str | None) -> dict[str, Any] | None:
    """--headers: a JSON object (pgq.enqueue refuses anything else; said here by name)."""
    if text is None:
        return None
    try:
        headers = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--headers is not valid JSON: {exc}") from None
    if not isinstance(headers, dict):
        raise ValueError(f"--headers must be a JSON object, got {text!r}")
    return headers


def _parse_ids(option: str, values: tuple[str, ...]) -> list[int] | None:
    """Job ids given as a repeatable option, each value one id or several, comma separated."""
    ids: list[int] = []
    for value in values:
        for part in value.split(","):
            try:
                ids.append(int(part.strip()))
            except ValueError:
                raise ValueError(f"{option} takes job ids (e.g. 12,13), got {value!r}") from None
    return ids or None


@main.command()
@dsn_option
@click.option("--entrypoint", help="Only this entrypoint.")
@click.option(
    "--status",
    type=click.Choice(sorted({*LIVE_STATUSES, *OUTCOMES})),
    help="Only jobs in this state; succeeded, canceled and failed (attempts) list finished jobs.",
)
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True)
@handle_errors
def jobs(dsn: str | None, entrypoint: str | None, status: str | None, limit: int) -> None:
    """List jobs: live ones (pgq.jobs) oldest first; with --status succeeded, canceled or
    failed, finished ones from the outcome log (pgq.outcomes), newest first. --status dead
    lists both the dead jobs still retryable and those discarded. The error column shows
    the last line of the error (`pgq job ID` shows it whole)."""
    rows: list[list[object]] = []
    with make_client(dsn) as client:
        if status is None or status in LIVE_STATUSES:
            for j in client.jobs(entrypoint=entrypoint, status=status, limit=limit):
                rows.append(
                    [
                        j.id,
                        j.entrypoint,
                        j.status + (" (cancel requested)" if j.cancel_requested else ""),
                        j.priority,
                        f"{j.attempt}/{j.max_attempts}",
                        j.deliveries,
                        relative(j.run_at) if j.status in ("queued", "waiting") else relative(j.started_at),
                        last_line(j.last_error),
                    ]
                )
        if status is not None and status in OUTCOMES:
            for o in client.outcomes(entrypoint=entrypoint, outcome=status, limit=max(limit - len(rows), 1)):
                if len(rows) < limit:
                    rows.append(
                        [
                            o.job_id,
                            o.entrypoint,
                            o.outcome + (" (discarded)" if o.outcome == "dead" else ""),
                            o.priority,
                            o.attempt,
                            o.deliveries,
                            relative(o.finished_at),
                            last_line(o.error),
                        ]
                    )
    print_table(
        "jobs",
        ["id", "entrypoint", "status", "priority", "attempt", "deliveries", "when", "error"],
        rows,
        squeeze=("error", "entrypoint", "status"),
    )


_CREATE_HELP = (
    "Also an entrypoint that nothing names yet (no job, settings, schedule or worker);"
    " without it, such a name (a typo?) is refused."
)


@main.command()
@dsn_option
@click.argument("entrypoint")
@click.option("--create", is_flag=True, help=_CREATE_HELP)
@handle_errors
def pause(dsn: str | None, entrypoint: str, create: bool) -> None:
    """Stop claims of ENTRYPOINT; running jobs finish, enqueue still works."""
    with make_client(dsn) as client:
        client.pause(entrypoint, create_new=create)
    click.echo(f"paused {entrypoint}")


@main.command()
@dsn_option
@click.argument("entrypoint")
@handle_errors
def resume(dsn: str | None, entrypoint: str) -> None:
    """Let workers claim ENTRYPOINT's jobs again."""
    with make_client(dsn) as client:
        client.resume(entrypoint)
    click.echo(f"resumed {entrypoint}")


def _settings(row: QueueRow) -> str:
    return (
        f"{row.entrypoint}: max_attempts={row.max_attempts}"
        f" backoff_base={duration(row.backoff_base)} backoff_max={duration(row.backoff_max)}"
        f" lease={duration(row.lease)} timeout={duration(row.timeout)}"
        f" concurrency={row.concurrency or 'unlimited'} rate={per_second(row.rate) or 'unlimited'}"
        f" retention={duration(row.retention)}"
        f" max_deliveries={row.max_deliveries or 'no cap'}"
        f" key_concurrency={row.key_concurrency or 'unlimited'} max_snoozes={row.max_snoozes}"
        f" paused={cell(row.paused)}"
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
@click.option("--rate", type=float, metavar="N", help="Jobs started per second, all workers; 0: no limit.")
@click.option("--retention", metavar="INTERVAL", help="How long outcomes stay in the log.")
@click.option(
    "--max-deliveries", type=int, help="Lost workers before a job is dead (a poison pill); 0: no cap."
)
@click.option(
    "--key-concurrency",
    type=int,
    help="Running jobs of one concurrency key; 1: one at a time, in order; 0: no limit.",
)
@click.option("--max-snoozes", type=int, help="Snoozes one job may take before a snooze fails it.")
@click.option("--create", is_flag=True, help=_CREATE_HELP)
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
    rate: float | None,
    retention: str | None,
    max_deliveries: int | None,
    key_concurrency: int | None,
    max_snoozes: int | None,
    create: bool,
) -> None:
    """Set ENTRYPOINT's settings (PostgreSQL interval text for intervals, e.g. '30 seconds').

    Options left out keep their value; without options, print the current settings. An
    entrypoint that nothing names yet (no job, settings, schedule or worker) needs --create.
    """
    settings = {
        "max_attempts": max_attempts,
        "backoff_base": backoff_base,
        "backoff_max": backoff_max,
        "lease": lease,
        "timeout": timeout,
        "concurrency": concurrency,
        "rate": None if rate is None else Decimal(str(rate)),
        "retention": retention,
        "max_deliveries": max_deliveries,
        "key_concurrency": key_concurrency,
        "max_snoozes": max_snoozes,
    }
    with make_client(dsn) as client:
        if any(v is not None for v in settings.values()):
            client.configure(entrypoint, **settings, create_new=create)
        row = next((q for q in client.queues() if q.entrypoint == entrypoint), None)
    if row is None:
        click.echo(f"{entrypoint}: no jobs and no settings (defaults apply)")
    else:
        click.echo(_settings(row))


for command in (
    *LIFECYCLE,
    *ACT,
    status,
    schedule,
    unschedule,
    schedules,
    worker_command,
    job_command,
    explain_command,
    wait_command,
):
    main.add_command(command)
main.add_command(bench_command)
main.add_command(dashboard_command)
main.add_command(sql_group)
main.add_command(conformance_command)
