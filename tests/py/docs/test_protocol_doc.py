"""docs/protocol.md cannot drift from the database: its tables of functions, result columns,
NOTIFY channels, error codes, outcomes and conformance ops are compared with the installed
schema, the SQL source, docs/errors.md and pgq.conformance; every pgq function the Python and
Node.js workers call is in its table; and the two payloads on channel `pgq` are checked live
(issue 35: the cancel payload was documented nowhere, the outcome values neither)."""

from __future__ import annotations

import re
import select
import uuid
from pathlib import Path

import psycopg
import pytest

from pgq.conformance import ops

REPO = Path(__file__).resolve().parents[3]
DOC = (REPO / "docs" / "protocol.md").read_text()


def table(marker: str) -> list[list[str]]:
    """The rows (cells, backticks kept) of the table after `<!-- protocol: MARKER -->`."""
    start = DOC.index(f"<!-- protocol: {marker} -->")
    lines = DOC[start:].splitlines()[1:]
    rows = []
    for line in lines[2:]:  # past the header and its rule
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    assert rows, f"no table after the marker {marker!r}"
    return rows


def code(cell: str) -> str:
    """The first `...` of a cell."""
    found = re.search(r"`([^`]*)`", cell)
    assert found, cell
    return found.group(1)


def normalised_arguments(real: str) -> str:
    return re.sub(r" DEFAULT (NULL|\d+)(::[\w\[\] ]+)?", r" = \1", real)


def test_functions_table_matches_the_installed_functions(conn: psycopg.Connection) -> None:
    for name_cell, args_cell, returns_cell in table("functions"):
        name, args = code(name_cell), code(args_cell) if "`" in args_cell else ""
        types = ", ".join(arg.split(" = ")[0].split(" ", 1)[1] for arg in args.split(", ")) if args else ""
        row = conn.execute(
            "SELECT pg_get_function_arguments(p), pg_get_function_result(p) FROM to_regprocedure(%s) AS p",
            (f"{name}({types})",),
        ).fetchone()
        assert row and row[0] is not None, f"{name}({types}) is not installed"
        assert normalised_arguments(row[0]) == args, name
        documented = code(returns_cell)
        assert row[1] == documented or (documented == "TABLE" and row[1].startswith("TABLE(")), name


@pytest.mark.parametrize(
    "signature", re.findall(r"<!-- protocol: columns (pgq\.\w+\([^)]*\)) -->", DOC), ids=lambda s: s
)
def test_result_columns_match(conn: psycopg.Connection, signature: str) -> None:
    real = conn.execute(
        "SELECT a.name, format_type(a.type, NULL)"
        " FROM pg_proc AS p, unnest(p.proargnames, p.proallargtypes, p.proargmodes::text[])"
        " WITH ORDINALITY AS a (name, type, mode, n)"
        " WHERE p.oid = to_regprocedure(%s) AND a.mode = 't' ORDER BY a.n",
        (signature,),
    ).fetchall()
    documented = [(code(name), code(type_)) for name, type_, *_ in table(f"columns {signature}")]
    assert real, signature
    assert documented == real


def test_every_function_the_workers_call_is_documented() -> None:
    documented = {code(row[0]) for row in table("functions")}
    sources = [
        *REPO.glob("python/pgq/worker*.py"),
        *REPO.glob("python/pgq/worker/**/*.py"),
        REPO / "examples" / "node" / "worker.js",
    ]
    called = {f"pgq.{m}" for path in sources for m in re.findall(r"\bpgq\.([a-z_0-9]+)\(", path.read_text())}
    assert {"pgq.claim", "pgq.heartbeat", "pgq.confirm_cancel"} <= called
    assert called <= documented, called - documented


def test_notify_channels_errors_outcomes_and_ops_are_documented(conn: psycopg.Connection) -> None:
    sent = set(
        re.findall(r"pg_notify\('(\w+)'", "".join(p.read_text() for p in REPO.glob("sql/functions/*.sql")))
    )
    assert {code(row[0]) for row in table("notify")} == sent

    known = set(re.findall(r"^\| `(PQ\d+)`", (REPO / "docs" / "errors.md").read_text(), re.M))
    codes = {code(row[0]) for row in table("errors")}
    assert {"PQ001", "PQ002", "PQ003", "PQ007", "PQ010"} <= codes <= known

    check = conn.execute(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = '_outcomes_outcome_check'"
    ).fetchone()[0]
    assert {code(row[0]) for row in table("outcomes")} == set(re.findall(r"'(\w+)'", check))

    documented_ops = {re.search(r'"op": "(\w+)"', row[0]).group(1) for row in table("ops")}  # type: ignore[union-attr]
    assert documented_ops == {
        ops.result(1)["op"],
        ops.fail(1)["op"],
        ops.sleep(1)["op"],
        ops.snooze(1, 1)["op"],
    }


def test_the_payloads_on_channel_pgq_are_the_documented_ones(dsn: str, conn: psycopg.Connection) -> None:
    """An entrypoint's name wakes; `cancel:<worker id>` reaches the holder of a canceled job."""
    ep = f"protocol_doc_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute("LISTEN pgq")
        job = conn.execute("SELECT pgq.enqueue(%s, '{}')", (ep,)).fetchone()[0]
        worker = conn.execute("SELECT pgq.register_worker('doc', ARRAY[%s])", (ep,)).fetchone()[0]
        assert conn.execute(
            "SELECT id FROM pgq.claim(%s, ARRAY[%s], 1, protocol => 2)", (worker, ep)
        ).fetchall()
        conn.execute("SELECT pgq.cancel(ARRAY[%s]::bigint[])", (job,))
        payloads = []
        while len(payloads) < 2 and select.select([listener.fileno()], [], [], 5)[0]:
            payloads += [n.payload for n in listener.notifies(timeout=0.1)]
        assert payloads[:2] == [ep, f"cancel:{worker}"]
        assert conn.execute("SELECT pgq.heartbeat(%s)", (worker,)).fetchall() == [(job,)]
        assert conn.execute("SELECT pgq.confirm_cancel(%s, %s, 1)", (worker, job)).fetchone()[0] == "canceled"
    documented = {code(row[1]) for row in table("notify") if code(row[0]) == "pgq"}
    assert documented == {"<entrypoint>", "cancel:<worker id>"}
