"""`pgq job ID` (one job's whole story) and `pgq wait ID` (block until it finishes)."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import Any

import click

from .. import tracebacks
from ..errors import UnknownJob
from .output import dsn_option, handle_errors, last_line, make_client


@click.command("job")
@dsn_option
@click.argument("job_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print pgq.job's document as JSON.")
@click.option("--full", is_flag=True, help="Show tracebacks whole, with pgq's and Python's frames.")
@handle_errors
def job_command(dsn: str | None, job_id: int, as_json: bool, full: bool) -> None:
    """Show one job's whole story: status, payload, attempts with their errors, result,
    timings, and the jobs it waits for and that wait for it. Live or finished jobs.
    Tracebacks show the handler's frames; pgq's and Python's are collapsed (--full)."""
    with make_client(dsn) as client:
        story = client.job(job_id)
    if story is None:
        raise UnknownJob(f"job {job_id} is unknown (never enqueued, or finished and pruned)")
    if as_json:
        click.echo(json.dumps(story, indent=2, sort_keys=True))
        return
    for line in story_lines(story, full):
        click.echo(line)


def story_lines(story: dict[str, Any], full: bool = False) -> list[str]:
    status = story["status"] + (" (cancel requested)" if story["cancel_requested"] else "")
    max_attempts = story["max_attempts"]
    lines = [
        f"job {story['id']}: {status}",
        f"  entrypoint   {story['entrypoint']}",
        f"  priority     {story['priority']}",
        f"  attempt      {story['attempt']}" + (f" of {max_attempts}" if max_attempts else ""),
        f"  deliveries   {story['deliveries']}",
    ]
    if story["run_at"] is not None and not story["finished"]:
        lines.append(f"  run at       {_time(story['run_at'])}")
    if story.get("concurrency_key") is not None:
        lines.append(f"  concurrency key {story['concurrency_key']}")
    if story["dedupe_key"] is not None:
        lines.append(f"  dedupe key   {story['dedupe_key']}")
    if story["worker_id"] is not None:
        lines.append(f"  worker       {story['worker_id']}")
    lines += [
        f"  enqueued     {_time(story['enqueued_at'])}",
        f"  started      {_time(story['started_at'])}",
        f"  finished     {_time(story['finished_at'])}",
        f"  payload      {_json(story['payload'])}",
        f"  headers      {_json(story['headers'])}",
    ]
    if story["status"] == "succeeded":
        lines.append(f"  result       {_json(story['result'])}")
    for key, title in (("depends_on", "waits for"), ("dependents", "waited for by")):
        if story[key]:
            lines.append(f"  {title:<12} " + ", ".join(f"{d['id']} ({d['status']})" for d in story[key]))
    report = story.get("progress")
    if report:
        note = f" ({report['note']})" if report["note"] else ""
        lines.append(f"progress: {report['value']}{note} at {_time(report['updated_at'])}")
    steps = story.get("steps") or []  # a 0.2 schema's pgq.job has none
    if steps:
        lines.append(f"steps ({len(steps)}):")
        for s in steps:
            lines.append(
                f"  {s['name']}: {_json(s['result'])} (delivery {s['delivery']}, {_time(s['recorded_at'])})"
            )
    attempts = story["attempts"]
    if attempts:
        lines.append(f"failed attempts ({len(attempts)}):")
        for a in attempts:
            lines.append(
                f"  attempt {a['attempt']} (delivery {a['deliveries']}), {_time(a['started_at'])}"
                f" -> {_time(a['finished_at'])}, worker {a['worker_id']}:"
            )
            lines += ["    " + line for line in tracebacks.shorten(a["error"], full).splitlines()]
    if story["error"] and story["status"] != "queued" and (not attempts or story["status"] != "dead"):
        lines.append(f"error: {story['error']}" if "\n" not in story["error"] else "error:")
        if "\n" in story["error"]:
            lines += ["  " + line for line in tracebacks.shorten(story["error"], full).splitlines()]
    return lines


def _time(text: str | None) -> str:
    if text is None:
        return "-"
    return datetime.fromisoformat(text).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _json(value: Any) -> str:
    return "-" if value is None else json.dumps(value)


@click.command("wait")
@dsn_option
@click.argument("job_id", type=int)
@click.option("--timeout", type=click.FloatRange(min=0), help="Give up after this many seconds.")
@handle_errors
def wait_command(dsn: str | None, job_id: int, timeout: float | None) -> None:
    """Wait until job JOB_ID finishes and print how it ended: its result as JSON when it
    succeeded (exit 0); the last line of its error when it is dead or canceled (exit 1).
    A timeout or an unknown id is an error (exit 1)."""
    with make_client(dsn) as client:
        outcome = client.wait(job_id, timeout=timeout)
    if outcome.status == "succeeded":
        click.echo(f"job {job_id} succeeded: {_json(outcome.result)}")
        return
    click.echo(f"job {job_id} {outcome.status}: {last_line(outcome.error) or '-'}")
    sys.exit(1)
