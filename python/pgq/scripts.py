"""pgq's install and upgrade as plain SQL scripts, for psql, migration tools and the
extension (`pgq sql install`, `pgq sql upgrade --from`, `pgq sql extension DIR`).

The scripts are made of the very files `pgq install` and `pgq upgrade` run (sql/ and
migrations/, through pgq.resources), in the same order, so there is one definition of the
schema. What the CLI does in Python around them becomes SQL here: the guard that the
database is in the state the script expects, the record of the applied migrations, and
the up-front lock of an upgrade. This module must never hold SQL of its own that decides a
job's fate: it only assembles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from . import roles as pgroles
from ._version import __version__
from .resources import Migration, code_files, migrations, schema_files, sql_root


@dataclass(frozen=True)
class Source:
    """Whose sql/ and migrations/ a script is made of: this package's, or (when a release is
    frozen, scripts/freeze.sh) an earlier release's tree."""

    version: str = __version__
    root: Path = field(default_factory=sql_root)


# The releases an upgrade script can start from: the newest migration each one shipped.
RELEASES: dict[str, int] = {"0.1.0": 2, "0.2.0": 13}
# The release frozen as an install script (the extension's first version).
BASE_RELEASE = "0.2.0"

# An install script runs only where pgq is absent; CREATE EXTENSION also refuses a
# database where the CLI installed pgq (the two kinds of install never mix by accident).
_GUARD_ABSENT = """\
DO $guard$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = 'pgq') THEN
        RAISE EXCEPTION USING ERRCODE = 'PQ012',
            MESSAGE = 'pgq: schema pgq already exists in this database; nothing was changed',
            HINT = 'Upgrade it instead: pgq upgrade, or the script of pgq sql upgrade --from '
                   'VERSION (SELECT pgq.version() says which); an extension install upgrades '
                   'with ALTER EXTENSION pgq UPDATE.';
    END IF;
END
$guard$;
"""

_GUARD_VERSION = """\
DO $guard$
DECLARE
    v_found integer;
    v_prefix text;
BEGIN
    IF pg_catalog.to_regclass('pgq._migrations') IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'PQ012',
            MESSAGE = 'pgq: pgq is not installed in this database; nothing was changed',
            HINT = 'Install it with the script of pgq sql install (or pgq install).';
    END IF;
    SELECT max(version) INTO v_found FROM pgq._migrations;
    -- The install's roles, as pgq upgrade keeps them (an install older than the record has
    -- the default ones): a script for other roles would hand the schema to those.
    IF pg_catalog.to_regclass('pgq._install') IS NOT NULL THEN
        SELECT i.role_prefix INTO v_prefix FROM pgq._install AS i;
    END IF;
    IF coalesce(v_prefix, '{default_prefix}') IS DISTINCT FROM '{prefix}' THEN
        RAISE EXCEPTION USING ERRCODE = 'PQ012',
            MESSAGE = pg_catalog.format(
                'pgq: pgq in this database was installed with the roles of prefix %s; this script is'
                ' for the roles of prefix {prefix}; nothing was changed',
                coalesce(v_prefix, '{default_prefix}')),
            HINT = 'Print it for the install''s roles: pgq sql upgrade --from {release} --roles PREFIX.';
    END IF;
    IF v_found IS DISTINCT FROM {migration} THEN
        RAISE EXCEPTION USING ERRCODE = 'PQ012',
            MESSAGE = pg_catalog.format(
                'pgq: this script upgrades pgq {release} (schema version {migration}); the database'
                ' is at schema version %s; nothing was changed', v_found),
            HINT = 'Print the script for the installed release: pgq sql upgrade --from '
                   '(SELECT pgq.version()).';
    END IF;
END
$guard$;
"""

