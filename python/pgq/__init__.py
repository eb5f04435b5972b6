"""pgq: a job queue that lives inside PostgreSQL.

Delivery is at-least-once: a job whose worker crashes is delivered again, so handlers must
be idempotent.
"""

from .errors import (
    InvalidArgument,
    PayloadTooLarge,
    PgqError,
    SchemaError,
    UnknownWorker,
    WorkerGone,
)

__all__ = [
    "InvalidArgument",
    "PayloadTooLarge",
    "PgqError",
    "SchemaError",
    "UnknownWorker",
    "WorkerGone",
]
__version__ = "0.1.0"
