"""The dashboard and /metrics with many entrypoints: entrypoint names are chosen by whoever
enqueues (tenants, per-customer queues), so one producer statement can make 10,000 of them.
Every page answers, pages that list entrypoints page them, /metrics keeps a bounded number
of series (the busiest entrypoints by name, the rest summed) and says pgq_up 1."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from pgq.web.app import Config
from pgq.web.metrics import TOP_ENTRYPOINTS
from support.dashboard_server import Served, request, serve

MANY = 10_000


@pytest.fixture(scope="module")
def served(dsn: str) -> Iterator[Served]:
    with serve(Config(dsn=dsn)) as s:
        yield s


def _samples(body: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def test_ten_thousand_entrypoints_from_one_producer_statement(
    served: Served, conn: psycopg.Connection
) -> None:
    with conn.transaction():
        conn.execute("SET LOCAL ROLE pgq_producer")
        # One job each for MANY tenants, and a busier one: 'tenant-busy' has 50 jobs.
        conn.execute("SELECT pgq.enqueue('tenant-' || g) FROM generate_series(1, %s) AS g", (MANY,))
        conn.execute("SELECT pgq.enqueue_batch('tenant-busy', array_fill('{}'::jsonb, ARRAY[50]))")
    for path in ("/", "/partials/queues", "/settings", "/jobs", "/metrics"):
        started = time.perf_counter()
        status, body, _ = request(served.url + path)
        print(f"{path} with {MANY + 1} entrypoints: {(time.perf_counter() - started) * 1000:.0f} ms")
        assert status == 200, (path, body[:500])

    # The overview pages the entrypoints: a page holds a bounded number of rows, and a
    # search finds one tenant among them.
    status, body, _ = request(served.url + "/partials/queues")
    assert status == 200, body[:500]
    rows = re.findall(r'<tr data-entrypoint="([^"]+)">', body)
    assert 0 < len(rows) <= 200 and "tenant-busy" in rows
    status, body, _ = request(served.url + "/partials/queues?ep=tenant-7777")
    assert status == 200, body[:500]
    assert re.findall(r'<tr data-entrypoint="([^"]+)">', body) == ["tenant-7777"]
    status, body, _ = request(served.url + "/settings?ep=tenant-4242")
    assert status == 200, body[:500]
    assert re.findall(r'<tr data-entrypoint="([^"]+)">', body) == ["tenant-4242"]
    _, body, _ = request(served.url + "/settings")
    assert 0 < len(re.findall(r'<tr data-entrypoint="([^"]+)">', body)) <= 200

    # /metrics: the database answered; per-entrypoint series for the busiest only, and
    # totals that account for every job.
    _, body, _ = request(served.url + "/metrics")
    samples = _samples(body)
    assert samples[("pgq_up", ())] == 1
    labelled = {dict(labels).get("entrypoint") for _, labels in samples} - {None}
    assert len(labelled) <= 2 * TOP_ENTRYPOINTS, len(labelled)
    assert samples[("pgq_jobs", (("entrypoint", "tenant-busy"), ("state", "queued")))] == 50
    assert samples[("pgq_queue_jobs", (("state", "queued"),))] == MANY + 50
    assert samples[("pgq_entrypoints", ())] == MANY + 1
    assert len(samples) < 20 * (TOP_ENTRYPOINTS + 10), len(samples)
