"""The SQL tree as a contract a maintainer can hold: pgq's advisory locks have their numbers
written in one place (sql/functions/_lock_key.sql, _lock_id.sql), which Python reads too.

Reads the source: no database, no processes (tests/sql/locks.sql checks the functions).
"""

from __future__ import annotations

import re
from pathlib import Path

from pgq import resources, scripts

ROOT = Path(__file__).resolve().parents[3]
# The numbers of pgq's advisory locks as 0.1.0 and 0.2.0 hold them (literals in their
# functions and pgq.migrate); their workers run against every later schema, so a later
# release must take the very same locks.
RELEASED_LOCKS = {"schema": (7366513, 0), "sweep": (7366513, 1), "prune": (7366513, 2)}
MARK_LOCK_CLASS = 7366514
LOCK_FILES = {ROOT / "sql" / "functions" / "_lock_key.sql", ROOT / "sql" / "functions" / "_lock_id.sql"}


def _sources() -> list[Path]:
    """Every file of the current code that could take a lock: sql/ (but the frozen
    release), the migrations, the package."""
    found = [p for p in (ROOT / "sql").rglob("*.sql") if "releases" not in p.parts]
    found += sorted((ROOT / "migrations").glob("*.sql"))
    found += sorted((ROOT / "python" / "pgq").rglob("*.py"))
    return found


def test_lock_numbers_are_written_once() -> None:
    bare = re.compile(r"\b736651[34]\b")
    offenders = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in _sources()
        if p not in LOCK_FILES
        for n, line in enumerate(p.read_text().splitlines(), start=1)
        if bare.search(line)
    ]
    assert offenders == [], f"advisory lock numbers outside sql/functions/_lock_key.sql: {offenders}"


def test_python_reads_the_released_lock_numbers() -> None:
    for name, key in RELEASED_LOCKS.items():
        assert resources.lock_key(name) == key, name
    assert resources.lock_class("mark") == MARK_LOCK_CLASS


# --- trigger functions are named as triggers ---------------------------------------------

# The public trigger function (DESIGN.md: its name is fixed).
PUBLIC_TRIGGERS = {"enqueue_trigger"}
_FUNCTION = re.compile(r"CREATE OR REPLACE FUNCTION pgq\.(\w+)\((.*?)\)\s*RETURNS (\w+)", re.DOTALL)


def test_trigger_functions_are_named_as_triggers() -> None:
    """An internal trigger function is pgq._trg_<what it keeps>: it cannot be mistaken for a
    helper that a function calls (pgq._check_waiting read as one of the _check_* validators),
    and no other function takes the prefix."""
    found = {}
    for path in sorted((ROOT / "sql" / "functions").glob("*.sql")):
        for name, _args, returns in _FUNCTION.findall(path.read_text()):
            found[name] = returns.lower()
    triggers = {n for n, r in found.items() if r == "trigger"} - PUBLIC_TRIGGERS
    assert triggers, "no trigger function found: the pattern is broken"
    assert sorted(n for n in triggers if not n.startswith("_trg_")) == []
    assert sorted(n for n, r in found.items() if n.startswith("_trg_") and r != "trigger") == []


# --- one explicit install order ----------------------------------------------------------


def test_every_sql_file_is_in_the_install_list_once() -> None:
    """sql/install.list is the install order of every path (pgq.resources reads it): a file
    missing from it would never be installed, one listed twice would run twice."""
    sql = ROOT / "sql"
    sections = resources.install_list(ROOT)
    assert sections is not None, "sql/install.list is missing"
    listed = [p.relative_to(sql).as_posix() for files in sections.values() for p in files]
    on_disk = sorted(p.relative_to(sql).as_posix() for p in sql.rglob("*.sql") if "releases" not in p.parts)
    twice = sorted({f for f in listed if listed.count(f) > 1})
    assert twice == [], f"listed more than once in sql/install.list: {twice}"
    assert sorted(set(on_disk) - set(listed)) == [], "SQL files missing from sql/install.list"
    assert sorted(set(listed) - set(on_disk)) == [], "sql/install.list names files that do not exist"
    assert [p.name for p in sections["first"]] == ["require_server.sql"]


def test_the_install_paths_follow_the_list() -> None:
    sections = resources.install_list(ROOT)
    assert sections is not None
    assert resources.schema_files(ROOT) == [*sections["first"], *sections["schema"]]
    assert resources.code_files(ROOT) == [*sections["first"], *sections["code"]]
    # The order is the list's, not the files' names: the last three run after every view.
    assert [p.name for p in resources.code_files(ROOT)[-3:]] == ["setup.sql", "reconcile.sql", "grants.sql"]
    # pgq sql install (and the extension, made of the same body) runs the files in that order.
    headers = re.findall(r"^-- ==== (sql/\S+) ====$", scripts.install_body(), re.MULTILINE)
    expected = [*sections["first"], *sections["schema"], *sections["first"], *sections["code"]]
    assert headers == [p.relative_to(ROOT).as_posix() for p in expected]


# --- plans kept per session ----------------------------------------------------------------


def test_no_sql_function_with_settings_reads_the_job_tables() -> None:
    """A LANGUAGE sql function with a SET clause is never inlined, and PostgreSQL plans its
    statement on every call (before 18): one that reads pgq._jobs or the outcome log, which
    heartbeats and claims call, pays a plan of those tables each time. pgq._timed_out was
    one: half of every heartbeat's CPU. Such a function is PL/pgSQL, whose plans are kept."""
    offenders = []
    for path in sorted((ROOT / "sql" / "functions").glob("*.sql")):
        text = path.read_text()
        body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
        if (
            re.search(r"^LANGUAGE sql\b", body, re.MULTILINE | re.IGNORECASE)
            and re.search(r"^SET ", body, re.MULTILINE)
            and re.search(r"\bpgq\.(_jobs|_outcomes)\b", body)
        ):
            offenders.append(path.name)
    assert offenders == []


def test_no_sql_of_pgq_hashes_with_md5() -> None:
    """A server in FIPS mode refuses md5() (OpenSSL's FIPS provider has no MD5), so a pgq
    function that called it would fail there: pgq's SQL hashes with sha256(). The same for
    the SQL the package sends and the benchmark's pgbench scripts (`pgq bench`)."""
    md5 = re.compile(r"\bmd5\s*\(", re.IGNORECASE)
    offenders = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in [*_sources(), *sorted((ROOT / "bench").glob("*.sql"))]
        for n, line in enumerate(p.read_text().splitlines(), start=1)
        if md5.search(line.split("--" if p.suffix == ".sql" else "#", 1)[0])
    ]
    assert offenders == [], offenders
