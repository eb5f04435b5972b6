"""`pgq dashboard`: serve the web UI (python/pgq/web) with uvicorn.

Auth model: $PGQ_DASHBOARD_PASSWORD set -> HTTP Basic auth ($PGQ_DASHBOARD_USER, default
admin) on every path but /healthz; not set -> loopback addresses only. Either way only
requests that name the listening address or an --allowed-host in Host are served.
"""

from __future__ import annotations

import ipaddress
import os
import sys

import click

from ..dsn import resolve_dsn
from .output import dsn_option

EXTRA_HINT = "the dashboard needs its extra: pip install 'pgq-sql[dashboard]'"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@click.command("dashboard")
@dsn_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@click.option("--read-only", is_flag=True, help="Hide and refuse actions (retry, cancel, pause).")
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    help="A host name clients use for it (repeatable; also $PGQ_DASHBOARD_ALLOWED_HOSTS,"
    " comma-separated); '*' for any, with a password only.",
)
def dashboard_command(
    dsn: str | None, host: str, port: int, read_only: bool, allowed_hosts: tuple[str, ...]
) -> None:
    """Serve the web dashboard: overview, jobs, workers, schedules, settings, /metrics.

    Set $PGQ_DASHBOARD_PASSWORD (and $PGQ_DASHBOARD_USER, default admin) to require HTTP
    Basic auth; without a password it listens on loopback addresses only. Actions run as
    the database role of the DSN.
    """
    password = os.environ.get("PGQ_DASHBOARD_PASSWORD") or None
    user = os.environ.get("PGQ_DASHBOARD_USER") or "admin"
    if password is None and not is_loopback(host):
        click.echo(
            f"error: refusing to listen on {host} without a password;"
            " set PGQ_DASHBOARD_PASSWORD or use --host 127.0.0.1",
            err=True,
        )
        sys.exit(1)
    env_hosts = os.environ.get("PGQ_DASHBOARD_ALLOWED_HOSTS", "").replace(",", " ").split()
    allowed_hosts = (*allowed_hosts, *env_hosts)
    if password is None and "*" in allowed_hosts:
        click.echo("error: --allowed-host '*' needs a password (PGQ_DASHBOARD_PASSWORD)", err=True)
        sys.exit(1)
    if host.strip("[]") in ("", "0.0.0.0", "::") and not allowed_hosts:
        # Requests name the host clients reach it by, which an address of all interfaces is
        # not: without the list, every request would be refused.
        click.echo(
            f"error: listening on {host}, the dashboard needs the host names clients use:"
            " --allowed-host NAME (repeatable) or PGQ_DASHBOARD_ALLOWED_HOSTS=NAME,NAME",
            err=True,
        )
        sys.exit(1)
    try:
        import uvicorn

        from ..web.app import Config, create_app
    except ImportError:
        click.echo(f"error: {EXTRA_HINT}", err=True)
        sys.exit(1)
    config = Config(
        dsn=resolve_dsn(dsn),
        user=user,
        password=password,
        read_only=read_only,
        host=host,
        allowed_hosts=allowed_hosts,
    )
    app = create_app(config)
    auth = f"Basic auth as {user}" if password else "no auth, loopback only"
    mode = ", read-only" if read_only else ""
    click.echo(f"pgq dashboard on http://{host}:{port}/ ({auth}{mode})", err=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
