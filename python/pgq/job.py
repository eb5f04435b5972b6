"""The job a handler receives."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID


class JobCancelled(Exception):
    """Raise from a handler to stop a job whose cancellation was requested (see Job.cancelled)."""


class Snooze(Exception):
    """Raise from a handler to put the job back for `seconds` without spending an attempt
    (pgq.snooze): a rate-limited API, a resource not ready yet. A job may snooze the
    entrypoint's max_snoozes times (default 100); past that the snooze fails it."""

    def __init__(self, seconds: float) -> None:
        number = isinstance(seconds, (int, float)) and not isinstance(seconds, bool)
        if not number or not 0 <= seconds <= 315_360_000:
            raise ValueError(f"Snooze: seconds must be 0 to 10 years, not {seconds!r}")
        super().__init__(f"snoozed for {seconds} s")
        self.seconds = float(seconds)


class _Flag:
    """A one-way flag set by the worker's loop and read by handler threads: all a Job's
    cancellation needs. A threading.Event (a lock and a condition) cost as much to create
    as the rest of the Job."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


@dataclass(frozen=True)
class Job:
    """One delivery of a job.

    Delivery is at-least-once: a job whose worker crashed, lost its connection or missed its
    lease is delivered again, so handlers must be idempotent. `deliveries` counts the times
    the job was claimed (this one included) and `attempt` the failures so far, so a handler
    can tell a re-delivery (`deliveries > 1`) from a first run.
    """

    id: int
    entrypoint: str
    payload: Any
    headers: dict[str, Any] | None
    priority: int
    attempt: int
    deliveries: int
    enqueued_at: datetime
    run_at: datetime
    max_attempts: int | None
    timeout: timedelta
    worker_id: UUID = field(repr=False)
    # The key it counts against (pgq.enqueue's concurrency_key), or None.
    concurrency_key: str | None = None
    _cancel: _Flag = field(default_factory=_Flag, repr=False, compare=False)

    @classmethod
    def _claimed(cls, row: tuple[Any, ...], worker_id: UUID) -> Job:
        """A Job from a claim row (the worker's _CLAIM columns): several times cheaper than
        the frozen dataclass's __init__, which sets each field through object.__setattr__."""
        job = object.__new__(cls)
        job.__dict__.update(zip(_CLAIM_FIELDS, row, strict=True))
        job.__dict__["worker_id"] = worker_id
        job.__dict__["_cancel"] = _Flag()
        return job

    @property
    def cancelled(self) -> bool:
        """True once cancellation was requested (pgq.cancel) or the job ran past its timeout.

        Sync handlers should check it in long loops and raise JobCancelled; async handlers
        are cancelled for them (asyncio.CancelledError).
        """
        return self._cancel.is_set()

    @property
    def redelivered(self) -> bool:
        """True when the job was delivered before (a failed attempt, a crash, a release)."""
        return self.deliveries > 1


# The fields pgq.claim returns, in the order of the worker's claim statement.
_CLAIM_FIELDS = (
    "id",
    "entrypoint",
    "payload",
    "headers",
    "priority",
    "attempt",
    "deliveries",
    "enqueued_at",
    "run_at",
    "max_attempts",
    "timeout",
    "concurrency_key",
)


# The worker's (pgq.worker) public ways in: the claim row's columns, a Job from a claim row,
# and a cancellation request.
CLAIM_FIELDS = _CLAIM_FIELDS


def claimed(row: tuple[Any, ...], worker_id: UUID) -> Job:
    """A Job from a claim row (the columns of CLAIM_FIELDS, in order)."""
    return Job._claimed(row, worker_id)


def request_cancel(job: Job) -> None:
    """Set the job's cancellation flag (Job.cancelled): pgq.cancel, a timeout, a shutdown."""
    job._cancel.set()
