"""The dashboard over plain HTTP: Basic auth, CSRF, read-only mode, a read-only database
role, /healthz, /metrics (parsed by prometheus_client) and the CLI's refusals."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families
from psycopg import sql
from psycopg.conninfo import make_conninfo

from conftest import admin_execute
from dashboard_server import Served, dead_job, request, serve, succeeded_jobs
from pgq.web.app import Config

AUTH = ("ops", "s3cret-Passw0rd")


@pytest.fixture(scope="module")
def secured(dsn: str) -> Iterator[Served]:
    with serve(Config(dsn=dsn, user=AUTH[0], password=AUTH[1])) as served:
        yield served


@pytest.fixture(scope="module")
def read_only(dsn: str) -> Iterator[Served]:
    with serve(Config(dsn=dsn, read_only=True)) as served:
        yield served


def token(served: Served, auth: tuple[str, str] | None = None) -> str:
    status, body, _ = request(served.url + "/settings", auth=auth)
    assert status == 200
    match = re.search(r'name="csrf-token" content="([0-9a-f]+)"', body)
    assert match
    return match.group(1)


def test_basic_auth_guards_every_page_but_healthz(secured: Served) -> None:
    for path in (
        "/",
        "/jobs",
        "/jobs/1",
        "/workers",
        "/schedules",
        "/settings",
        "/metrics",
        "/static/dashboard.css",
    ):
        status, _, headers = request(secured.url + path)
        assert status == 401, path
        assert headers["www-authenticate"].startswith("Basic")
        assert request(secured.url + path, auth=(AUTH[0], "wrong"))[0] == 401, path
        assert request(secured.url + path, auth=("admin", AUTH[1]))[0] == 401, path
    assert request(secured.url + "/", auth=AUTH)[0] == 200
    assert request(secured.url + "/healthz") == (200, "ok\n", request(secured.url + "/healthz")[2])


def test_actions_need_the_csrf_token(secured: Served, conn: psycopg.Connection) -> None:
    conn.execute("SELECT pgq.enqueue('email', '{}')")
    form = {"entrypoint": "email", "back": "/settings"}
    assert request(secured.url + "/entrypoints/pause", form, auth=AUTH)[0] == 403
    assert request(secured.url + "/entrypoints/pause", {**form, "csrf": "0" * 64}, auth=AUTH)[0] == 403
    assert request(secured.url + "/entrypoints/pause", {**form, "csrf": token(secured, AUTH)})[0] == 401
    paused = conn.execute("SELECT paused FROM pgq.settings(ARRAY['email'])").fetchone()[0]
    assert paused is False
    status, _, headers = request(
        secured.url + "/entrypoints/pause", {**form, "csrf": token(secured, AUTH)}, auth=AUTH
    )
    assert status == 303 and headers["location"].startswith("/settings?msg=")
    assert conn.execute("SELECT paused FROM pgq.settings(ARRAY['email'])").fetchone()[0] is True


def test_read_only_hides_and_refuses_actions(read_only: Served, conn: psycopg.Connection) -> None:
    job = dead_job(conn, "email")
    status, body, _ = request(f"{read_only.url}/jobs/{job}")
    assert status == 200 and "read-only" in body
    assert 'id="retry"' not in body and '<form method="post"' not in body
    status, body, _ = request(f"{read_only.url}/jobs/{job}/retry", {"csrf": token(read_only), "back": "/"})
    assert status == 403 and "read-only" in body
    assert conn.execute("SELECT pgq.job_status(%s)", (job,)).fetchone()[0] == "dead"


def test_a_read_only_role_gets_a_read_only_dashboard(dsn: str, conn: psycopg.Connection) -> None:
    """The role may read the views but not retry: the action's permission error is shown."""
    role = f"pgq_dash_ro_{uuid.uuid4().hex[:8]}"
    admin_execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    try:
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA pgq TO {}").format(sql.Identifier(role)))
        conn.execute(
            sql.SQL(
                "GRANT SELECT ON pgq.jobs, pgq.outcomes, pgq.workers, pgq.schedules, pgq.queues TO {0};"
                " GRANT EXECUTE ON FUNCTION pgq.stats(interval), pgq.settings(text[]),"
                " pgq.settings(text[], integer), pgq.job_status(bigint) TO {0};"
                # What reading pgq.queues takes (its counts run as the reader: grants.sql).
                " GRANT EXECUTE ON FUNCTION pgq._queue_counts(integer) TO {0}"
            ).format(sql.Identifier(role))
        )
        job = dead_job(conn, "email")
        with serve(Config(dsn=make_conninfo(dsn, user=role))) as served:
            assert request(served.url + "/")[0] == 200
            status, body, _ = request(f"{served.url}/jobs/{job}")
            assert status == 200 and 'id="retry"' in body
            status, _, headers = request(
                f"{served.url}/jobs/{job}/retry", {"csrf": token(served), "back": f"/jobs/{job}"}
            )
            assert status == 303 and "err=permission+denied" in headers["location"]
            status, body, _ = request(served.url + headers["location"])
            assert "permission denied for function retry" in body
            # /metrics: the database answered (pgq_up 1); the part the role may not read
            # (pgq.outcome_totals) is missing and flagged, the rest is there.
            metrics = _samples(request(served.url + "/metrics")[1])
            assert metrics[("pgq_up", ())] == 1
            assert metrics[("pgq_scrape_error", (("part", "outcomes"),))] == 1
            assert metrics[("pgq_scrape_error", (("part", "queues"),))] == 0
            assert metrics[("pgq_jobs", (("entrypoint", "email"), ("state", "dead")))] >= 1
        assert conn.execute("SELECT pgq.job_status(%s)", (job,)).fetchone()[0] == "dead"
    finally:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        admin_execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def _samples(body: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def test_metrics_follow_prometheus_conventions(secured: Served, conn: psycopg.Connection) -> None:
    """Counters named *_total kept in the database (the same figure from another dashboard
    process, never lower after the outcome log is pruned), durations as summaries, no NaN,
    estimates flagged by a metric of their own."""
    succeeded_jobs(conn, "m-email", 3)
    conn.execute("SELECT pgq.enqueue_batch('m-email', array_fill('{}'::jsonb, ARRAY[4]))")
    dead_job(conn, "m-resize")
    conn.execute("SELECT pgq.enqueue('m-idle')")  # nothing finished: no quantile, no NaN
    status, body, headers = request(secured.url + "/metrics", auth=AUTH)
    assert status == 200 and headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(body)}
    samples = _samples(body)
    assert all(name.startswith("pgq_") for name, _ in samples)
    assert all(value == value for value in samples.values()), "a NaN sample"
    assert samples[("pgq_up", ())] == 1
    assert samples[("pgq_jobs", (("entrypoint", "m-email"), ("state", "queued")))] == 4
    assert samples[("pgq_jobs_approximate", (("entrypoint", "m-email"),))] == 0
    assert samples[("pgq_queue_jobs_approximate", ())] == 0
    assert samples[("pgq_paused", (("entrypoint", "m-resize"),))] == 0
    assert families["pgq_finished_jobs"].type == "counter"
    ok = ("pgq_finished_jobs_total", (("entrypoint", "m-email"), ("outcome", "succeeded")))
    assert samples[ok] == 3
    assert samples[("pgq_finished_jobs_total", (("entrypoint", "m-resize"), ("outcome", "dead")))] == 1
    totals = {o: samples[("pgq_queue_finished_jobs_total", (("outcome", o),))] for o in ("succeeded", "dead")}
    assert totals["succeeded"] >= 3 and totals["dead"] >= 1
    # No gauge carries a quantile: the durations are summaries, cumulative _count and _sum.
    assert families["pgq_wait_seconds"].type == "summary" and families["pgq_run_seconds"].type == "summary"
    assert all(f.type == "summary" for f in families.values() for s in f.samples if "quantile" in s.labels)
    assert ("pgq_wait_seconds", (("entrypoint", "m-email"), ("quantile", "0.99"))) in samples
    assert samples[("pgq_run_seconds_count", (("entrypoint", "m-email"),))] == 3
    assert not any(
        dict(labels).get("entrypoint") == "m-idle" and "quantile" in dict(labels) for _, labels in samples
    )
    # Another dashboard process reads the same counters, also after the log is pruned.
    conn.execute("DELETE FROM pgq._outcomes")
    with serve(Config(dsn=secured.config.dsn)) as other:
        again = _samples(request(other.url + "/metrics")[1])
    assert again[ok] == 3 and again[("pgq_queue_finished_jobs_total", (("outcome", "succeeded"),))] >= 3
    succeeded_jobs(conn, "m-email", 2)
    assert _samples(request(secured.url + "/metrics", auth=AUTH)[1])[ok] == 5


