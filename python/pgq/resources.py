"""Where the SQL lives: inside the installed package, or in the source tree when editable."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path


def sql_root() -> Path:
    """The directory that holds `sql/` and `migrations/`."""
    packaged = Path(str(resources.files("pgq")))
    if (packaged / "sql" / "schema").is_dir():
        return packaged
    source = Path(__file__).resolve().parents[2]
    if (source / "sql" / "schema").is_dir():
        return source
    raise FileNotFoundError("pgq's SQL files are missing from the installation")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path

    @property
    def sql(self) -> str:
        return self.path.read_text()


_MIGRATION = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


def migrations(root: Path | None = None) -> list[Migration]:
    """The migrations, in order; they must be numbered 1..N without gaps. `root`: another
    tree's sql/ and migrations/ (a release being frozen), default this package's."""
    found = []
    for path in sorted(((root or sql_root()) / "migrations").glob("*.sql")):
        m = _MIGRATION.match(path.name)
        if not m:
            raise ValueError(f"migration file name {path.name!r} is not NNNN_snake_case.sql")
        found.append(Migration(int(m.group(1)), m.group(2), path))
    for expected, mig in enumerate(found, start=1):
        if mig.version != expected:
            raise ValueError(f"migrations are not contiguous: expected {expected:04d}, found {mig.path.name}")
    return found


def install_list(root: Path | None = None) -> dict[str, list[Path]] | None:
    """The sections of sql/install.list (first, schema, code), each its files in order; None
    for a tree without it (a release older than the list, frozen by scripts/freeze.sh)."""
    code = (root or sql_root()) / "sql"
    manifest = code / "install.list"
    if not manifest.is_file():
        return None
    sections: dict[str, list[Path]] = {}
    files: list[Path] | None = None
    for number, raw in enumerate(manifest.read_text().splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("[") and line.endswith("]"):
            files = sections.setdefault(line[1:-1], [])
        elif files is None:
            raise ValueError(f"sql/install.list:{number}: {line!r} comes before any [section]")
        else:
            files.append(code / line)
    missing = {"first", "schema", "code"} - sections.keys()
    if missing:
        raise ValueError(f"sql/install.list lacks the sections {sorted(missing)}")
    return sections


def server_check_file(root: Path | None = None) -> Path:
    """The refusal of servers older than PostgreSQL 14 (PQ011): the first SQL of every
    install path, before anything changes."""
    return (root or sql_root()) / "sql" / "require_server.sql"


def schema_files(root: Path | None = None) -> list[Path]:
    """The current table layout (a fresh install runs these instead of the migrations),
    after the server check: sql/install.list's [first] and [schema]."""
    listed = install_list(root)
    if listed is not None:
        return [*listed["first"], *listed["schema"]]
    return [server_check_file(root), *sorted(((root or sql_root()) / "sql" / "schema").glob("*.sql"))]


def code_files(root: Path | None = None) -> list[Path]:
    """The server check, roles, functions, views, setup, reconcile (drop what the code no
    longer defines, hand everything to pgq_owner) and grants, re-applied on every install
    and upgrade: sql/install.list's [first] and [code]."""
    listed = install_list(root)
    if listed is not None:
        return [*listed["first"], *listed["code"]]
    # A tree older than the list: the order those releases installed in.
    top = root or sql_root()
    code = top / "sql"
    return [
        server_check_file(top),
        code / "roles.sql",
        *sorted((code / "functions").glob("*.sql")),
        *sorted((code / "views").glob("*.sql")),
        code / "setup.sql",
        code / "reconcile.sql",
        code / "grants.sql",
    ]


# A row of the lock tables of sql/functions/_lock_key.sql and _lock_id.sql.
_LOCK_ROW = re.compile(r"^\s*WHEN '([a-z_]+)' THEN (\d+)$", re.MULTILINE)


def _lock_table(name: str) -> dict[str, int]:
    return {n: int(v) for n, v in _LOCK_ROW.findall((sql_root() / "sql" / "functions" / name).read_text())}


def lock_class(name: str) -> int:
    """The first key of pgq's advisory lock `name` (pgq._lock_key in SQL): read from the SQL
    that defines it, so that its numbers are written once (the install's lock is taken
    before schema pgq exists, so Python cannot ask the function)."""
    return _lock_table("_lock_key.sql")[name]


def lock_key(name: str) -> tuple[int, int]:
    """Both keys of pgq's advisory lock `name`, for the locks with a fixed second key
    (pgq._lock_id): the arguments of pg_advisory_lock(integer, integer)."""
    return lock_class(name), _lock_table("_lock_id.sql")[name]
