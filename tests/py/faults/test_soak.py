"""The chaos soak, short form (about 45 s): see soak.py. It restarts the cluster under test.

Its workers and producers log in as roles of their own with the settings a DBA or a managed
service puts on application roles (soak.DBA_SETTINGS: statement_timeout, lock_timeout,
idle_in_transaction_session_timeout, idle_session_timeout): the faults and the settings
together, 0 lost, 0 stuck, 0 double outcomes. `make soak` runs the long form (add
`--dba-settings` to soak.py for the settings there too)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import admin_execute, create_database, drop_database
from support.cluster import restart_problem, wait_for_server
from support.soak import DBA_SETTINGS, KINDS, KNOWN_BUGS, SoakConfig, run_soak


def test_chaos_soak(template_db: str, tmp_path: Path) -> None:
    # A database of its own: the roles' grants on the soak's tables go with it.
    name = f"pgq_soak_{os.getpid()}"
    dsn = create_database(name, template=template_db)
    problem = restart_problem(dsn)
    if problem:
        drop_database(name)
        pytest.skip(problem)
    cfg = SoakConfig(seconds=36, lease=2.0, drain_timeout=30, role_settings=DBA_SETTINGS)
    try:
        report = run_soak(dsn, tmp_path, cfg)
    finally:
        wait_for_server(dsn)
        drop_database(name)
        admin_execute("DROP ROLE IF EXISTS pgq_soak_worker", "DROP ROLE IF EXISTS pgq_soak_producer")
    evidence = [f"{bug}: {line}" for bug, lines in report.known.items() for line in lines[:5]]
    detail = "\n".join([*report.problems, *evidence, report.summary])
    assert report.stats["jobs"] > 1000, detail
    assert all(report.stats["faults"].get(kind, 0) >= 1 for kind in KINDS), detail
    # The workload's own classes: slow jobs timed out, jobs canceled on request, queued
    # jobs changed under the claims, jobs moved between partitions under the workers.
    assert report.stats["timeouts"] >= 1, detail
    assert report.stats["cancels_asked"] >= 1, detail
    assert report.stats["touched"] >= 1, detail
    assert report.stats["moves"] >= 2, detail
    assert report.stats["lost"] == 0, detail
    assert report.stats["doubles"] == 0, detail
    assert not report.problems, detail
    # The signatures of two bugs the soak once found (see soak.KNOWN_BUGS): they are fixed.
    assert not report.known, "\n".join([*(KNOWN_BUGS[bug] for bug in report.known), detail])
