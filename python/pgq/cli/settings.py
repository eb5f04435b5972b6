"""`pgq pause`, `pgq resume`, `pgq configure`, `pgq isolate` and `pgq unisolate`: an
entrypoint's settings from the command line, through pgq.Client (the SQL functions of the
same names validate them in the database; nothing is checked or stored here).
"""

from __future__ import annotations

from decimal import Decimal

import click

from ..client import QueueRow
from .output import cell, dsn_option, duration, handle_errors, make_client, per_second

_CREATE_HELP = (
    "Also an entrypoint that nothing names yet (no job, settings, schedule or worker);"
    " without it, such a name (a typo?) is refused."
)


@click.command()
@dsn_option
@click.argument("entrypoint")
@click.option("--create", is_flag=True, help=_CREATE_HELP)
@handle_errors
def pause(dsn: str | None, entrypoint: str, create: bool) -> None:
    """Stop claims of ENTRYPOINT; running jobs finish, enqueue still works."""
    with make_client(dsn) as client:
        client.pause(entrypoint, create_new=create)
    click.echo(f"paused {entrypoint}")


@click.command()
@dsn_option
@click.argument("entrypoint")
@handle_errors
def resume(dsn: str | None, entrypoint: str) -> None:
    """Let workers claim ENTRYPOINT's jobs again."""
    with make_client(dsn) as client:
        client.resume(entrypoint)
    click.echo(f"resumed {entrypoint}")


@click.command()
@dsn_option
@click.argument("entrypoint")
@handle_errors
def isolate(dsn: str | None, entrypoint: str) -> None:
    """Give ENTRYPOINT a partition of the job table of its own and move its jobs there.

    Its jobs then fill pages of their own, so draining it from behind a big backlog of
    other entrypoints stays as fast as a small queue. The job table is locked while
    the jobs move: about 0.2 s for 10k jobs among a million."""
    with make_client(dsn) as client:
        moved = client.isolate(entrypoint)
    click.echo(f"isolated {entrypoint}: {moved} jobs moved")


@click.command()
@dsn_option
@click.argument("entrypoint")
@handle_errors
def unisolate(dsn: str | None, entrypoint: str) -> None:
    """Move ENTRYPOINT's jobs back into the shared partition and drop its own.

    The whole job table is locked while the jobs move."""
    with make_client(dsn) as client:
        moved = client.unisolate(entrypoint)
    click.echo(f"unisolated {entrypoint}: {moved} jobs moved")


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


@click.command()
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


COMMANDS = (pause, resume, configure, isolate, unisolate)
