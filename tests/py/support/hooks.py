"""Forcing a race inside one call: a copy of a real pgq function that waits on an advisory
lock at a marked spot, so that a test can commit its change (or kill the session) while a
call waits there."""

from __future__ import annotations

import psycopg

HOOK = 4243


def hook(conn: psycopg.Connection, function: str, before: str) -> str:
    """Recreate `function` (a regprocedure) with a wait on advisory lock HOOK just before
    the line of its body that starts with `before` (a comment or statement that marks the
    spot). Returns the original definition, to restore it with conn.execute()."""
    source = conn.execute("SELECT pg_get_functiondef(%s::regprocedure)", (function,)).fetchone()[0]
    lines = source.splitlines(keepends=True)
    spot = [i for i, line in enumerate(lines) if line.strip().startswith(before)]
    assert len(spot) == 1, f"{before!r} marks {len(spot)} lines of {function}"
    wait = f"    PERFORM pg_advisory_lock({HOOK}); PERFORM pg_advisory_unlock({HOOK});\n"
    conn.execute("".join([*lines[: spot[0]], wait, *lines[spot[0] :]]))
    return source
