"""pgq: a job queue that lives inside PostgreSQL.

Delivery is at-least-once: a job whose worker crashes is delivered again, so handlers must
be idempotent.
"""

from .client import Client, JobRow, QueueRow, WorkerRow
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
    "SchemaError",
    "UnknownWorker",
    "Worker",
    "WorkerGone",
    "WorkerRow",
]
__version__ = "0.1.0"
