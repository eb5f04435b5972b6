"""Call, the statement a client method runs, and what every statement is built from: the
prepare policy, the shaping of rows, the translation of errors, named arguments.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeAlias

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from ..errors import InvalidArgument, SchemaError, translate

Query: TypeAlias = "sql.Composable | str"
Params: TypeAlias = "Sequence[Any] | dict[str, Any]"


@dataclass(frozen=True)
class Call:
    """One statement. shape: 'rows' (all rows), 'scalar' (first column of the first row),
    'column' (first column of every row), 'none'. intervals: (argument, text) pairs cast
    first on their own, so that a typo names its argument."""

    query: Query
    params: Params = ()
    shape: Literal["rows", "scalar", "column", "none"] = "scalar"
    row_class: type | None = None
    convert: Callable[[Any], Any] = lambda value: value
    intervals: tuple[tuple[str, str], ...] = field(default=())
    # Run as a server-side prepared statement where the connection allows it (see
    # pooled_threshold): the calls a producer makes per job, whose answer cannot change
    # shape across pgq versions (a prepared statement fails once its result type changes).
    prepare: bool = False


INTERVAL_CHECK = "SELECT %s::text::interval"


BACKEND_PID = "SELECT pg_backend_pid()"
# The prepare_threshold of a pooled connection straight to PostgreSQL: a statement is
# prepared on its second execution, and the clients pass prepare=False for every call but
# the Call.prepare ones. (Not on its first: a statement prepared by a call that then fails
# would stay on the server, unknown to psycopg, once per failed call.)
PREPARE_THRESHOLD = 1
# Raised before the statement runs when a prepared statement is not on the server
# connection the call reached, or another one of the same name is: a pooler in between
# that passed the server's backend key on.
STATEMENT_LOST = (psycopg.errors.InvalidSqlStatementName, psycopg.errors.DuplicatePreparedStatement)


def pooled_threshold(prepare: bool, reported_pid: int, server_pid: int | None) -> int | None:
    """psycopg's prepare_threshold for one of a client's pooled connections. Preparing saves
    the server's parse and plan of every call (some 15% of a one-job enqueue). Only on a
    connection straight to PostgreSQL: a pooler in transaction mode (PgBouncer before 1.21)
    would run the next call on another server connection, where the statement does not
    exist. PgBouncer hands out a backend key of its own, so the pid the connection reported
    at startup differs from the server's (server_pid; None when prepare is off). A pooler
    that passes the real key on is caught later (STATEMENT_LOST)."""
    return PREPARE_THRESHOLD if prepare and reported_pid == server_pid else None


def pooled_prepare(call: Call, prepare: bool) -> bool | None:
    """psycopg's prepare argument for a call on a pooled connection."""
    return None if call.prepare and prepare else False


def interval_error(argument: str, text: str, exc: psycopg.DataError) -> InvalidArgument:
    return InvalidArgument(
        f"pgq: invalid argument {argument}: {text!r} is not an interval"
        f" ({exc.diag.message_primary}) (hint: use PostgreSQL interval text, e.g. '30 seconds')"
    )


def database_error(exc: psycopg.Error) -> Exception:
    """The exception to raise for a database error: SchemaError when pgq is missing or
    older than this package, the pgq.errors class of a PQ SQLSTATE, else exc itself."""
    if isinstance(exc, (psycopg.errors.InvalidSchemaName, psycopg.errors.UndefinedTable)):
        err: Exception = SchemaError(
            f"{exc.diag.message_primary} (hint: is pgq installed in this database? Run `pgq install`.)"
        )
    elif isinstance(exc, psycopg.errors.UndefinedFunction):
        err = SchemaError(
            f"{exc.diag.message_primary} (hint: the database's pgq schema may be older"
            " than this package; run `pgq upgrade`.)"
        )
    else:
        return translate(exc)
    err.__cause__ = exc
    return err


def shape_rows(call: Call, rows: list[Any]) -> Any:
    if call.shape == "scalar":
        return call.convert(rows[0][0])
    if call.shape == "column":
        return call.convert([row[0] for row in rows])
    if call.shape == "none":
        return None
    return call.convert(rows)


def columns(cls: type) -> sql.Composed:
    """The dataclass's fields as a column list: the views may gain columns safely."""
    return sql.SQL(", ").join(sql.Identifier(f.name) for f in dataclasses.fields(cls))


def json_param(value: Any) -> Jsonb | None:
    return None if value is None else Jsonb(value)


def id_list(argument: str, job_ids: int | Iterable[int]) -> list[int]:
    if isinstance(job_ids, int):
        return [job_ids]
    if isinstance(job_ids, (str, bytes)):
        raise InvalidArgument(f"pgq: invalid argument {argument}: pass job ids, not a string")
    return list(job_ids)


def check_aware(argument: str, when: object, alternative: str = "") -> None:
    """A point in time must be an aware datetime: a naive one is ambiguous."""
    if not isinstance(when, datetime):
        raise InvalidArgument(f"pgq: invalid argument {argument}: {when!r} is not a datetime{alternative}")
    if when.utcoffset() is None:
        raise InvalidArgument(
            f"pgq: invalid argument {argument}: a naive datetime is ambiguous"
            f" (hint: pass an aware datetime, e.g. datetime.now(timezone.utc){alternative})"
        )


def named_args(fixed: dict[str, tuple[str, Any]], optional: dict[str, tuple[str, Any]]) -> tuple[str, dict]:
    """Named-notation arguments `name => %(name)s::type`; optional ones only when not None,
    so that calls without them work with any pgq schema version."""
    parts, params = [], {}
    for name, (cast, value) in {**fixed, **{k: v for k, v in optional.items() if v[1] is not None}}.items():
        parts.append(f"{name} => %({name})s::{cast}")
        params[name] = value
    return ", ".join(parts), params
