"""Smoke test of `pgq bench`: every pgq scenario runs at a tiny size and reports positive
figures in the JSON (PgQueuer is skipped: it needs its own virtualenv and the network)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import ADMIN_DSN
from pgq.bench.db import PGBENCH_DEFAULT
from pgq.cli.main import main

pytestmark = pytest.mark.skipif(
    not (os.access(PGBENCH_DEFAULT, os.X_OK) or shutil.which("pgbench")), reason="pgbench is not installed"
)


def test_bench_quick(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    result = CliRunner().invoke(
        main,
        [
            *("bench", "--dsn", ADMIN_DSN, "--quick", "--no-peer", "--jobs", "500", "--seconds", "1"),
            *("--backlog-sizes", "500,2000", "--latency-rate", "40", "--timeout", "60"),
            *("--queues-size", "3000", "--monitor-size", "2000"),
            *("--json", str(out), "--db-prefix", f"bench_test_{os.getpid()}_"),
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    s = data["scenarios"]
    assert set(s) == {
        "raw",
        "sql",
        "spread",
        "drain",
        "defaults",
        "keyed",
        "bystander",
        "enqueue",
        "latency",
        "backlog",
        "xmin",
        "xmin_large",
        "drain_large",
        "queues",
        "monitor",
        "peer",
    }
    assert "skipped" in s["peer"]
    assert s["raw"]["rows_per_s"] > 0 and s["raw"]["rows"] == 500
    assert s["sql"]["jobs_per_s"] > 0 and s["sql"]["jobs"] == 500
    # The same 500 jobs spread over 4 entrypoints, each client a worker of the 4.
    assert s["spread"]["jobs_per_s"] > 0 and s["spread"]["jobs"] == 500 and s["spread"]["entrypoints"] == 4
    for name in ("drain", "defaults", "xmin"):
        assert s[name]["jobs"] == 500 and s[name]["jobs_per_s"] > 0, s[name]
        # Each claim and completion writes WAL: the server's position moved with the drain.
        assert s[name]["cpu"]["wal_bytes_per_job"] > 0, s[name]
    # As many under the held snapshot as the largest backlog, and without it.
    for name in ("xmin_large", "drain_large"):
        assert s[name]["jobs"] == 2000 and s[name]["jobs_per_s"] > 0, s[name]
    assert "of the clean drain of 2k" in result.output, result.output
    assert s["bystander"]["bystander"]["drain"]["p50_ms"] > 0, s["bystander"]
    assert s["bystander"]["bystander"]["idle"]["samples"] >= 100, s["bystander"]
    assert s["keyed"]["jobs"] == 100 and s["keyed"]["jobs_per_s"] > 0, s["keyed"]
    for key in ("single_1conn", "single_8conn", "batch1000_1conn"):
        assert s["enqueue"][f"pgbench_{key}"] > 0 and s["enqueue"][f"client_{key}"] > 0
    assert s["latency"]["samples"] == 40 and s["latency"]["p50_ms"] <= s["latency"]["p99_ms"]
    runs = s["backlog"]["runs"]
    assert set(runs) == {"500", "2000"}
    assert all(r["jobs"] == 500 and r["jobs_per_s"] > 0 for r in runs.values())
    # One run each here: the ratio of the medians is the ratio of the runs.
    assert all(r["median_ratio_to_smallest"] == r["ratio_to_smallest"] for r in runs.values()), runs
    # The largest again, the drained entrypoint in a partition of its own (pgq.isolate).
    isolated = s["backlog"]["isolated"]
    assert set(isolated) == {"2000"} and isolated["2000"]["jobs"] == 500, isolated
    assert "drain 500 of 2k queued (4 entrypoints, its own partition)" in result.output
    reads = s["queues"]["runs"]
    assert set(reads) == {"1", "100"}
    for eps, read in reads.items():
        # 3000 jobs: within the exact limit, so shown exactly, one row per entrypoint.
        assert read["vacuumed"]["rows"] == int(eps) and read["vacuumed"]["queued_shown"] == 3000, read
        assert read["ms"] > 0
    # The dashboard's reads, each timed (figures only: nothing is asserted about them).
    monitor = s["monitor"]
    assert monitor["queued"] == 2000, monitor
    for case in ("queues", "overview", "metrics", "jobs_deepest_page_keyset", "search_no_match_bounded"):
        assert monitor[case]["median_ms"] > 0, monitor
    assert [t["met"] for t in data["targets"]], data["targets"]
    assert "each client a worker of 4 entrypoints" in result.output
    assert "raw limit" in result.output and "pgq.queues at 3k queued (100 entrypoints)" in result.output
    assert "targets:" not in result.output and "[MISS]" not in result.output
