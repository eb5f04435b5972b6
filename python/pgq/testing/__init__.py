"""Helpers for testing code that uses pgq.

    from pgq.testing import assert_enqueued, drain

- The pytest plugin (pgq.testing.plugin, loaded automatically): fixtures `pgq_dsn`, a
  database of the test's own with pgq installed, and `pgq_client`.
- drain(worker): runs the worker's queued jobs in-process until none is due.
- assert_enqueued / assert_not_enqueued / enqueued: what is queued.
"""

from .asserts import assert_enqueued, assert_not_enqueued, enqueued
from .databases import Databases
from .drain import DrainedRun, DrainError, DrainResult, drain, drain_async

__all__ = [
    "Databases",
    "DrainError",
    "DrainResult",
    "DrainedRun",
    "assert_enqueued",
    "assert_not_enqueued",
    "drain",
    "drain_async",
    "enqueued",
]