# A plain script runs in one transaction (psql -1, a migration tool's transaction): run
# statement by statement, an error leaves pgq half installed or half upgraded. Its first
# statement marks the transaction (a setting local to it); the second refuses to go on in
# another one, before anything is changed. (If psql goes on past errors, sql/reconcile.sql
# still drops nothing.)
_MARK_TRANSACTION = """\
DO $mark$
BEGIN
    PERFORM pg_catalog.set_config('pgq.script_xact', pg_catalog.pg_current_xact_id()::text, true);
END
$mark$;
"""
_GUARD_TRANSACTION = """\
DO $guard$
BEGIN
    IF pg_catalog.current_setting('pgq.script_xact', true)
       IS DISTINCT FROM pg_catalog.pg_current_xact_id()::text THEN
        RAISE EXCEPTION USING ERRCODE = 'PQ012',
            MESSAGE = 'pgq: this script must run in one transaction; nothing was changed',
            HINT = 'psql -v ON_ERROR_STOP=1 -1 -f FILE (a migration tool: one transaction per script).';
    END IF;
END
$guard$;
"""

# A plain upgrade script refuses an extension install (as pgq upgrade does): it would
# leave the extension at its old version, which ALTER EXTENSION UPDATE then can never
# update, and the functions it adds outside the extension.
_GUARD_NOT_EXTENSION = """\
DO $guard$
DECLARE
    v_version text;
BEGIN
    SELECT e.extversion INTO v_version FROM pg_catalog.pg_extension AS e WHERE e.extname = 'pgq';
    IF FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PQ012',
            MESSAGE = pg_catalog.format(
                'pgq: pgq %s is installed in this database as the extension pgq; this script changes'
                ' nothing there', v_version),
            HINT = 'Upgrade it with ALTER EXTENSION pgq UPDATE (after installing the new extension '
                   'files: pgq sql extension DIR).';
    END IF;
END
$guard$;
"""


def _one_transaction() -> str:
    return _section("guard: one transaction", _MARK_TRANSACTION + _GUARD_TRANSACTION)


# Every table and view of pgq locked first, in one statement, as pgq.migrate._lock_schema
# does: locked statement by statement, an upgrade and a running worker can deadlock. Each
# try waits at most 500 ms; a failed try gives its locks back at once (its subtransaction
# ends), so busy workers go on, and the script tries again, for about two minutes at most.
_LOCK_ALL = """\
DO $lock$
DECLARE
    v_stmt text;
    v_try integer := 0;
BEGIN
    SELECT 'LOCK TABLE ' || pg_catalog.string_agg(pg_catalog.format('pgq.%I', c.relname), ', '
                                                 ORDER BY c.relname)
           || ' IN ACCESS EXCLUSIVE MODE'
    INTO v_stmt
    FROM pg_catalog.pg_class AS c
    WHERE c.relnamespace = 'pgq'::regnamespace AND c.relkind IN ('r', 'p', 'v')
      AND NOT c.relispartition;
    PERFORM pg_catalog.set_config('lock_timeout', '500ms', true);
    LOOP
        BEGIN
            EXECUTE v_stmt;
            EXIT;
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            v_try := v_try + 1;
            IF v_try >= 100 THEN
                RAISE EXCEPTION USING ERRCODE = 'PQ012',
                    MESSAGE = 'pgq: could not lock pgq''s tables for the upgrade in 100 tries; '
                              'nothing was changed',
                    HINT = 'A long transaction holds them? Try again.';
            END IF;
            PERFORM pg_catalog.pg_sleep(least(0.02 * v_try, 1.0));
        END;
    END LOOP;
    PERFORM pg_catalog.set_config('lock_timeout', '0', true);
END
$lock$;
"""


def _section(title: str, text: str) -> str:
    return f"-- ==== {title} ====\n{text.rstrip()}\n\n"


def _file(path: Path, prefix: str, src: Source) -> str:
    body = pgroles.render(path.read_text().replace("@PGQ_VERSION@", src.version), prefix)
    return _section(str(path.relative_to(src.root)), body)


def _record(mig: Migration) -> str:
    return f"INSERT INTO pgq._migrations (version, name) VALUES ({mig.version}, '{mig.name}');\n"


def _code(prefix: str, src: Source) -> str:
    return "".join(_file(path, prefix, src) for path in code_files(src.root))


