"""The plans of the statements a pgq call runs, for the plan tests: auto_explain logs the
plan of every nested statement (PL/pgSQL's, cached generic plans included) as a JSON
NOTICE, which the session collects."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg


def on_jobs(node: dict[str, Any]) -> bool:
    """Whether a plan node reads the job table: a plan names the partition it reads
    (pgq._jobs_default, or one that pgq.isolate made)."""
    return node.get("Relation Name") == "_jobs" or str(node.get("Relation Name")).startswith("_jobs_")


def plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A plan node and every node below it."""
    yield plan
    for child in plan.get("Plans", []):
        yield from plan_nodes(child)


def explain_nested(conn: psycopg.Connection, *settings: str) -> list[str]:
    """From now on, the plan of every statement `conn` runs, nested ones too, arrives as a
    NOTICE appended to the list returned. `settings`: more auto_explain settings, such as
    "auto_explain.log_analyze = on". `SET auto_explain.log_min_duration = -1` stops it."""
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    conn.execute("LOAD 'auto_explain'")
    for setting in (
        "auto_explain.log_min_duration = 0",
        "auto_explain.log_nested_statements = on",
        "auto_explain.log_format = json",
        "auto_explain.log_level = notice",
        "client_min_messages = notice",
        *settings,
    ):
        conn.execute(f"SET {setting}")
    return notices


def logged_plans(notices: list[str]) -> list[dict[str, Any]]:
    """The auto_explain documents among the notices: "Query Text", "Plan", maybe "JIT"."""
    return [json.loads(body) for _, sep, body in (m.partition("plan:") for m in notices) if sep]
