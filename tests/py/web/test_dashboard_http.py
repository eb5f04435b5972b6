"""The dashboard over plain HTTP: Basic auth, CSRF, read-only mode, a read-only database
role, /healthz, /metrics (parsed by prometheus_client) and the CLI's refusals."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from datetime import timedelta, timezone
from urllib.parse import unquote_plus, urlencode

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families
from psycopg import sql
from psycopg.conninfo import make_conninfo

from conftest import admin_execute
from pgq.web.app import Config
from support.dashboard_server import Served, dead_job, request, serve, succeeded_jobs

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
        conn.execute("SELECT pgq.schedule('nightly', '0 3 * * *', 'email')")
        with serve(Config(dsn=make_conninfo(dsn, user=role))) as served:
            assert request(served.url + "/")[0] == 200
            # The role may run none of the actions: no page offers one.
            for path in (
                f"/jobs/{job}",
                "/jobs?status=dead",
                "/",
                "/settings",
                "/schedules",
                "/entrypoint?name=email",
            ):
                status, body, _ = request(served.url + path)
                assert status == 200, path
                assert 'method="post"' not in body and "/jobs/bulk/confirm" not in body, path
            assert 'id="no-edit"' in body and 'name="max_attempts"' not in body
            # A POST anyway is refused before any call, saying why; nothing changes.
            for path, form in (
                (f"/jobs/{job}/retry", {}),
                ("/jobs/bulk", {"verb": "cancel", "ids": str(job)}),
                ("/entrypoints/configure", {"entrypoint": "email", "max_attempts": "9"}),
                ("/entrypoints/pause", {"entrypoint": "email"}),
                ("/schedules/trigger", {"name": "nightly"}),
            ):
                status, body, _ = request(served.url + path, {**form, "csrf": token(served), "back": "/"})
                assert status == 403, path
                assert f"the dashboard's database role {role} may not run pgq." in body, body
            # /metrics: the database answered (pgq_up 1); the part the role may not read
            # (pgq.outcome_totals) is missing and flagged, the rest is there.
            metrics = _samples(request(served.url + "/metrics")[1])
            assert metrics[("pgq_up", ())] == 1
            assert metrics[("pgq_scrape_error", (("part", "outcomes"),))] == 1
            assert metrics[("pgq_scrape_error", (("part", "queues"),))] == 0
            assert metrics[("pgq_jobs", (("entrypoint", "email"), ("state", "dead")))] >= 1
        assert conn.execute("SELECT pgq.job_status(%s)", (job,)).fetchone()[0] == "dead"
        settings = conn.execute("SELECT max_attempts, paused FROM pgq.settings(ARRAY['email'])").fetchone()
        assert settings == (5, False)
        assert conn.execute("SELECT count(*) FROM pgq.jobs WHERE entrypoint = 'email'").fetchone()[0] == 1
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


def test_a_dead_jobs_page_shows_its_last_run_and_worker_names(
    secured: Served, conn: psycopg.Connection
) -> None:
    """A dead job is no longer held, so its row has no start or worker: the page shows the
    last run's (from the outcome log), and the worker's name, not its id, everywhere."""
    job = dead_job(conn, "email")
    started, worker = conn.execute(
        "SELECT started_at, worker_id FROM pgq.outcomes WHERE job_id = %s", (job,)
    ).fetchone()
    status, body, _ = request(f"{secured.url}/jobs/{job}", auth=AUTH)
    assert status == 200
    facts = re.search(r'<dl class="facts">(.*?)</dl>', body, re.S).group(1)
    shown = started.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    assert re.search(rf"<dt>started</dt><dd>{shown}\.\d{{3}}Z", facts), facts
    assert re.search(r"<dt>worker</dt><dd>(<a [^>]*>)?dash-test", facts), facts
    history = body[body.index('id="history"') :]
    assert (
        f'<a href="/workers/{worker}" title="{worker}">dash-test</a>' in history
        and f">{worker}<" not in history
    )


def test_bulk_actions_run_now_trigger_and_settings(secured: Served, conn: psycopg.Connection) -> None:
    """Bulk retry and discard of selected jobs and of all the filter matches (only once
    confirmed), run now, trigger a schedule, edit settings: all through pgq's functions."""
    dead = [dead_job(conn, "email") for _ in range(4)] + [dead_job(conn, "resize")]
    later = [
        r[0]
        for r in conn.execute(
            "SELECT pgq.enqueue_batch('email', array_fill('{}'::jsonb, ARRAY[3]),"
            " run_at => now() + interval '1 day')"
        )
    ]
    csrf = token(secured, AUTH)

    def post(path: str, form: dict[str, str]) -> tuple[int, str]:
        status, body, headers = request(
            secured.url + path, {**form, "csrf": csrf, "back": "/jobs"}, auth=AUTH
        )
        return status, unquote_plus(headers.get("location", "")) or body

    def statuses(ids: list[int]) -> list[str]:
        return [conn.execute("SELECT pgq.job_status(%s)", (j,)).fetchone()[0] for j in ids]

    status, body, _ = request(secured.url + "/jobs?status=dead&entrypoint=email", auth=AUTH)
    assert status == 200 and 'name="ids"' in body and 'id="retry-all"' in body
    # Selected: a form with repeated ids.
    body = urlencode({"verb": "retry", "ids": dead[:2], "csrf": csrf, "back": "/jobs"}, doseq=True)
    status, _, headers = request(secured.url + "/jobs/bulk", None, auth=AUTH, raw=body)
    assert status == 303 and "re-queued 2 of 2 jobs" in unquote_plus(headers["location"])
    assert statuses(dead) == ["queued", "queued", "dead", "dead", "dead"]
    # All matching: refused without the confirmation; the confirmation page counts them.
    assert (
        post("/jobs/bulk", {"verb": "cancel", "scope": "all", "status": "dead", "entrypoint": "email"})[0]
        == 400
    )
    assert statuses(dead) == ["queued", "queued", "dead", "dead", "dead"]
    status, body, _ = request(
        secured.url + "/jobs/bulk/confirm?verb=cancel&status=dead&entrypoint=email", auth=AUTH
    )
    assert status == 200 and "Cancel or discard 2 jobs?" in body and 'id="confirm"' in body
    form = {"verb": "cancel", "scope": "all", "status": "dead", "entrypoint": "email", "confirm": "yes"}
    status, location = post("/jobs/bulk", form)
    assert status == 303 and "canceled or discarded 2 of 2 jobs" in location
    # Discarded: out of the hot table (logged as dead); resize's dead job was not matched.
    assert conn.execute("SELECT count(*) FROM pgq.jobs WHERE id = ANY (%s)", (dead[2:4],)).fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM pgq.jobs WHERE status = 'dead'").fetchone()[0] == 1  # resize's
    # Run now: one job from its page, the rest of the scheduled ones in bulk.
    status, location = post(f"/jobs/{later[0]}/run_now", {})
    assert status == 303 and f"job {later[0]}: due now" in location
    status, location = post("/jobs/bulk", {**form, "verb": "run_now", "status": "scheduled"})
    assert "made due now 2 of 2 jobs" in location
    assert conn.execute(
        "SELECT bool_and(run_at <= now()) FROM pgq.jobs WHERE id = ANY (%s)", (later,)
    ).fetchone()[0]
    # Trigger a schedule: its job now, the schedule's next run as it was.
    conn.execute("SELECT pgq.schedule('nightly', '0 3 * * *', 'report')")
    status, location = post("/schedules/trigger", {"name": "nightly"})
    assert status == 303 and "schedule nightly: enqueued job" in location
    headers = conn.execute("SELECT headers FROM pgq.jobs WHERE entrypoint = 'report'").fetchone()[0]
    assert headers["schedule"] == "nightly" and headers["manual"] is True
    assert "no schedule is named" in post("/schedules/trigger", {"name": "weekly"})[1]
    # Settings: the changed fields only, through pgq.configure; its validation shown.
    status, body, _ = request(secured.url + "/entrypoint?name=email", auth=AUTH)
    assert status == 200 and 'name="max_attempts" value="5"' in body and 'value="30 seconds"' in body
    fields = {"entrypoint": "email", "max_attempts": "7", "lease": "45 seconds", "retention": "7 days"}
    status, location = post("/entrypoints/configure", fields)
    assert status == 303 and "email: set max_attempts = 7, lease = 45 seconds" in location
    row = conn.execute("SELECT max_attempts, lease FROM pgq.settings(ARRAY['email'])").fetchone()
    assert row == (7, timedelta(seconds=45))
    status, location = post("/entrypoints/configure", {"entrypoint": "email", "max_attempts": "0"})
    assert "err=" in location and "max_attempts" in location
    # A favicon, at the path browsers ask for.
    status, body, headers = request(secured.url + "/favicon.ico", auth=AUTH)
    assert status == 200 and headers["content-type"].startswith("image/svg+xml") and "<svg" in body


