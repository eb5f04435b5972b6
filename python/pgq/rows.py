"""The rows pgq.Client returns: frozen dataclasses, one per view or table function.

Each dataclass's fields are the columns the client selects, by name, so the views may gain
columns without breaking older clients. pgq.client and pgq re-export them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

__all__ = [
    "DependencyResult",
    "Enqueued",
    "JobResult",
    "JobRow",
    "OutcomeRow",
    "QueueRow",
    "Reason",
    "ScheduleRow",
    "StatsRow",
    "WorkerRow",
]


@dataclass(frozen=True)
class Enqueued:
    """What pgq.enqueue_job did. id: the new job, or the job that stands for this one (a
    job with the same dedupe key, under the call's dedupe_scope and dedupe_window);
    created: this call made a new job; replaced: it rewrote the standing job (dedupe_mode
    'replace'; created is then False)."""

    id: int
    created: bool
    replaced: bool


@dataclass(frozen=True)
class Rerun:
    """A finished job enqueued again by pgq.rerun. new_id: the re-run, or the live job that
    holds its dedupe key and stands for it (created is then False)."""

    job_id: int
    outcome: str
    new_id: int
    created: bool


@dataclass(frozen=True)
class QueueRow:
    """A row of the pgq.queues view: job counts, pause state and effective settings."""

    entrypoint: str
    queued: int
    scheduled: int
    waiting: int
    running: int
    dead: int
    oldest_queued_age: timedelta | None
    paused: bool
    concurrency: int | None
    rate: Decimal | None
    max_attempts: int
    lease: timedelta
    timeout: timedelta
    backoff_base: timedelta
    backoff_max: timedelta
    retention: timedelta
    max_deliveries: int
    key_concurrency: int | None
    max_snoozes: int
    # Some counts of the row are estimates: pgq.queues counts exactly up to
    # pgq.queues_exact_limit (100,000) per entrypoint and state, and estimates above that.
    approximate: bool = False


@dataclass(frozen=True)
class SweepRow:
    """A row of the pgq.sweeps view: when the sweep last ran, how late it is (None: on
    time, or it never ran)."""

    sweep: str
    every: timedelta
    last_run: datetime | None
    age: timedelta | None
    late: timedelta | None


@dataclass(frozen=True)
class WorkerRow:
    """A row of the pgq.workers view. state: alive, dead (reaped) or stopped."""

    id: UUID
    name: str
    entrypoints: list[str]
    state: str
    registered_at: datetime
    heartbeat_at: datetime
    heartbeat_age: timedelta
    stopped_at: datetime | None
    jobs_held: int


@dataclass(frozen=True)
class JobRow:
    """A row of the pgq.jobs view: a live job (queued, waiting, running or dead)."""

    id: int
    entrypoint: str
    status: str
    priority: int
    run_at: datetime
    attempt: int
    deliveries: int
    max_attempts: int
    enqueued_at: datetime
    started_at: datetime | None
    worker_id: UUID | None
    cancel_requested: bool
    dedupe_key: str | None
    last_error: str | None
    payload: Any
    headers: dict[str, Any] | None
    concurrency_key: str | None
    snoozes: int


@dataclass(frozen=True)
class ScheduleRow:
    """A row of the pgq.schedules view: a periodic job (cron in UTC).

    last_run: the fire time of the last job it enqueued (None before the first);
    next_run: None when the cron expression matches no date (e.g. '0 0 31 2 *').
    """

    name: str
    cron: str
    entrypoint: str
    payload: Any
    last_run: datetime | None
    next_run: datetime | None
    created_at: datetime


@dataclass(frozen=True)
class StatsRow:
    """A row of pgq.stats(since): one entrypoint's outcomes over the window.

    succeeded, failed (failed attempts), dead (failures that left a job dead), canceled;
    per_second: succeeded per second of the window; wait (started - enqueued) and run
    (finished - started) percentiles of the succeeded jobs, None when none succeeded.
    """

    entrypoint: str
    succeeded: int
    failed: int
    dead: int
    canceled: int
    per_second: Decimal
    wait_p50: timedelta | None
    wait_p95: timedelta | None
    wait_p99: timedelta | None
    run_p50: timedelta | None
    run_p95: timedelta | None
    run_p99: timedelta | None


@dataclass(frozen=True)
class OutcomeRow:
    """A row of the pgq.outcomes view: a finished job (succeeded, canceled, dead) or one
    failed attempt (failed)."""

    job_id: int
    entrypoint: str
    outcome: str
    priority: int
    attempt: int
    deliveries: int
    enqueued_at: datetime
    started_at: datetime | None
    finished_at: datetime
    worker_id: UUID | None
    error: str | None
    result: Any
    # The key it counted against (pgq.enqueue's concurrency_key), or None.
    concurrency_key: str | None = None


@dataclass(frozen=True)
class JobResult:
    """How a job ended (Client.wait, Client.result).

    status: succeeded, canceled or dead; result: the handler's return value (succeeded
    jobs; None when it returned None); error: the last error of a dead job, or why a job
    was canceled.
    """

    job_id: int
    status: str
    result: Any
    error: str | None


@dataclass(frozen=True)
class Reason:
    """One reason a job is not running now (pgq.explain): reason, a code (finished, dead,
    held, waiting, scheduled, paused, concurrency, key_concurrency, rate, no_worker,
    behind); detail, a sentence; until, when it ends if known; job_ids, the jobs it names
    (the dependencies a job waits for)."""

    reason: str
    detail: str
    until: datetime | None
    job_ids: list[int] | None


@dataclass(frozen=True)
class DependencyResult:
    """One job a job depends on (pgq.dependency_results): its status (as pgq.job_status)
    and, once it succeeded, its result."""

    id: int
    status: str | None
    result: Any


@dataclass(frozen=True)
class Batch:
    """A batch opened by Client.batch: its id and its members' ids, in payload order."""

    id: int
    job_ids: list[int]


@dataclass(frozen=True)
class BatchMember:
    """One member of a batch (pgq.batch_results): its status (as pgq.job_status) and, once
    it succeeded, its result."""

    job_id: int
    status: str | None
    result: Any
