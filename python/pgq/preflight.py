"""What an install, upgrade or uninstall reads and checks before it changes anything: the
server's version, whether and how pgq is installed (its migration version, the extension),
the prefix of the install's roles, and the rights of the role that runs it.

Each check reads or raises; none of them ever changes the database (pgq.migrate does, after
they pass), so a refusal always leaves the database as it was.
"""

from __future__ import annotations

import psycopg

from . import roles as pgroles
from .errors import InstallMismatch, SchemaError, translate
from .resources import server_check_file

_MARK = "pgq-sql job queue"


def installed_version(conn: psycopg.Connection) -> int | None:
    """The newest applied migration, None when pgq is not installed.

    Raises SchemaError when a schema named pgq exists that pgq did not create (Skytools
    PgQ uses the same name): mixing with it would break both.
    """
    row = conn.execute(
        "SELECT obj_description(n.oid, 'pg_namespace'), to_regclass('pgq._migrations') IS NOT NULL"
        " FROM pg_namespace n WHERE n.nspname = 'pgq'"
    ).fetchone()
    if row is None:
        return None
    comment, tracked = row
    if comment != _MARK or not tracked:
        raise SchemaError(
            "database already has a schema named pgq that pgq-sql did not create"
            " (Skytools PgQ uses that name too); refusing to mix with it."
            " Install into another database, or drop that schema if it is unused."
        )
    version = conn.execute("SELECT max(version) FROM pgq._migrations").fetchone()[0]
    return version or 0


def extension_version(conn: psycopg.Connection) -> str | None:
    """The version of the extension pgq when pgq was installed with CREATE EXTENSION, else
    None (installed by `pgq install` or its SQL script, or not installed)."""
    row = conn.execute("SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'pgq'").fetchone()
    return row[0] if row else None


def install_kind(conn: psycopg.Connection) -> str | None:
    """How pgq was installed here: 'extension', 'cli' (pgq install or its SQL script), or
    None when it is not installed."""
    if extension_version(conn) is not None:
        return "extension"
    return None if installed_version(conn) is None else "cli"


def refuse_extension(conn: psycopg.Connection, command: str) -> None:
    """The CLI never changes an extension's objects: PostgreSQL would record them wrongly
    (objects the CLI creates would not be members of the extension)."""
    version = extension_version(conn)
    if version is not None:
        hint = {
            "install": "upgrade it with ALTER EXTENSION pgq UPDATE (after installing the new"
            " extension files: pgq sql extension DIR)",
            "upgrade": "upgrade it with ALTER EXTENSION pgq UPDATE (after installing the new"
            " extension files: pgq sql extension DIR)",
            "uninstall": "remove it with DROP EXTENSION pgq (then DROP SCHEMA pgq)",
        }[command]
        raise InstallMismatch(
            f"pgq {version} is installed in this database as the extension pgq; `pgq {command}`"
            f" changes nothing there: {hint}"
        )


def check_privileges(conn: psycopg.Connection, installed: bool, prefix: str = pgroles.DEFAULT_PREFIX) -> None:
    """Raise SchemaError, before anything changes, when this role cannot install/upgrade
    with the roles of `prefix`."""
    owner, admin = pgroles.name("owner", prefix), pgroles.name("admin", prefix)
    superuser, createrole, create_db, missing, owner_ok = conn.execute(
        "SELECT r.rolsuper, r.rolcreaterole, has_database_privilege(current_database(), 'CREATE'),"
        " ARRAY(SELECT n FROM unnest(%s::text[]) AS n WHERE n NOT IN (SELECT rolname FROM pg_roles)),"
        " (SELECT bool_and(pg_has_role(current_user, n.nspowner, 'USAGE'))"
        "    FROM pg_namespace n WHERE n.nspname = 'pgq')"
        " FROM pg_roles r WHERE r.rolname = current_user",
        (list(pgroles.names(prefix)),),
    ).fetchone()
    if superuser:
        return
    problems = []
    if missing and not createrole:
        problems.append(f"creating the roles {', '.join(missing)} needs CREATEROLE")
    elif not createrole:
        lacking = [
            r
            for r in (owner, admin)
            if r not in missing
            and not conn.execute("SELECT pg_has_role(current_user, %s, 'MEMBER')", (r,)).fetchone()[0]
        ]
        if lacking:
            problems.append(f"membership in {', '.join(lacking)} (or CREATEROLE to grant it)")
    if not installed and not create_db:
        problems.append("CREATE on this database")
    if installed and not owner_ok:
        problems.append("membership in the role that owns schema pgq (or a superuser)")
    if problems:
        raise SchemaError(
            "this role cannot install pgq here; nothing was changed. It needs: " + "; ".join(problems)
        )


def role_prefix(conn: psycopg.Connection, installed: bool, roles: str | None) -> str:
    """The prefix of the install's roles: recorded by an existing install (which `roles`
    may repeat but not change), else `roles`, else the default."""
    if roles is not None:
        pgroles.check_prefix(roles)
    if not installed:
        return roles or pgroles.DEFAULT_PREFIX
    recorded = pgroles.installed_prefix(conn) or pgroles.DEFAULT_PREFIX
    if roles is not None and roles != recorded:
        raise SchemaError(
            f"pgq in this database was installed with the roles {', '.join(pgroles.names(recorded))}"
            f" (prefix {recorded!r}); --roles {roles} cannot change them; nothing was changed."
            f" Run it again with --roles {recorded}, or without --roles"
        )
    return recorded


def check_server(conn: psycopg.Connection) -> None:
    """Raise UnsupportedServer (PQ011) on a server older than PostgreSQL 14, before anything
    changes. The check is SQL (sql/require_server.sql), so an install by hand meets it too."""
    try:
        conn.execute(server_check_file().read_text())
    except psycopg.Error as exc:
        raise translate(exc) from exc
