"""The views: schedules, stats, queues, workers, sweeps, live jobs and the outcome log."""

from __future__ import annotations

from datetime import timedelta

from psycopg import sql

from ..errors import InvalidArgument
from ..rows import JobRow, OutcomeRow, QueueRow, ScheduleRow, StatsRow, SweepRow, WorkerRow
from .call import Call, columns

# The statuses of live jobs (the pgq.jobs view).
LIVE_STATUSES = ("queued", "waiting", "running", "dead")


def schedules() -> Call:
    query = sql.SQL("SELECT {} FROM pgq.schedules ORDER BY name").format(columns(ScheduleRow))
    return Call(query, shape="rows", row_class=ScheduleRow)


def stats(since: timedelta | str) -> Call:
    query = sql.SQL("SELECT {} FROM pgq.stats(since => %s::interval) ORDER BY entrypoint").format(
        columns(StatsRow)
    )
    checks = (("since", since),) if isinstance(since, str) else ()
    return Call(query, (since,), shape="rows", row_class=StatsRow, intervals=checks)


def queues() -> Call:
    query = sql.SQL("SELECT {} FROM pgq.queues ORDER BY entrypoint").format(columns(QueueRow))
    return Call(query, shape="rows", row_class=QueueRow)


def workers() -> Call:
    query = sql.SQL("SELECT {} FROM pgq.workers ORDER BY state = 'alive' DESC, registered_at DESC").format(
        columns(WorkerRow)
    )
    return Call(query, shape="rows", row_class=WorkerRow)


def sweeps() -> Call:
    query = sql.SQL("SELECT {} FROM pgq.sweeps").format(columns(SweepRow))
    return Call(query, shape="rows", row_class=SweepRow)


def jobs(entrypoint: str | None, status: str | None, limit: int) -> Call:
    if status is not None and status not in LIVE_STATUSES:
        raise InvalidArgument(
            f"pgq: invalid argument status: {status!r} is not a live status"
            f" (hint: use one of {', '.join(LIVE_STATUSES)}; finished jobs are in outcomes())"
        )
    _check_limit(limit)
    query = sql.SQL(
        "SELECT {} FROM pgq.jobs"
        " WHERE (%(entrypoint)s::text IS NULL OR entrypoint = %(entrypoint)s::text)"
        " AND (%(status)s::text IS NULL OR status = %(status)s::text)"
        " ORDER BY id LIMIT %(limit)s::integer"
    ).format(columns(JobRow))
    params = {"entrypoint": entrypoint, "status": status, "limit": limit}
    return Call(query, params, shape="rows", row_class=JobRow)


OUTCOMES = ("succeeded", "canceled", "dead", "failed")


def outcomes(entrypoint: str | None, outcome: str | None, limit: int) -> Call:
    """Rows of pgq.outcomes, newest first (outcome: succeeded, canceled, dead, failed)."""
    if outcome is not None and outcome not in OUTCOMES:
        raise InvalidArgument(
            f"pgq: invalid argument outcome: {outcome!r} (hint: use one of {', '.join(OUTCOMES)})"
        )
    _check_limit(limit)
    query = sql.SQL(
        "SELECT {} FROM pgq.outcomes"
        " WHERE (%(entrypoint)s::text IS NULL OR entrypoint = %(entrypoint)s::text)"
        " AND (%(outcome)s::text IS NULL OR outcome = %(outcome)s::text)"
        " ORDER BY finished_at DESC, job_id DESC LIMIT %(limit)s::integer"
    ).format(columns(OutcomeRow))
    params = {"entrypoint": entrypoint, "outcome": outcome, "limit": limit}
    return Call(query, params, shape="rows", row_class=OutcomeRow)


def _check_limit(limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidArgument(f"pgq: invalid argument limit: {limit!r} (hint: use a positive integer)")