def install_body(prefix: str = pgroles.DEFAULT_PREFIX, src: Source | None = None) -> str:
    """The statements of a fresh install (what `pgq install --no-cron` runs in its
    transaction), after the guard."""
    src = src or Source()
    pgroles.check_prefix(prefix)
    parts = [_section("guard: pgq is not installed here", _GUARD_ABSENT)]
    parts += [_file(path, prefix, src) for path in schema_files(src.root)]
    parts.append(
        _section(
            "the install's record",
            f"UPDATE pgq._install SET role_prefix = '{prefix}';\n"
            + "".join(_record(m) for m in migrations(src.root)),
        )
    )
    parts.append(_code(prefix, src))
    return "".join(parts)


def pending(release: str) -> list[Migration]:
    """The migrations an upgrade from `release` applies; ValueError for an unknown release."""
    if release not in RELEASES:
        known = ", ".join(RELEASES)
        raise ValueError(f"unknown release {release!r}: an upgrade script starts from one of {known}")
    return [m for m in migrations() if m.version > RELEASES[release]]


def upgrade_body(release: str, prefix: str = pgroles.DEFAULT_PREFIX) -> str:
    """The statements of an upgrade from `release` (what `pgq upgrade --no-cron` runs)."""
    pgroles.check_prefix(prefix)
    todo = pending(release)
    guard = _GUARD_VERSION.format(
        release=release, migration=RELEASES[release], prefix=prefix, default_prefix=pgroles.DEFAULT_PREFIX
    )
    parts = [_section(f"guard: pgq {release} is installed here", guard), _section("locks", _LOCK_ALL)]
    for mig in todo:
        parts.append(
            _section(f"migrations/{mig.path.name}", pgroles.render(mig.sql, prefix) + "\n" + _record(mig))
        )
    parts.append(_code(prefix, Source()))
    return "".join(parts)


def _header(what: str, run: str, version: str = __version__) -> str:
    return (
        f"-- pgq {version}: {what}.\n"
        f"-- Generated from pgq's sql/ and migrations/ (the files `pgq install` runs); do not edit.\n"
        f"-- {run}\n\n"
    )


def install_script(prefix: str = pgroles.DEFAULT_PREFIX) -> str:
    """`pgq sql install`: a fresh install for psql or a migration tool, one transaction."""
    run = "Run it in one transaction: psql -v ON_ERROR_STOP=1 -1 -f FILE (then SELECT pgq.schedule_sweeps())."
    return _header("a fresh install", run) + _one_transaction() + install_body(prefix)


def upgrade_script(release: str, prefix: str = pgroles.DEFAULT_PREFIX) -> str:
    """`pgq sql upgrade --from RELEASE`: the upgrade from RELEASE, one transaction."""
    run = "Run it in one transaction: psql -v ON_ERROR_STOP=1 -1 -f FILE."
    return (
        _header(f"the upgrade from {release}", run)
        + _one_transaction()
        + _section("guard: not the extension", _GUARD_NOT_EXTENSION)
        + upgrade_body(release, prefix)
    )


# --- the extension ---------------------------------------------------------------------

EXTENSION = "pgq"
_CONTROL = """\
# pgq: a job queue that lives inside PostgreSQL (generated by `pgq sql extension`).
comment = 'pgq: a job queue inside PostgreSQL (enqueue, claim, settle from SQL)'
default_version = '{version}'
# Schema pgq is created by CREATE EXTENSION when missing; everything in it is handed to the
# NOLOGIN role pgq_owner by the script (sql/reconcile.sql), as pgq install does.
schema = pgq
relocatable = false
superuser = true
trusted = false
"""
_ECHO = '\\echo Use "CREATE EXTENSION pgq" (or ALTER EXTENSION pgq UPDATE) to load this file. \\quit\n'

