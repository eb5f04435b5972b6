"""`pgq enqueue`: one job, or many copies of it in batches, from the command line.

It parses and checks the options, then calls pgq.Client; what a job becomes (dedupe,
dependencies, run time) is decided by pgq.enqueue in the database, never here.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta
from typing import Any

import click

from .output import dsn_option, handle_errors, make_client, parse_payload, plural

BATCH = 10000  # enqueue --count: jobs per pgq.enqueue_batch call (and per transaction)


def _parse_run_at(run_at: str | None, delay: float | None) -> datetime | timedelta | None:
    if run_at is not None and delay is not None:
        raise ValueError("--run-at and --delay exclude each other; pass one")
    if delay is not None:
        if delay < 0:
            raise ValueError(f"--delay must not be negative, got {delay}")
        return timedelta(seconds=delay)
    if run_at is None:
        return None
    text = run_at.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--run-at {run_at!r} is not an ISO 8601 time, e.g. 2030-01-31T09:00Z") from None
    return when if when.utcoffset() is not None else when.astimezone()


@click.command()
@dsn_option
@click.argument("entrypoint")
@click.argument("payload_json", required=False)
@click.option("--priority", type=int, default=0, show_default=True, help="Higher runs first.")
@click.option("--run-at", help="Not before this ISO 8601 time (local time without an offset).")
@click.option("--delay", type=float, help="Not before this many seconds from now.")
@click.option("--dedupe-key", help="Do not duplicate a live job with this key.")
@click.option(
    "--dedupe-scope",
    type=click.Choice(["live", "queued"]),
    help="Which jobs with the key stand for this one: live (default) or queued (not started yet).",
)
@click.option("--dedupe-window", help="A job with the key that succeeded within this interval stands too.")
@click.option(
    "--dedupe-mode",
    type=click.Choice(["keep", "replace"]),
    help="replace: a standing job not started yet takes this payload, priority and run time.",
)
@click.option("--max-attempts", type=int, help="Runs before the job is dead.")
@click.option("--count", type=click.IntRange(min=1), help="Enqueue this many copies, in batches.")
@click.option("--concurrency-key", help="The key (tenant, customer) the job counts against.")
@click.option("--headers", "headers_json", metavar="JSON", help="Headers of the job, a JSON object.")
@click.option(
    "--depends-on",
    metavar="ID[,ID...]",
    multiple=True,
    help="Wait until these jobs have succeeded (repeatable, or comma separated).",
)
@handle_errors
def enqueue(
    dsn: str | None,
    entrypoint: str,
    payload_json: str | None,
    priority: int,
    run_at: str | None,
    delay: float | None,
    dedupe_key: str | None,
    dedupe_scope: str | None,
    dedupe_window: str | None,
    dedupe_mode: str | None,
    max_attempts: int | None,
    count: int | None,
    concurrency_key: str | None,
    headers_json: str | None,
    depends_on: tuple[str, ...],
) -> None:
    """Enqueue a job of ENTRYPOINT with PAYLOAD_JSON ('-' reads it from stdin).

    Prints the job id; with --count, the ids one a line (stderr says how many). When a job
    with the dedupe key stands for this one, its id is printed and stderr says so (kept or
    replaced).
    """
    payload = parse_payload(payload_json)
    when = _parse_run_at(run_at, delay)
    headers = _parse_headers(headers_json)
    parents = _parse_ids("--depends-on", depends_on)
    dedupe = {"dedupe_scope": dedupe_scope, "dedupe_window": dedupe_window, "dedupe_mode": dedupe_mode}
    if count is None:
        with make_client(dsn) as client:
            args: dict[str, Any] = dict(
                priority=priority,
                run_at=when,
                max_attempts=max_attempts,
                concurrency_key=concurrency_key,
                headers=headers,
                depends_on=parents,
            )
            if dedupe_key is None:
                # Plain jobs take pgq.enqueue; options without a key are refused by the database.
                click.echo(client.enqueue(entrypoint, payload, **args, **dedupe))
                return
            done_job = client.enqueue_job(entrypoint, payload, dedupe_key=dedupe_key, **args, **dedupe)
        click.echo(done_job.id)
        if done_job.replaced:
            click.echo(f"replaced job {done_job.id} (same dedupe key, not started yet)", err=True)
        elif not done_job.created:
            click.echo(f"not created: job {done_job.id} has the same dedupe key", err=True)
        return
    if dedupe_key is not None or any(v is not None for v in dedupe.values()):
        # N copies of one payload under one dedupe key would be one job.
        raise ValueError("--count cannot be combined with --dedupe-key (or its options)")
    done = 0
    with (
        make_client(dsn) as client,
        click.progressbar(length=count, label="enqueuing", file=sys.stderr) as bar,
    ):
        try:
            while done < count:
                size = min(BATCH, count - done)
                ids = client.enqueue_batch(
                    entrypoint,
                    [payload] * size,
                    priority=priority,
                    run_at=when,
                    concurrency_keys=None if concurrency_key is None else [concurrency_key] * size,
                    headers=headers,
                    max_attempts=max_attempts,
                    depends_on=parents,
                )
                # Each batch's ids as soon as it is committed: after an error, the ids printed
                # are exactly the jobs that exist.
                click.echo("\n".join(map(str, ids)))
                done += size
                bar.update(size)
        except Exception:
            if done:
                click.echo(f"\n{done} of {count} jobs were enqueued before the error", err=True)
            raise
    click.echo(f"enqueued {plural(done)}", err=True)


def _parse_headers(text: str | None) -> dict[str, Any] | None:
    """--headers: a JSON object (pgq.enqueue refuses anything else; said here by name)."""
    if text is None:
        return None
    try:
        headers = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--headers is not valid JSON: {exc}") from None
    if not isinstance(headers, dict):
        raise ValueError(f"--headers must be a JSON object, got {text!r}")
    return headers


def _parse_ids(option: str, values: tuple[str, ...]) -> list[int] | None:
    """Job ids given as a repeatable option, each value one id or several, comma separated."""
    ids: list[int] = []
    for value in values:
        for part in value.split(","):
            try:
                ids.append(int(part.strip()))
            except ValueError:
                raise ValueError(f"{option} takes job ids (e.g. 12,13), got {value!r}") from None
    return ids or None
