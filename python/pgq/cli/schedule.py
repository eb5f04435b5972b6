"""`pgq schedule`, `pgq unschedule`, `pgq schedules`: periodic jobs (pgq.schedule)."""

from __future__ import annotations

import json

import click

from .output import (
    dsn_option,
    handle_errors,
    make_client,
    parse_payload,
    print_table,
    relative,
    short,
    utc,
)


@click.command()
@dsn_option
@click.argument("name")
@click.argument("cron")
@click.argument("entrypoint")
@click.argument("payload_json", required=False)
@handle_errors
def schedule(dsn: str | None, name: str, cron: str, entrypoint: str, payload_json: str | None) -> None:
    """Enqueue a job of ENTRYPOINT with PAYLOAD_JSON every minute that matches CRON.

    CRON has 5 fields, in UTC: minute hour day-of-month month day-of-week, e.g.
    '*/15 * * * *' or '30 2 * * mon-fri'; or @hourly, @daily, @weekly, @monthly, @yearly.
    A schedule named NAME is replaced (its last run is kept). Prints the next run.
    """
    payload = parse_payload(payload_json)
    with make_client(dsn) as client:
        next_run = client.schedule(name, cron, entrypoint, payload)
    click.echo(f"{name}: next run {utc(next_run)} ({relative(next_run)})")


@click.command()
@dsn_option
@click.argument("name")
@handle_errors
def unschedule(dsn: str | None, name: str) -> None:
    """Remove the schedule NAME; jobs it already enqueued are left alone."""
    with make_client(dsn) as client:
        removed = client.unschedule(name)
    if not removed:
        raise ValueError(f"no schedule named {name!r} (see `pgq schedules`)")
    click.echo(f"unscheduled {name}")


@click.command()
@dsn_option
@handle_errors
def schedules(dsn: str | None) -> None:
    """List the periodic jobs (pgq.schedules); times are UTC."""
    with make_client(dsn) as client:
        rows = client.schedules()
    print_table(
        "schedules",
        ["name", "cron", "entrypoint", "payload", "last run", "next run"],
        [
            [
                s.name,
                s.cron,
                s.entrypoint,
                None if s.payload is None else short(json.dumps(s.payload), 40),
                None if s.last_run is None else utc(s.last_run),
                "never" if s.next_run is None else f"{utc(s.next_run)} ({relative(s.next_run)})",
            ]
            for s in rows
        ],
    )
