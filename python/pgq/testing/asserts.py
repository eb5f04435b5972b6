"""assert_enqueued / assert_not_enqueued: what a test checks after the code under test ran.

A payload matches when the job's payload contains it (PostgreSQL's jsonb `@>`): the keys
given must be there with those values, other keys may be there too; nested objects match
the same way, and an array matches an array holding at least those elements. Pass
exact=True to compare payloads for equality instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from ..client import Client
from ..dsn import resolve_dsn
from ..rows import JobRow

Source = str | Client | psycopg.Connection[Any] | None

# Jobs that have not run yet: queued (due or later) and waiting on dependencies.
PENDING = ("queued", "waiting")
_SHOWN = 20
_COLUMNS = {f.name for f in dataclasses.fields(JobRow)} | {"depends_on"}


def enqueued(
    source: Source,
    entrypoint: str | None = None,
    *,
    payload: Any = None,
    exact: bool = False,
    statuses: tuple[str, ...] = PENDING,
    **fields: Any,
) -> list[dict[str, Any]]:
    """The live jobs (rows of pgq.jobs, oldest first) that match: `entrypoint`, `payload`
    (containment, or equality with exact=True), a status in `statuses`, and any other
    column of pgq.jobs given by name (priority=5, dedupe_key="k", concurrency_key=...).

    source: a DSN, a pgq.Client, or a psycopg connection (which also sees the jobs of its
    own uncommitted transaction); None: $PGQ_DSN.
    """
    query, params = _query(entrypoint, payload, exact, statuses, fields)
    with _connection(source) as conn, conn.cursor(row_factory=dict_row) as cur:
        # Never prepared: a pgq.Client's pooled connection may prepare by count.
        cur.execute(query, params, prepare=False)
        return cur.fetchall()


def assert_enqueued(
    source: Source,
    entrypoint: str,
    *,
    payload: Any = None,
    count: int | None = None,
    exact: bool = False,
    statuses: tuple[str, ...] = PENDING,
    **fields: Any,
) -> list[dict[str, Any]]:
    """Fail unless a job of `entrypoint` matching the arguments is queued (or waiting);
    with count=N, unless exactly N are. Returns the matching jobs. The failure message
    lists what is queued."""
    found = enqueued(source, entrypoint, payload=payload, exact=exact, statuses=statuses, **fields)
    if (count is None and found) or (count is not None and len(found) == count):
        return found
    wanted = "a job" if count is None else f"{count} job{'s' if count != 1 else ''}"
    raise AssertionError(
        f"expected {wanted} {_describe(entrypoint, payload, exact, statuses, fields)}, found {len(found)}\n"
        + _listing(source, statuses)
    )


def assert_not_enqueued(
    source: Source,
    entrypoint: str,
    *,
    payload: Any = None,
    exact: bool = False,
    statuses: tuple[str, ...] = PENDING,
    **fields: Any,
) -> None:
    """Fail if a job of `entrypoint` matching the arguments is queued (or waiting)."""
    found = enqueued(source, entrypoint, payload=payload, exact=exact, statuses=statuses, **fields)
    if found:
        raise AssertionError(
            f"expected no job {_describe(entrypoint, payload, exact, statuses, fields)}, found {len(found)}\n"
            + _listing(source, statuses)
        )


def _query(
    entrypoint: str | None, payload: Any, exact: bool, statuses: tuple[str, ...], fields: dict[str, Any]
) -> tuple[sql.Composable, list[Any]]:
    unknown = sorted(set(fields) - _COLUMNS)
    if unknown:
        raise TypeError(
            f"not a column of pgq.jobs: {', '.join(unknown)} (columns: {', '.join(sorted(_COLUMNS))})"
        )
    where = [sql.SQL("status = ANY(%s::text[])")]
    params: list[Any] = [list(statuses)]
    if entrypoint is not None:
        where.append(sql.SQL("entrypoint = %s::text"))
        params.append(entrypoint)
    if payload is not None:
        where.append(sql.SQL("payload = %s::jsonb" if exact else "payload @> %s::jsonb"))
        params.append(Jsonb(payload))
    for name, value in sorted(fields.items()):
        if value is None:
            where.append(sql.SQL("{} IS NULL").format(sql.Identifier(name)))
        else:
            json = isinstance(value, (dict, list))
            where.append(sql.SQL("{} = %s" + ("::jsonb" if json else "")).format(sql.Identifier(name)))
            params.append(Jsonb(value) if json else value)
    query = sql.SQL("SELECT * FROM pgq.jobs WHERE {} ORDER BY id").format(sql.SQL(" AND ").join(where))
    return query, params


@contextmanager
def _connection(source: Source) -> Iterator[psycopg.Connection[Any]]:
    if isinstance(source, psycopg.Connection):
        yield source
    elif isinstance(source, Client):
        with source.connection() as conn:
            yield conn
    else:
        with psycopg.connect(resolve_dsn(source), autocommit=True) as conn:
            yield conn


def _describe(
    entrypoint: str, payload: Any, exact: bool, statuses: tuple[str, ...], fields: dict[str, Any]
) -> str:
    text = f"{entrypoint!r} ({' or '.join(statuses)})"
    if payload is not None:
        text += f" with payload {'equal to' if exact else 'containing'} {payload!r}"
    for name, value in sorted(fields.items()):
        text += f", {name}={value!r}"
    return text


def _listing(source: Source, statuses: tuple[str, ...]) -> str:
    jobs = enqueued(source, statuses=statuses)
    if not jobs:
        return f"nothing is {' or '.join(statuses)}"
    lines = [f"{' or '.join(statuses)} ({len(jobs)}):"]
    for job in jobs[:_SHOWN]:
        extra = f" priority={job['priority']}" if job["priority"] else ""
        lines.append(
            f"  job {job['id']} {job['entrypoint']!r} [{job['status']}]{extra} payload={job['payload']!r}"
        )
    if len(jobs) > _SHOWN:
        lines.append(f"  ... and {len(jobs) - _SHOWN} more")
    return "\n".join(lines)
