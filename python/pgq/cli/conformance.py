"""`pgq conformance --worker "CMD"`: the worker-protocol conformance suite (docs/protocol.md)."""

from __future__ import annotations

import sys

import click

from ..conformance import run_suite
from ..conformance.scenarios import describe
from ..dsn import resolve_dsn
from .output import dsn_option, handle_errors

_SCENARIOS = ", ".join(name for name, _ in describe())


@click.command("conformance")
@dsn_option
@click.option(
    "--worker",
    "cmd",
    required=True,
    metavar="CMD",
    help="The worker to test, a shell command; it gets PGQ_DSN and PGQ_ENTRYPOINTS (comma-separated).",
)
@click.option(
    "--scenario",
    "names",
    multiple=True,
    metavar="NAME",
    help=f"Run only this scenario (repeatable): {_SCENARIOS}.",
)
@click.option(
    "--lease",
    type=click.FloatRange(min=1, max=30),
    default=2.0,
    show_default=True,
    help="Lease of the suite's entrypoints, in seconds.",
)
@handle_errors
def conformance_command(dsn: str | None, cmd: str, names: tuple[str, ...], lease: float) -> None:
    """Run the worker-protocol scenarios against a worker started as CMD: one line per
    scenario; exit 0 when all pass, 1 when any fails. Use a test database: the suite
    configures entrypoints of its own (unique per run) and removes them afterwards."""
    code = run_suite(resolve_dsn(dsn), cmd, list(names), lease=lease, echo=click.echo)
    sys.exit(code)
