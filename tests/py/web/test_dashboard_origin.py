"""The dashboard against DNS rebinding and cross-site requests: Host, Origin, per-session CSRF.

A page whose DNS name is rebound to 127.0.0.1 is same-origin with a loopback dashboard in
the victim's browser; its requests carry its own name in Host. They are refused, every POST
checks Origin, and the CSRF token is bound to a session cookie of the browser that got it."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from pgq.web.app import Config, create_app
from support.dashboard_server import Served, dead_job, request, serve

AUTH = ("ops", "s3cret-Passw0rd")


@pytest.fixture(scope="module")
def loopback(dsn: str) -> Iterator[Served]:
    with serve(Config(dsn=dsn)) as served:
        yield served


def port(served: Served) -> int:
    return urlsplit(served.url).port or 80


def session(served: Served, host: str | None = None, auth: tuple[str, str] | None = None) -> tuple[str, str]:
    """(cookie, token) of a new browser session: the page's token and the cookie it set."""
    headers = {"Host": host} if host else {}
    status, body, headers_out = request(
        served.url + "/settings", auth=auth, headers={**headers, "Cookie": ""}
    )
    assert status == 200, body
    match = re.search(r'name="csrf-token" content="([^"]+)"', body)
    assert match
    cookie = headers_out["set-cookie"]
    return cookie.split(";")[0], match.group(1)


@pytest.mark.parametrize(
    "host",
    ["evil.example:{port}", "evil.example", "127.0.0.1.evil.example:{port}", "localhost.evil:{port}", ""],
)
def test_a_foreign_host_is_refused(loopback: Served, host: str) -> None:
    headers = {"Host": host.format(port=port(loopback))}
    for path in ("/", "/jobs", "/settings", "/metrics", "/static/dashboard.css"):
        status, body, _ = request(loopback.url + path, headers=headers)
        assert status == 421 and "Host" in body, (path, status, body)
    # Liveness probes (a kubelet sends the pod's address) see nothing but "ok".
    assert request(loopback.url + "/healthz", headers=headers)[0] == 200


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1:{port}", "127.0.0.1", "localhost:{port}", "LOCALHOST", "[::1]:{port}", "localhost.:{port}"],
)
def test_the_listening_address_and_its_loopback_names_are_served(loopback: Served, host: str) -> None:
    status, _, _ = request(loopback.url + "/settings", headers={"Host": host.format(port=port(loopback))})
    assert status == 200


def test_each_session_has_its_own_csrf_token_bound_to_its_cookie(loopback: Served, conn) -> None:
    conn.execute("SELECT pgq.resume('origin_q')")
    form = {"entrypoint": "origin_q", "back": "/settings"}
    cookie_a, token_a = session(loopback)
    cookie_b, token_b = session(loopback)
    assert token_a != token_b and cookie_a != cookie_b
    _, _, headers = request(loopback.url + "/settings", headers={"Cookie": ""})
    attributes = {a.strip().lower() for a in headers["set-cookie"].split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/"} <= attributes, attributes
    pause = loopback.url + "/entrypoints/pause"
    # Another session's token, no cookie, a forged or tampered cookie: refused.
    assert request(pause, {**form, "csrf": token_b}, headers={"Cookie": cookie_a})[0] == 403
    assert request(pause, {**form, "csrf": token_a}, headers={"Cookie": ""})[0] == 403
    name, _, value = cookie_a.partition("=")
    assert request(pause, {**form, "csrf": token_a}, headers={"Cookie": f"{name}=x{value[1:]}"})[0] == 403
    assert request(pause, {**form, "csrf": token_a}, headers={"Cookie": f"{name}=forged.forged"})[0] == 403
    assert (
        conn.execute("SELECT count(*) FROM pgq.queues WHERE entrypoint = 'origin_q' AND paused").fetchone()[0]
        == 0
    )
    # Its own: done, also through the header htmx sends.
    assert request(pause, {**form, "csrf": token_a}, headers={"Cookie": cookie_a})[0] == 303
    resume = loopback.url + "/entrypoints/resume"
    assert request(resume, form, headers={"Cookie": cookie_b, "X-CSRF-Token": token_b})[0] == 303


def test_every_post_checks_origin(loopback: Served, conn) -> None:
    job = dead_job(conn, "origin_e")
    cookie, token = session(loopback)
    form = {"csrf": token, "back": "/"}
    url = f"{loopback.url}/jobs/{job}/cancel"
    p = port(loopback)
    for origin in (f"http://evil.example:{p}", "null", f"http://127.0.0.1:{p + 1}", "http://127.0.0.1"):
        status, body, _ = request(url, form, headers={"Cookie": cookie, "Origin": origin})
        assert status == 403 and "Origin" in body, (origin, status, body)
    # A rebound page's POST: its Host is its own name, whatever the token.
    evil = {"Cookie": cookie, "Origin": f"http://evil.example:{p}", "Host": f"evil.example:{p}"}
    assert request(url, form, headers=evil)[0] == 421
    # A browser on the page it loaded; a non-browser client sends no Origin (it still
    # needs the session's cookie and token).
    for headers in (
        {"Origin": f"http://127.0.0.1:{p}"},
        {},
        {"Origin": f"http://localhost:{p}", "Host": f"localhost:{p}"},
    ):
        status, _, _ = request(url, form, headers={"Cookie": cookie, **headers})
        assert status == 303, headers


def test_a_wildcard_address_serves_the_configured_hosts_only(dsn: str) -> None:
    config = Config(
        dsn=dsn, user=AUTH[0], password=AUTH[1], host="0.0.0.0", allowed_hosts=("dash.example.com",)
    )
    with serve(config) as served:
        p = port(served)
        assert (
            request(served.url + "/settings", auth=AUTH, headers={"Host": f"dash.example.com:{p}"})[0] == 200
        )
        assert request(served.url + "/settings", auth=AUTH, headers={"Host": "Dash.Example.com"})[0] == 200
        for host in (f"127.0.0.1:{p}", f"0.0.0.0:{p}", f"evil.example:{p}"):
            assert request(served.url + "/settings", auth=AUTH, headers={"Host": host})[0] == 421, host
        # Behind a TLS proxy that passes Host on: the browser's Origin is https.
        cookie, token = session(served, "dash.example.com", AUTH)
        headers = {"Host": "dash.example.com", "Origin": "https://dash.example.com", "Cookie": cookie}
        form = {"entrypoint": "origin_w", "back": "/settings", "csrf": token}
        assert request(served.url + "/entrypoints/resume", form, auth=AUTH, headers=headers)[0] == 303


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pgq", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**__import__("os").environ, **env},
    )


