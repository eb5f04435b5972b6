"""pgq: a job queue that lives inside PostgreSQL.

Delivery is at-least-once: a job whose worker crashes is delivered again, so handlers must
be idempotent.
"""

from .client import Client
from .errors import (
    InvalidArgument,
    InvalidCron,
    PayloadTooLarge,
    PgqError,
    SchemaError,
    UnknownWorker,
    WorkerGone,
)
from .job import Job, JobCancelled
from .rows import JobRow, QueueRow, ScheduleRow, StatsRow, WorkerRow
from .worker import Worker

__all__ = [
    "Client",
    "InvalidArgument",
    "InvalidCron",
    "Job",
    "JobCancelled",
    "JobRow",
    "PayloadTooLarge",
    "PgqError",
    "QueueRow",
    "ScheduleRow",
    "SchemaError",
    "StatsRow",
    "UnknownWorker",
    "Worker",
    "WorkerGone",
    "WorkerRow",
]
__version__ = "0.1.0"
