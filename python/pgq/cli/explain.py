"""`pgq explain ID`: why a job is not running now (pgq.explain)."""

from __future__ import annotations

import json

import click

from .output import dsn_option, handle_errors, make_client


@click.command("explain")
@dsn_option
@click.argument("job_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print the reasons as a JSON array.")
@handle_errors
def explain_command(dsn: str | None, job_id: int, as_json: bool) -> None:
    """Say why job JOB_ID is not running now: one line per reason (scheduled, waiting for
    jobs, entrypoint paused, a limit full, held by a worker, no live worker, dead,
    finished). A due job that nothing holds back is about to be claimed."""
    with make_client(dsn) as client:
        reasons = client.explain(job_id)
    if as_json:
        doc = [
            {
                "reason": r.reason,
                "detail": r.detail,
                "until": None if r.until is None else r.until.isoformat(),
                "job_ids": r.job_ids,
            }
            for r in reasons
        ]
        click.echo(json.dumps(doc, indent=2))
        return
    if not reasons:
        click.echo(f"job {job_id}: due, nothing holds it back: the next claim of its entrypoint takes it")
        return
    for r in reasons:
        click.echo(f"job {job_id}: {r.reason}: {r.detail}")
