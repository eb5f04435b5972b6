"""`pgq jobs`: list jobs, live ones from pgq.jobs or finished ones from the outcome log.

It only reads (through pgq.Client) and prints a table; it never changes a job.
"""

from __future__ import annotations

import click

from ..client import LIVE_STATUSES
from ..queries import OUTCOMES
from .output import dsn_option, handle_errors, last_line, make_client, print_table, relative


@click.command()
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