def _listed(served: Served, query: str) -> tuple[list[int], str]:
    status, body, _ = request(f"{served.url}/jobs?{query}", auth=AUTH)
    assert status == 200
    return [int(i) for i in re.findall(r'<td><a href="/jobs/(\d+)">', body)], body


def test_the_jobs_browser_filters_and_pages(secured: Served, conn: psycopg.Connection) -> None:
    email = [
        r[0]
        for r in conn.execute(
            "SELECT pgq.enqueue_batch('email', array_agg(jsonb_build_object('n', g)))"
            " FROM generate_series(1, 60) AS g"
        )
    ]
    needle = conn.execute("SELECT pgq.enqueue('resize', '{\"path\": \"haystack-42.png\"}')").fetchone()[0]
    done = succeeded_jobs(conn, "report", 2)
    first, body = _listed(secured, "entrypoint=email")
    assert first == sorted(email, reverse=True)[:50] and "older →" in body
    # Keyset pagination: the next page starts below the last id of this one.
    older = re.search(r'<a href="/jobs\?([^"]+)">older', body).group(1).replace("&amp;", "&")
    assert f"before={sorted(email, reverse=True)[49]}" in older
    second, body = _listed(secured, older)
    assert second == sorted(email, reverse=True)[50:] and "older →" not in body and "newest" in body
    assert _listed(secured, "q=haystack-42")[0] == [needle]
    assert _listed(secured, f"id={email[7]}")[0] == [email[7]]
    assert _listed(secured, "status=queued&entrypoint=resize")[0] == [needle]
    assert _listed(secured, "status=succeeded")[0] == sorted(done, reverse=True)
    assert _listed(secured, "status=running")[0] == []
    status, body, _ = request(f"{secured.url}/jobs/{done[0]}", auth=AUTH)
    assert (
        # A finished job still shows its payload (kept in the outcome log, read by pgq.job).
        status == 200 and 'id="job-status">succeeded<' in body and '<pre id="payload">{}</pre>' in body
    )
    assert request(f"{secured.url}/jobs/999999999", auth=AUTH)[0] == 404


