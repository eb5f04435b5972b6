"""Exceptions of pgq. SQL errors of class PQ map to subclasses of PgqError by SQLSTATE.

The codes are documented in docs/errors.md; keep the two in step.
"""

from __future__ import annotations

import psycopg


class PgqError(Exception):
    """Base class of every error pgq raises."""

    sqlstate: str | None = None


class InvalidArgument(PgqError):
    """PQ001: an argument is NULL, empty, malformed or out of range."""

    sqlstate = "PQ001"


class UnknownWorker(PgqError):
    """PQ002: the worker id was never registered (or its row was pruned)."""

    sqlstate = "PQ002"


class WorkerGone(PgqError):
    """PQ003: the worker stopped or was reaped as dead; it must register again."""

    sqlstate = "PQ003"


class PayloadTooLarge(PgqError):
    """PQ004: a payload or headers value is over its documented size limit."""

    sqlstate = "PQ004"


class InvalidCron(InvalidArgument):
    """PQ006: a cron expression given to pgq.schedule is malformed (the message names the field)."""

    sqlstate = "PQ006"


class WrongIsolation(PgqError):
    """PQ007: a claim of a concurrency-limited entrypoint, or an enqueue with a
    dedupe_window, ran outside READ COMMITTED."""

    sqlstate = "PQ007"


class WorkerOfAnotherRole(PgqError):
    """PQ010: the worker id was registered by another login role (only it and pgq_admin may use it)."""

    sqlstate = "PQ010"


class UnknownJob(PgqError, LookupError):
    """PQ005 (pgq.explain), or found by the client: a job id that pgq does not know: never
    enqueued, or finished and pruned from the log (or not the caller's to read)."""

    sqlstate = "PQ005"


class SchemaError(PgqError):
    """The database schema cannot be installed or upgraded (foreign schema, newer version)."""


class UnsupportedServer(SchemaError):
    """PQ011: the server is older than PostgreSQL 14; pgq install and upgrade refuse it."""

    sqlstate = "PQ011"


class InstallMismatch(SchemaError):
    """PQ012: an install or upgrade script met a database in another state than it is for
    (pgq already there, another release, or installed the other way: by `pgq install` or as
    the extension)."""

    sqlstate = "PQ012"


_BY_SQLSTATE = {
    cls.sqlstate: cls
    for cls in (
        InvalidArgument,
        UnknownWorker,
        WorkerGone,
        PayloadTooLarge,
        UnknownJob,
        InvalidCron,
        WrongIsolation,
        WorkerOfAnotherRole,
        UnsupportedServer,
        InstallMismatch,
    )
}


def translate(exc: psycopg.Error) -> Exception:
    """Return the pgq exception for a database error of class PQ, else the error itself."""
    cls = _BY_SQLSTATE.get(exc.sqlstate or "")
    if cls is None:
        return exc
    diag = exc.diag
    message = diag.message_primary or str(exc)
    if diag.message_hint:
        message = f"{message} (hint: {diag.message_hint})"
    err = cls(message)
    err.__cause__ = exc
    return err