# CREATE EXTENSION refuses a database where `pgq install` put pgq (PostgreSQL has no
# FROM unpackaged any more: a CLI install stays one).
_GUARD_NOT_CLI = """\
DO $guard$
BEGIN
    IF pg_catalog.to_regclass('pgq._migrations') IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'PQ012',
            MESSAGE = 'pgq: pgq is already installed in this database by pgq install (or its '
                      'SQL script); CREATE EXTENSION pgq changes nothing',
            HINT = 'Keep upgrading it the way it was installed: pgq upgrade, or pgq sql upgrade.';
    END IF;
END
$guard$;
"""

# What pg_dump writes of the extension's tables: everything users put there. The rows the
# scripts themselves write (the migration record, the install row) are written again by
# CREATE EXTENSION on restore, so they are not dumped. Tables a sweep creates later (the
# outcome log's daily partitions) are not members of the extension: pg_dump dumps them
# whole, like any table.
_CONFIG_DUMP = """\
DO $dump$
DECLARE
    v_rel record;
BEGIN
    FOR v_rel IN
        SELECT c.oid, c.relname
        FROM pg_catalog.pg_class AS c
        INNER JOIN pg_catalog.pg_depend AS d
            ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
        WHERE c.relnamespace = 'pgq'::regnamespace AND c.relkind IN ('r', 'p', 'S')
    LOOP
        PERFORM pg_catalog.pg_extension_config_dump(
            v_rel.oid::regclass,
            CASE WHEN v_rel.relname IN ('_migrations', '_install') THEN 'WHERE false' ELSE '' END
        );
    END LOOP;
END
$dump$;
"""

# An extension script must not create the outcome log's daily partitions: they would be
# members of the extension, which pgq.prune could then never drop. The first sweep (or
# the next prune) creates them; until then outcomes land in the default partition, which
# pgq._ensure_partitions empties into them.
_PARTITIONS = "SELECT pgq._ensure_partitions();"


def _as_extension(body: str) -> str:
    if _PARTITIONS not in body:
        raise AssertionError("sql/setup.sql no longer calls pgq._ensure_partitions(); update pgq.scripts")
    body = body.replace(
        _PARTITIONS, "-- (the daily outcome partitions: created by the first sweep, see pgq.scripts)"
    )
    return _ECHO + "\n" + body + "\n" + _section("what pg_dump keeps", _CONFIG_DUMP)


def extension_install(src: Source | None = None) -> str:
    """pgq--VERSION.sql: CREATE EXTENSION pgq."""
    src = src or Source()
    body = install_body(src=src).replace("CREATE SCHEMA pgq;\n", "", 1)
    body = body.replace(_section("guard: pgq is not installed here", _GUARD_ABSENT), "", 1)
    return _header("CREATE EXTENSION pgq", "Loaded by CREATE EXTENSION pgq.", src.version) + _as_extension(
        _section("guard: not installed by pgq install", _GUARD_NOT_CLI) + body
    )


def extension_update(release: str) -> str:
    """pgq--RELEASE--VERSION.sql: ALTER EXTENSION pgq UPDATE from RELEASE."""
    return _header(f"ALTER EXTENSION pgq UPDATE from {release}", "Loaded by ALTER EXTENSION pgq UPDATE.") + (
        _as_extension(upgrade_body(release))
    )


def frozen_release() -> Path:
    """The install script of the extension's first release, frozen as released."""
    return sql_root() / "sql" / "releases" / f"pgq--{BASE_RELEASE}.sql"


def extension_files() -> dict[str, str]:
    """The extension's files by name: the control file, this version's install script, the
    first release's (so that a database created with it can be updated), and the update
    script from each earlier release that has one."""
    files = {
        f"{EXTENSION}.control": _CONTROL.format(version=__version__),
        f"{EXTENSION}--{__version__}.sql": extension_install(),
    }
    if __version__ != BASE_RELEASE:
        files[f"{EXTENSION}--{BASE_RELEASE}.sql"] = frozen_release().read_text()
        files[f"{EXTENSION}--{BASE_RELEASE}--{__version__}.sql"] = extension_update(BASE_RELEASE)
    return files


def write_extension(directory: Path) -> list[Path]:
    """Write the extension's files into directory (created if missing); returns them."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in extension_files().items():
        path = directory / name
        path.write_text(text)
        written.append(path)
    return written
