"""pgq: a job queue that lives inside PostgreSQL.

Delivery is at-least-once: a job whose worker crashes is delivered again, so handlers must
be idempotent.
"""

from ._version import __version__
from .async_client import AsyncClient
from .client import Client
from .errors import (
    InstallMismatch,
    InvalidArgument,
    InvalidCron,
    PayloadTooLarge,
    PgqError,
    SchemaError,
    UnknownJob,
    UnknownWorker,
    UnsupportedServer,
    WorkerGone,
    WorkerOfAnotherRole,
    WrongIsolation,
)
from .job import Job, JobCancelled, Snooze
from .rows import (
    Batch,
    BatchMember,
    DependencyResult,
    Enqueued,
    JobResult,
    JobRow,
    OutcomeRow,
    QueueRow,
    Reason,
    ScheduleRow,
    StatsRow,
    SweepRow,
    WorkerRow,
)
from .steps import DeliveryLost
from .worker import Worker

__all__ = [
    "AsyncClient",
    "Batch",
    "BatchMember",
    "Client",
    "DeliveryLost",
    "DependencyResult",
    "Enqueued",
    "InstallMismatch",
    "InvalidArgument",
    "InvalidCron",
    "Job",
    "JobCancelled",
    "JobResult",
    "JobRow",
    "OutcomeRow",
    "PayloadTooLarge",
    "PgqError",
    "QueueRow",
    "Reason",
    "ScheduleRow",
    "SchemaError",
    "Snooze",
    "StatsRow",
    "SweepRow",
    "UnknownJob",
    "UnknownWorker",
    "UnsupportedServer",
    "Worker",
    "WorkerGone",
    "WorkerOfAnotherRole",
    "WorkerRow",
    "WrongIsolation",
    "__version__",
]
