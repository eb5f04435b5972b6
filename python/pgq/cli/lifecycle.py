"""`pgq install | upgrade | uninstall | doctor`: the life of an installation."""

from __future__ import annotations

from datetime import timedelta

import click
import psycopg

from .. import migrate
from ..doctor import Limits, diagnose
from ..dsn import resolve_dsn
from .output import dsn_option, handle_errors

_ROLES_HELP = (
    "Prefix of this install's own roles: --roles app1_ makes app1_owner, app1_producer,"
    " app1_worker, app1_admin (default pgq_, shared by every default install in the cluster)."
    " Recorded in the database; later runs use it."
)


@click.command()
@dsn_option
@click.option("--no-cron", is_flag=True, help="Do not schedule the sweeps with pg_cron.")
@click.option("--roles", "roles", metavar="PREFIX", default=None, help=_ROLES_HELP)
@handle_errors
def install(dsn: str | None, no_cron: bool, roles: str | None) -> None:
    """Install pgq into a database (idempotent; upgrades an older install, repairs roles,
    grants and sweeps after a restore)."""
    for line in migrate.install(resolve_dsn(dsn), cron=not no_cron, roles=roles):
        click.echo(line)
    if no_cron:
        click.echo(
            "--no-cron: no pg_cron sweeps were scheduled; pgq's pg_cron jobs from an earlier"
            " install, if any, were left as they are (`pgq uninstall` removes them)"
        )


@click.command()
@dsn_option
@click.option("--no-cron", is_flag=True, help="Do not (re)schedule the sweeps with pg_cron.")
@click.option(
    "--roles",
    "roles",
    metavar="PREFIX",
    default=None,
    help="The install's role prefix, if given: must be the recorded one.",
)
@handle_errors
def upgrade(dsn: str | None, no_cron: bool, roles: str | None) -> None:
    """Bring pgq to this version in one transaction: migrations, functions, grants; then
    make sure the pg_cron sweeps are scheduled. The install's roles are the ones recorded
    at its install."""
    for line in migrate.upgrade(resolve_dsn(dsn), cron=not no_cron, roles=roles):
        click.echo(line)


@click.command()
@dsn_option
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--cascade", is_flag=True, help="Also drop the objects outside schema pgq that depend on it.")
@handle_errors
def uninstall(dsn: str | None, yes: bool, cascade: bool) -> None:
    """Remove pgq's schema, every job in it, and its pg_cron jobs.

    Refuses while objects outside schema pgq depend on it (e.g. a trigger that calls
    pgq.enqueue_trigger), naming each, unless --cascade.
    """
    dsn = resolve_dsn(dsn)
    with psycopg.connect(dsn) as conn:
        where = f"database {conn.info.dbname!r} on {conn.info.host}:{conn.info.port}"
    if not yes:
        extra = " and the objects that depend on it" if cascade else ""
        click.confirm(f"Drop schema pgq{extra} and every job in it from {where}?", abort=True)
    for line in migrate.uninstall(dsn, cascade=cascade):
        click.echo(line)


@click.command()
@dsn_option
@click.option(
    "--max-xact-age",
    type=float,
    default=300,
    show_default=True,
    metavar="SECONDS",
    help="Report a transaction open longer than this (it holds back vacuum and slows claims).",
)
@click.option(
    "--max-queue-age",
    type=click.FloatRange(min=0),
    default=300,
    show_default=True,
    metavar="SECONDS",
    help="Report an entrypoint whose oldest due job has waited longer (paused, unserved or behind).",
)
@click.option(
    "--max-index-excess",
    type=click.FloatRange(min=0),
    default=64,
    show_default=True,
    metavar="MB",
    help="Report an index of the job table larger by this than its live rows need.",
)
@handle_errors
def doctor(dsn: str | None, max_xact_age: float, max_queue_age: float, max_index_excess: float) -> None:
    """Inspect the installation: one line per problem with its fix. Exit 0 when healthy,
    1 when a problem was found or the check could not run (for monitoring; see
    docs/doctor.md), 2 for a usage error."""
    limits = Limits(
        max_xact_age=timedelta(seconds=max_xact_age),
        max_queue_age=timedelta(seconds=max_queue_age),
        max_index_excess=int(max_index_excess * 1024 * 1024),
    )
    problems = diagnose(resolve_dsn(dsn), limits)
    for problem in problems:
        click.echo(str(problem))
    if problems:
        raise SystemExit(1)
    click.echo("healthy: no problems found")


COMMANDS = (install, upgrade, uninstall, doctor)
