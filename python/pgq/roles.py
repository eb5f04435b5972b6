"""The roles of one install: `<prefix>owner`, `<prefix>producer`, `<prefix>worker`,
`<prefix>admin`.

Roles belong to the cluster, not to a database: with the default prefix `pgq_` every
database of the cluster that installs pgq shares the same four roles (a login given
pgq_worker for one is a worker in all of them, and a second installer is made a member of
the pgq_owner that owns the first database's queue). `pgq install --roles app1_` gives an
install roles of its own. The prefix is recorded in the database (pgq._install), so that
upgrade, doctor and uninstall find the install's roles without being told.

The SQL in sql/ names the default roles. For another prefix it is rendered before it runs:
every whole-word `pgq_owner`, `pgq_producer`, `pgq_worker` and `pgq_admin` becomes the
install's name, in statements and in function bodies alike (`pg_has_role(session_user,
'pgq_admin', ...)`), so a function names its install's role as a constant: no dynamic SQL,
nothing looked up per call. A prefix is lower-case letters, digits and underscores, so the
rendered names need no quoting wherever they land. The default install runs the files as
they are, byte for byte.
"""

from __future__ import annotations

import re

import psycopg

from .errors import SchemaError

DEFAULT_PREFIX = "pgq_"
KINDS = ("owner", "producer", "worker", "admin")

_PREFIX = re.compile(r"[a-z][a-z0-9_]*")
# The longest kind is "producer": the role name must fit PostgreSQL's 63 bytes.
_MAX_PREFIX = 63 - len("producer")
_DEFAULT_NAME = re.compile(r"\bpgq_(owner|producer|worker|admin)\b")


def check_prefix(prefix: str) -> str:
    """The prefix, or SchemaError saying what a prefix may be."""
    if not _PREFIX.fullmatch(prefix) or len(prefix) > _MAX_PREFIX:
        raise SchemaError(
            f"role prefix {prefix!r} is not usable: it must start with a lower-case letter and hold"
            f" only lower-case letters, digits and underscores, at most {_MAX_PREFIX} characters"
            " (e.g. app1_)"
        )
    return prefix


def names(prefix: str = DEFAULT_PREFIX) -> tuple[str, ...]:
    """The install's roles: owner, producer, worker, admin."""
    return tuple(prefix + kind for kind in KINDS)


def name(kind: str, prefix: str = DEFAULT_PREFIX) -> str:
    if kind not in KINDS:
        raise ValueError(f"unknown role kind {kind!r}")
    return prefix + kind


def render(text: str, prefix: str) -> str:
    """SQL text of sql/ or migrations/ with the install's role names."""
    if prefix == DEFAULT_PREFIX:
        return text
    check_prefix(prefix)
    return _DEFAULT_NAME.sub(lambda m: prefix + m.group(1), text)


def installed_prefix(conn: psycopg.Connection) -> str | None:
    """The role prefix recorded by the install in this database; the default for an install
    older than the record; None when pgq is not installed. A role that may not read the
    record (not an owner) reads it off the owner of schema pgq, `<prefix>owner`."""
    row = conn.execute(
        "SELECT to_regclass('pgq._install') IS NOT NULL,"
        " (SELECT n.nspowner::regrole::text FROM pg_namespace AS n WHERE n.nspname = 'pgq')"
    ).fetchone()
    assert row is not None
    recorded, owner = row
    if owner is None:
        return None
    if not recorded:
        return DEFAULT_PREFIX
    readable = conn.execute("SELECT has_table_privilege('pgq._install', 'SELECT')").fetchone()
    if readable and readable[0]:
        found = conn.execute("SELECT role_prefix FROM pgq._install").fetchone()
        return str(found[0]) if found else DEFAULT_PREFIX
    owner = str(owner).strip('"')
    return owner[: -len("owner")] if owner.endswith("owner") else DEFAULT_PREFIX
