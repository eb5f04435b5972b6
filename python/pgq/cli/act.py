"""`pgq cancel` and `pgq retry`: by ids or by filters, saying what was done to each job and
why a job was left alone. Exit 1 when nothing matched what was asked (or an id is unknown).

pgq.cancel and pgq.retry take ids; the filters select the ids from pgq.jobs a page at a
time (a million dead jobs are never one array), as the dashboard does.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import click
import psycopg

from ..dsn import resolve_dsn
from .output import dsn_option, handle_errors, plural

PAGE = 10000  # ids per pgq.cancel / pgq.retry call when selected by filters

CANCELABLE = ("queued", "waiting", "running", "dead")


def _pages(
    conn: psycopg.Connection, entrypoint: str | None, statuses: tuple[str, ...]
) -> Iterator[list[int]]:
    """The ids of the live jobs that match, in pages in id order."""
    last = 0
    while True:
        ids = [
            r[0]
            for r in conn.execute(
                "SELECT j.id FROM pgq.jobs AS j WHERE j.id > %s AND j.status = ANY(%s)"
                " AND (%s::text IS NULL OR j.entrypoint = %s) ORDER BY j.id LIMIT %s",
                (last, list(statuses), entrypoint, entrypoint, PAGE),
            )
        ]
        if not ids:
            return
        yield ids
        last = ids[-1]


def _states(conn: psycopg.Connection, ids: list[int]) -> dict[int, tuple[str | None, bool]]:
    """Each id's status (pgq.job_status: live or finished, None when unknown; a dead job
    discarded by a cancel is 'discarded' here) and whether its cancellation was requested."""
    rows = conn.execute(
        "SELECT i.id, CASE WHEN j.id IS NULL AND pgq.job_status(i.id) = 'dead' THEN 'discarded'"
        " ELSE pgq.job_status(i.id) END, coalesce(j.cancel_requested, false)"
        " FROM unnest(%s::bigint[]) AS i (id) LEFT JOIN pgq.jobs AS j ON j.id = i.id",
        (ids,),
    ).fetchall()
    return {i: (status, requested) for i, status, requested in rows}


FINISHED = ("succeeded", "canceled", "discarded")


def _filters(ids: tuple[int, ...], entrypoint: str | None, status: str | None) -> None:
    if ids and (entrypoint is not None or status is not None):
        raise click.UsageError("pass job ids or filters (--entrypoint, --status), not both")
    if not ids and entrypoint is None and status is None:
        raise click.UsageError("pass job ids, or filters: --entrypoint E and/or --status S")


def _report(unknown: list[int], left: list[str], acted: int, verb: str) -> None:
    """Why each job was left alone (stderr); exit 1 for unknown ids or when nothing was done."""
    for line in left:
        click.echo(line, err=True)
    if unknown:
        click.echo(
            f"error: unknown job id{'s' if len(unknown) > 1 else ''}: {', '.join(map(str, unknown))}",
            err=True,
        )
        sys.exit(1)
    if not acted:
        click.echo(f"error: no job was {verb}", err=True)
        sys.exit(1)


@click.command()
@dsn_option
@click.argument("ids", nargs=-1, type=int)
@click.option("--entrypoint", help="The jobs of this entrypoint (with --status: of that state too).")
@click.option("--status", type=click.Choice(CANCELABLE), help="The jobs in this state.")
@handle_errors
def cancel(dsn: str | None, ids: tuple[int, ...], entrypoint: str | None, status: str | None) -> None:
    """Cancel jobs: queued, waiting and dead ones now, running ones at their next heartbeat.

    By IDS, or every live job that matches --entrypoint and --status. Says why a job was
    left alone (finished already, cancel already requested); exits 1 when no job was
    canceled or an id is unknown."""
    _filters(ids, entrypoint, status)
    with psycopg.connect(resolve_dsn(dsn), autocommit=True) as conn:
        if not ids:
            n = sum(
                conn.execute("SELECT pgq.cancel(%s::bigint[])", (page,)).fetchone()[0]
                for page in _pages(conn, entrypoint, (status,) if status else CANCELABLE)
            )
            click.echo(f"canceled {plural(n)}")
            _report([], [], n, "canceled")
            return
        wanted = list(dict.fromkeys(ids))
        before = _states(conn, wanted)
        n = conn.execute("SELECT pgq.cancel(%s::bigint[])", (wanted,)).fetchone()[0]
    click.echo(f"canceled {n} of {plural(len(wanted))}")
    left = []
    for i in wanted:
        state, requested = before[i]
        if state in FINISHED:
            left.append(f"job {i}: not canceled: it has finished ({state})")
        elif state == "running" and requested:
            left.append(f"job {i}: not canceled again: its cancellation was requested already")
    _report([i for i in wanted if before[i][0] is None], left, n, "canceled")


@click.command()
@dsn_option
@click.argument("ids", nargs=-1, type=int)
@click.option("--entrypoint", help="The dead jobs of this entrypoint.")
@click.option(
    "--status", type=click.Choice(["dead"]), help="The jobs in this state (only dead ones are retried)."
)
@click.option(
    "--finished",
    is_flag=True,
    help="Also run the finished jobs of IDS again (succeeded, canceled, discarded), each as a new job.",
)
@handle_errors
def retry(
    dsn: str | None, ids: tuple[int, ...], entrypoint: str | None, status: str | None, finished: bool
) -> None:
    """Re-queue dead jobs now, with their attempts reset.

    By IDS, or every dead job of --entrypoint (--status dead). With --finished, the finished
    jobs of IDS run again too, each as a new job made from its stored row (pgq.rerun; the
    old id keeps its outcome). Says why a job was not re-queued (not dead, finished, its
    dedupe key taken by a live job); exits 1 when nothing was done or an id is unknown."""
    _filters(ids, entrypoint, status)
    if finished and not ids:
        raise click.UsageError("--finished goes with job ids")
    with psycopg.connect(resolve_dsn(dsn), autocommit=True) as conn:
        if not ids:
            n = 0
            for page in _pages(conn, entrypoint, ("dead",)):
                n += conn.execute("SELECT pgq.retry(%s::bigint[])", (page,)).fetchone()[0]
            click.echo(f"re-queued {plural(n)}")
            _report([], [], n, "re-queued")
            return
        wanted = list(dict.fromkeys(ids))
        before = _states(conn, wanted)
        n = conn.execute("SELECT pgq.retry(%s::bigint[])", (wanted,)).fetchone()[0]
        after = _states(conn, [i for i in wanted if before[i][0] == "dead"])
        again = [i for i in wanted if finished and before[i][0] in FINISHED]
        reruns = conn.execute("SELECT * FROM pgq.rerun(%s::bigint[])", (again,)).fetchall() if again else []
    click.echo(f"re-queued {n} of {plural(len(wanted))}")
    left = []
    for job_id, outcome, new_id, created in reruns:
        if created:
            click.echo(f"job {job_id} ({outcome}) runs again as job {new_id}")
            n += 1
        else:
            left.append(f"job {job_id}: not run again: job {new_id}, live, holds its dedupe key")
    rerun = {r[0] for r in reruns}
    for i in wanted:
        state = before[i][0]
        if state in ("queued", "waiting", "running"):
            left.append(f"job {i}: not re-queued: it is {state}, not dead")
        elif state in FINISHED and not finished:
            left.append(
                f"job {i}: not re-queued: it has finished ({state}); only dead jobs are retried"
                " (--finished runs it again as a new job)"
            )
        elif state in FINISHED and i not in rerun:
            left.append(f"job {i}: not run again: it left the outcome log meanwhile")
        elif state == "dead" and after[i][0] == "dead":
            left.append(
                f"job {i}: not re-queued: a live job (or a newer dead one retried with it) has its dedupe key"
            )
    _report([i for i in wanted if before[i][0] is None], left, n, "re-queued")


COMMANDS = (cancel, retry)
