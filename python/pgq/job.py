"""The job a handler receives."""

from __future__ import annotations

from collections.abc import Callable
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
    lease is delivered again, so handlers must be idempotent. `attempt` is the number of
    this run, from 1 (failures so far + 1: a snooze spends none; `max_attempts` runs at
    most). `deliveries` counts the times the job was claimed, this one included (snoozes
    and lost deliveries too). `reason` says why it is delivered now:

    - ``"first"``: its first delivery;
    - ``"retry"``: the last delivery failed (or timed out), or pgq.retry revived the job;
    - ``"snooze"``: the last delivery snoozed (`Snooze`);
    - ``"lost"``: the last delivery ended without an outcome: its worker crashed, lost its
      connection or lease, or gave the job back at shutdown while it ran. That run may have
      done some or all of its work: check before doing it again (`maybe_ran`).
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
    # Why this delivery: first, retry, snooze or lost (see the class's docstring).
    reason: str = "first"
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

    def step(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        """A durable step (docs/steps.md): the first time step `name` of this job completes,
        fn(*args)'s result (JSON) is stored; on any later delivery fn is not called and the
        stored result is returned. A step that raises stores nothing. In a sync handler this
        returns the result; in an async one, `await job.step(...)` (fn may be sync or async).
        Raises pgq.DeliveryLost when this delivery no longer holds the job."""
        from . import steps  # only handlers that take steps load it

        return steps.step(self, name, fn, args)

    def progress(self, value: float, note: str | None = None) -> Any:
        """Report how far the job has come (pgq.progress): a fraction 0-1 or a count of items
        done, and an optional note. Stored on the job (pgq.job's `progress`) and notified
        (Client.wait's on_progress). Sync handlers call it; async ones await it. Raises
        pgq.DeliveryLost when this delivery no longer holds the job."""
        from . import steps

        return steps.progress(self, value, note)

    def dependency_results(self) -> Any:
        """The results of the jobs this one depends on (its depends_on, as pgq.enqueue kept
        them: those it had to wait for), as {job id: result} (pgq.dependency_results). Sync
        handlers call it; async ones await it."""
        from . import steps

        return steps.dependency_results(self)

    @property
    def redelivered(self) -> bool:
        """True when the job was delivered before (a failed attempt, a snooze, a crash, a
        release): `reason` says which."""
        return self.deliveries > 1

    @property
    def maybe_ran(self) -> bool:
        """True when the last delivery may have run this handler without its outcome being
        recorded (reason "lost": a crash, a lost lease, a release at shutdown): the work may
        be done already, in part or whole. Retries and snoozes follow an outcome the
        handler itself reported, so they are not."""
        return self.reason == "lost"


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
    "reason",
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
