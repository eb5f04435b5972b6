"""`pgq sql install | upgrade | extension | sweeps`: pgq as SQL files, for psql, migration
tools (Flyway, Liquibase, sqitch, Rails, Django) and CREATE EXTENSION. Nothing here
connects to a database: it prints or writes what pgq.scripts assembles."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .. import roles as pgroles
from .. import scripts
from ..cron import CRON_JOBS, CRON_LOG_JOB, job_name
from .output import handle_errors

_ROLES = click.option(
    "--roles",
    "roles",
    metavar="PREFIX",
    default=pgroles.DEFAULT_PREFIX,
    show_default=True,
    help="Prefix of the install's own roles (as pgq install --roles).",
)


@click.group("sql")
def sql_group() -> None:
    """Print pgq's install and upgrade as SQL, or write the extension pgq."""


@sql_group.command("install")
@_ROLES
@handle_errors
def install_sql(roles: str) -> None:
    """Print the SQL of a fresh install (what `pgq install --no-cron` runs), to be run in
    one transaction: pgq sql install | psql -v ON_ERROR_STOP=1 -1 -f -"""
    sys.stdout.write(scripts.install_script(roles))


@sql_group.command("upgrade")
@click.option(
    "--from",
    "release",
    required=True,
    type=click.Choice(list(scripts.RELEASES)),
    help="The release installed in the database (SELECT pgq.version()).",
)
@_ROLES
@handle_errors
def upgrade_sql(release: str, roles: str) -> None:
    """Print the SQL of the upgrade from a release to this one (what `pgq upgrade --no-cron`
    runs), to be run in one transaction; it refuses a database at another release."""
    sys.stdout.write(scripts.upgrade_script(release, roles))


@sql_group.command("extension")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@handle_errors
def extension_sql(directory: Path) -> None:
    """Write the extension pgq into DIRECTORY: pgq.control, pgq--VERSION.sql and the update
    scripts. Copy them into the server's extension directory ($(pg_config --sharedir)/
    extension; make install-extension does it), then CREATE EXTENSION pgq."""
    for path in scripts.write_extension(directory):
        click.echo(f"wrote {path}")


@sql_group.command("sweeps")
@click.option("--database", required=True, help="The queue's database (where pgq is installed).")
@handle_errors
def sweeps_sql(database: str) -> None:
    """Print the statements that schedule pgq's sweeps with pg_cron, to run in the database
    where pg_cron is created (cron.database_name, often postgres) by a role that may call
    cron.schedule_in_database. What `pgq install` schedules; for installs by SQL alone."""
    literal = database.replace("'", "''")
    for name, when, command in CRON_JOBS:
        job = job_name(name, database).replace("'", "''")
        click.echo(f"SELECT cron.schedule_in_database('{job}', '{when}', '{command}', '{literal}');")
    name, when, command = CRON_LOG_JOB
    job = job_name(name, database).replace("'", "''")
    command = command.replace("'", "''")
    click.echo(f"SELECT cron.schedule('{job}', '{when}', '{command}');")
