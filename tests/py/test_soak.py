"""The chaos soak, short form (about 45 s): see soak.py. It restarts the cluster under test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cluster import restart_problem, wait_for_server
from conftest import admin_execute, create_database, drop_database
from soak import KINDS, KNOWN_BUGS, SoakConfig, run_soak


def test_chaos_soak(dsn: str, tmp_path: Path) -> None:
    problem = restart_problem(dsn)
    if problem:
        pytest.skip(problem)
    try:
        report = run_soak(dsn, tmp_path, SoakConfig(seconds=36, lease=2.0, drain_timeout=20))
    finally:
        wait_for_server(dsn)
    evidence = [f"{bug}: {line}" for bug, lines in report.known.items() for line in lines[:5]]
    detail = "\n".join([*report.problems, *evidence, report.summary])
    assert report.stats["jobs"] > 1000, detail
    assert all(report.stats["faults"].get(kind, 0) >= 1 for kind in KINDS), detail
    # The workload's own classes: slow jobs timed out, jobs canceled on request, queued
    # jobs changed under the claims.
    assert report.stats["timeouts"] >= 1, detail
    assert report.stats["cancels_asked"] >= 1, detail
    assert report.stats["touched"] >= 1, detail
    assert report.stats["lost"] == 0, detail
    assert report.stats["doubles"] == 0, detail
    assert not report.problems, detail
    # The signatures of two bugs the soak once found (see soak.KNOWN_BUGS): they are fixed.
    assert not report.known, "\n".join([*(KNOWN_BUGS[bug] for bug in report.known), detail])


# What a DBA or a managed service sets on application roles: statements over 2 s are
# cancelled (every pgq call a worker or producer makes takes milliseconds; a sweep bounds
# itself inside it), lock waits over 1 s fail (under the statement timeout, so they surface
# as lock_not_available, not as a cancel), a transaction left idle for 5 s is ended
# (transactional handlers here run well under that), and a session idle for 10 s is closed
# (the pools' connections and the LISTEN connection meet it between bursts and drains).
DBA_SETTINGS = {
    "statement_timeout": "2s",
    "lock_timeout": "1s",
    "idle_in_transaction_session_timeout": "5s",
    "idle_session_timeout": "10s",
}


def test_soak_under_role_timeouts(template_db: str, tmp_path: Path) -> None:
    """The short soak with workers and producers logged in as roles with DBA_SETTINGS: 0 lost,
    0 stuck, 0 double outcomes, as the audit defines them. In a database of its own (the
    soak's tables are created by each run)."""
    name = f"pgq_soak_roles_{os.getpid()}"
    dsn = create_database(name, template=template_db)
    problem = restart_problem(dsn)
    if problem:
        pytest.skip(problem)
    cfg = SoakConfig(seconds=36, lease=2.0, drain_timeout=30, role_settings=DBA_SETTINGS)
    try:
        report = run_soak(dsn, tmp_path, cfg)
    finally:
        wait_for_server(dsn)
        drop_database(name)
        admin_execute("DROP ROLE IF EXISTS pgq_soak_worker", "DROP ROLE IF EXISTS pgq_soak_producer")
    detail = "\n".join([*report.problems, report.summary])
    assert report.stats["jobs"] > 1000, detail
    assert report.stats["lost"] == 0, detail
    assert report.stats["doubles"] == 0, detail
    assert not report.problems, detail