def test_a_running_jobs_page_shows_why_its_progress_and_its_steps(
    secured: Served, conn: psycopg.Connection
) -> None:
    """The job page shows what pgq.explain says of a live job, its last progress report and
    its durable steps (pgq.job's document)."""
    job = conn.execute("SELECT pgq.enqueue('page_steps', '{}')").fetchone()[0]
    worker = conn.execute("SELECT pgq.register_worker('dash-steps', ARRAY['page_steps'])").fetchone()[0]
    claimed = conn.execute("SELECT id, deliveries FROM pgq.claim_v3(%s, ARRAY['page_steps'], 1)", (worker,))
    assert claimed.fetchall() == [(job, 1)]
    conn.execute("SELECT pgq.progress(%s, %s, 1, 0.25, 'a quarter')", (worker, job))
    conn.execute("SELECT pgq.record_step(%s, %s, 1, 'charge', '{\"charged\": 12}')", (worker, job))
    status, body, _ = request(f"{secured.url}/jobs/{job}", auth=AUTH)
    assert status == 200
    reasons = re.search(r'<ul id="reasons">(.*?)</ul>', body, re.S).group(1)
    assert "<strong>held</strong>" in reasons, reasons
    progress = re.search(r'<p id="progress">(.*?)</p>', body, re.S).group(1)
    assert 'value="0.25"' in progress and "25%" in progress and "a quarter" in progress, progress
    steps = re.search(r'<table class="grid" id="steps">(.*?)</table>', body, re.S).group(1)
    assert "<td>charge</td>" in steps and "&#34;charged&#34;: 12" in steps, steps
