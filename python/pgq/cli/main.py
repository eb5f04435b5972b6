"""The `pgq` command line: a thin click layer over pgq.migrate and pgq.Client.

This module is the group and its registry: each command lives in a module of its own under
cli/ (enqueue, jobs, settings, act, lifecycle, ...) and is added here. It must never hold a
command's logic.
"""

from __future__ import annotations

import logging

import click

from .. import __version__
from ..bench.main import bench_command
from .act import COMMANDS as ACT
from .conformance import conformance_command
from .dashboard import dashboard_command
from .enqueue import enqueue
from .explain import explain_command
from .job import job_command, wait_command
from .jobs import jobs
from .lifecycle import COMMANDS as LIFECYCLE
from .schedule import schedule, schedules, unschedule
from .settings import COMMANDS as SETTINGS
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


for command in (
    *LIFECYCLE,
    *ACT,
    enqueue,
    jobs,
    *SETTINGS,
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