def test_a_wildcard_address_needs_its_allowed_hosts(dsn: str) -> None:
    done = _cli("dashboard", "--dsn", dsn, "--host", "0.0.0.0", "--port", "0", PGQ_DASHBOARD_PASSWORD="x")
    assert done.returncode == 1
    assert "--allowed-host" in done.stderr and "PGQ_DASHBOARD_ALLOWED_HOSTS" in done.stderr
    done = _cli(
        "dashboard",
        "--dsn",
        dsn,
        "--host",
        "127.0.0.1",
        "--allowed-host",
        "*",
        "--port",
        "0",
        PGQ_DASHBOARD_PASSWORD="",
    )
    assert done.returncode == 1 and "needs a password" in done.stderr


def test_every_post_route_checks_origin_and_csrf(loopback: Served, conn) -> None:
    """Each POST route of the app (listed from its routes, so that a new one must be added
    here) refuses a foreign Origin and a missing token, and changes nothing."""
    job = dead_job(conn, "origin_all")
    scheduled = conn.execute(
        "SELECT pgq.enqueue('origin_all', '{}', run_at => now() + interval '1 hour')"
    ).fetchone()[0]
    conn.execute("SELECT pgq.schedule('origin_nightly', '0 3 * * *', 'origin_all')")
    forms = {
        "/jobs/{job_id:int}/{verb}": [(f"/jobs/{job}/{v}", {}) for v in ("retry", "cancel")]
        + [(f"/jobs/{scheduled}/run_now", {})],
        "/jobs/bulk": [("/jobs/bulk", {"verb": "cancel", "ids": str(job)})],
        "/dead/retry": [("/dead/retry", {"entrypoint": "origin_all"})],
        "/entrypoints/configure": [
            ("/entrypoints/configure", {"entrypoint": "origin_all", "max_attempts": "9"})
        ],
        "/entrypoints/{verb}": [("/entrypoints/pause", {"entrypoint": "origin_all"})],
        "/schedules/trigger": [("/schedules/trigger", {"name": "origin_nightly"})],
    }
    app = create_app(Config(dsn="postgresql://unused"))
    posts = {r.path for r in app.routes if "POST" in (getattr(r, "methods", None) or ())}
    assert posts == set(forms), "a POST route without its case here"

    def state() -> tuple:
        return conn.execute(
            "SELECT (SELECT array_agg(ROW(id, status, run_at) ORDER BY id) FROM pgq.jobs),"
            " (SELECT row(max_attempts, paused) FROM pgq.settings(ARRAY['origin_all']))"
        ).fetchone()

    before = state()
    cookie, token = session(loopback)
    p = port(loopback)
    for cases in forms.values():
        for path, form in cases:
            url = loopback.url + path
            status, body, _ = request(
                url,
                {**form, "csrf": token, "back": "/"},
                headers={"Cookie": cookie, "Origin": "http://evil.example"},
            )
            assert status == 403 and "Origin" in body, (path, status, body)
            status, body, _ = request(
                url, {**form, "back": "/"}, headers={"Cookie": cookie, "Origin": f"http://127.0.0.1:{p}"}
            )
            assert status == 403 and "CSRF" in body, (path, status, body)
    assert state() == before