def test_a_paused_entrypoint_without_jobs_stays_listed(secured: Served, conn: psycopg.Connection) -> None:
    conn.execute("SELECT pgq.pause('idle')")
    status, body, _ = request(secured.url + "/settings", auth=AUTH)
    assert status == 200 and 'data-entrypoint="idle"' in body and "Resume" in body


def test_overview_counts_exactly_up_to_the_limit_then_estimates(
    secured: Served, dsn: str, conn: psycopg.Connection
) -> None:
    """The overview reads pgq.queues: exact up to pgq.queues_exact_limit per entrypoint and
    state (12,000 is exact by default), an estimate above it marked ≈ (here with a limit of
    5,000 set for the dashboard's role)."""
    for priority in (-5, 0, 7):
        conn.execute(
            "SELECT pgq.enqueue_batch('mixed', array_fill('{}'::jsonb, ARRAY[3]), priority => %s)",
            (priority,),
        )
        conn.execute(
            "SELECT pgq.enqueue_batch('mixed', array_fill('{}'::jsonb, ARRAY[2]), priority => %s,"
            " run_at => now() + interval '1 hour')",
            (priority,),
        )
    conn.execute("SELECT pgq.enqueue_batch('bulk', array_fill('{}'::jsonb, ARRAY[12000]))")
    dead_job(conn, "mixed")
    conn.execute("ANALYZE pgq._jobs")

    def cells(served: Served, name: str) -> list[str]:
        status, body, _ = request(served.url + "/partials/queues", auth=AUTH)
        assert status == 200
        row = re.search(rf'<tr data-entrypoint="{name}">(.*?)</tr>', body, re.S).group(1)
        return [re.sub(r"<[^>]+>", "", c) for c in re.findall(r'<td class="num">(.*?)</td>', row, re.S)]

    assert cells(secured, "mixed")[:5] == ["9", "6", "0", "0", "1"]
    assert cells(secured, "bulk")[0] == "12,000"
    limited = make_conninfo(dsn, options="-c pgq.queues_exact_limit=5000")
    with serve(Config(dsn=limited)) as served:
        assert cells(served, "bulk")[0].startswith("≈"), cells(served, "bulk")
        assert cells(served, "mixed")[:2] == ["9", "6"]
        metrics = _samples(request(served.url + "/metrics")[1])
        assert metrics[("pgq_jobs_approximate", (("entrypoint", "bulk"),))] == 1
        assert metrics[("pgq_queue_jobs_approximate", ())] == 1
