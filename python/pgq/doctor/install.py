"""`pgq doctor`'s checks of the install itself: the schema and code versions against this
package, objects the code no longer defines, the roles, their grants and ownership.

Each check reads and returns what it found; none may change the database (the fixes it
names are `pgq install` / `pgq upgrade`'s to make).
"""

from __future__ import annotations

import re
from collections import Counter

import psycopg

from .. import roles as pgroles
from .._version import __version__
from ..preflight import extension_version, installed_version
from ..resources import code_files, migrations
from .base import Found, Limits, one


def check_version(conn: psycopg.Connection, limits: Limits) -> Found:
    version = installed_version(conn)
    if version is None:
        return [("pgq is not installed in this database", "run `pgq install`")]
    latest = migrations()[-1].version
    found: Found = []
    # An extension install is upgraded by ALTER EXTENSION, never by the CLI.
    ext = extension_version(conn)
    mend = (
        "install the new extension files (pgq sql extension DIR), then ALTER EXTENSION pgq UPDATE"
        if ext is not None
        else "run `pgq upgrade`"
    )
    if version < latest:
        found.append((f"schema version {version} is behind the code's {latest}", mend))
    elif version > latest:
        found.append(
            (f"schema version {version} is newer than the code's {latest}", "upgrade the pgq package")
        )
    installed = (
        one(conn, "SELECT pgq.version()") if one(conn, "SELECT to_regprocedure('pgq.version()')") else None
    )
    if installed != __version__:
        found.append(
            (
                f"the code installed is pgq {installed or 'before 0.2'}"
                f"{' (the extension pgq)' if ext is not None else ''}, this is {__version__}",
                mend,
            )
        )
    return found


_DEFINED = re.compile(
    r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:CONSTRAINT\s+)?(FUNCTION|VIEW|TRIGGER)\s+(?:pgq\.)?(\w+)", re.IGNORECASE
)


def check_stale_objects(conn: psycopg.Connection, limits: Limits) -> Found:
    """Functions (by name and number of overloads), views and triggers in schema pgq that
    the code does not define, such as an old overload that makes calls ambiguous."""
    defined: Counter[tuple[str, str]] = Counter()
    for path in code_files():
        for kind, name in _DEFINED.findall(path.read_text()):
            defined[(kind.upper(), name)] += 1
    present = conn.execute(
        "SELECT 'FUNCTION', proname, count(*) FROM pg_proc"
        " WHERE pronamespace = 'pgq'::regnamespace GROUP BY 2"
        " UNION ALL SELECT 'VIEW', relname, 1 FROM pg_class WHERE relnamespace = 'pgq'::regnamespace"
        "   AND relkind IN ('v', 'm')"
        " UNION ALL SELECT 'TRIGGER', t.tgname, 1 FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
        "   WHERE c.relnamespace = 'pgq'::regnamespace AND NOT t.tgisinternal"
    ).fetchall()
    stale = [
        f"{kind.lower()} pgq.{name}"
        + (f" ({n} overloads, the code defines {defined[(kind, name)]})" if n > 1 else "")
        for kind, name, n in present
        if n > defined[(kind, name)]
    ]
    if stale:
        return [
            (
                f"schema pgq has objects the code does not define: {', '.join(sorted(stale))}",
                "run `pgq upgrade`",
            )
        ]
    return []


def check_roles_and_grants(conn: psycopg.Connection, limits: Limits) -> Found:
    found: Found = []
    # The install's own roles (pgq install --roles), else the default ones.
    prefix = pgroles.installed_prefix(conn) or pgroles.DEFAULT_PREFIX
    owner = pgroles.name("owner", prefix)
    missing = [
        r for r in pgroles.names(prefix) if not one(conn, "SELECT 1 FROM pg_roles WHERE rolname = %s", (r,))
    ]
    if missing:
        found.append((f"roles missing: {', '.join(missing)} (e.g. after a restore)", "run `pgq install`"))
    public = [
        r[0]
        for r in conn.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = 'pgq'::regnamespace"
            "   AND has_function_privilege('public', p.oid, 'EXECUTE')"
            " UNION ALL SELECT c.oid::regclass::text FROM pg_class c"
            "   WHERE c.relnamespace = 'pgq'::regnamespace AND c.relacl::text ~ '(^|[{,])="
            "'"
            " UNION ALL SELECT 'schema pgq' FROM pg_namespace n WHERE n.nspname = 'pgq'"
            "   AND has_schema_privilege('public', n.oid, 'USAGE')"
        )
    ]
    if public:
        found.append(
            (
                f"PUBLIC has privileges on {', '.join(sorted(public))}",
                "run `pgq install` (it resets the grants)",
            )
        )
    if not missing:
        foreign = [
            r[0]
            for r in conn.execute(
                "SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = 'pgq'::regnamespace"
                "   AND p.proowner <> %(owner)s::regrole"
                " UNION ALL SELECT c.oid::regclass::text FROM pg_class c"
                "   WHERE c.relnamespace = 'pgq'::regnamespace"
                "   AND c.relkind IN ('r', 'p', 'v') AND c.relowner <> %(owner)s::regrole",
                {"owner": owner},
            )
        ]
        if foreign:
            found.append((f"not owned by {owner}: {', '.join(sorted(foreign))}", "run `pgq install`"))
    return found
