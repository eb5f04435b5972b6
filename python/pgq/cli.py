"""The `pgq` command line: a thin click layer over pgq.migrate and pgq.Client."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from typing import Any

import click
import psycopg

from . import migrate
from .dsn import resolve_dsn
from .errors import PgqError

dsn_option = click.option(
    "--dsn", envvar="PGQ_DSN", default=None, help="libpq connection string (default: $PGQ_DSN, then PG* variables)."
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
            click.echo(f"error: {exc}".rstrip(), err=True)
            sys.exit(1)

    return wrapper


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
