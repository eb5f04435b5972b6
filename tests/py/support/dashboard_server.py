"""Helpers of the dashboard tests: the app served by uvicorn in a thread, jobs in each state."""

from __future__ import annotations

import base64
import http.cookiejar
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
import uvicorn
from psycopg.types.json import Jsonb

from pgq.web.app import Config, create_app


@dataclass
class Served:
    url: str
    config: Config


@contextmanager
def serve(config: Config) -> Iterator[Served]:
    server = uvicorn.Server(uvicorn.Config(create_app(config), host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the dashboard did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Served(f"http://127.0.0.1:{port}", config)
    finally:
        server.should_exit = True
        thread.join(timeout=10)


_COOKIES = http.cookiejar.CookieJar()


def request(
    url: str,
    data: dict[str, str] | None = None,
    auth: tuple[str, str] | None = None,
    headers: dict[str, str] | None = None,
    raw: str | None = None,
) -> tuple[int, str, dict[str, str]]:
    """(status, body, headers) of a GET, or of a form POST when data (or a raw encoded
    form, for repeated fields) is given; no redirects."""
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    if raw is not None:
        body = raw.encode()
    req = urllib.request.Request(url, data=body, headers=headers or {})
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode())

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any) -> None:
            return None

    # A browser's cookie jar: the session cookie of the page that gave a CSRF token goes
    # with the POST that uses it (a Cookie header given here wins).
    opener = urllib.request.build_opener(NoRedirect, urllib.request.HTTPCookieProcessor(_COOKIES))
    try:
        with opener.open(req, timeout=30) as resp:
            return resp.status, resp.read().decode(), {k.lower(): v for k, v in resp.headers.items()}
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(), {k.lower(): v for k, v in err.headers.items()}


def dead_job(conn: psycopg.Connection, entrypoint: str, payload: Any = None, error: str = "boom") -> int:
    """A job that failed its only attempt."""
    job_id = conn.execute(
        "SELECT pgq.enqueue(%s, %s, priority => 1000, max_attempts => 1)", (entrypoint, Jsonb(payload))
    ).fetchone()[0]
    worker = conn.execute("SELECT pgq.register_worker('dash-test', ARRAY[%s])", (entrypoint,)).fetchone()[0]
    claimed = conn.execute("SELECT id FROM pgq.claim(%s, ARRAY[%s], 1)", (worker, entrypoint)).fetchall()
    assert claimed == [(job_id,)]
    assert conn.execute("SELECT pgq.fail(%s, %s, %s)", (worker, job_id, error)).fetchone()[0] == "dead"
    conn.execute("SELECT pgq.unregister_worker(%s)", (worker,))
    return job_id


def succeeded_jobs(conn: psycopg.Connection, entrypoint: str, n: int) -> list[int]:
    ids = [
        r[0]
        for r in conn.execute(
            "SELECT pgq.enqueue_batch(%s, array_fill('{}'::jsonb, ARRAY[%s]))", (entrypoint, n)
        ).fetchall()
    ]
    worker = conn.execute("SELECT pgq.register_worker('dash-test', ARRAY[%s])", (entrypoint,)).fetchone()[0]
    claimed = [
        r[0] for r in conn.execute("SELECT id FROM pgq.claim(%s, ARRAY[%s], %s)", (worker, entrypoint, n))
    ]
    conn.execute("SELECT pgq.complete(%s, %s::bigint[])", (worker, claimed))
    conn.execute("SELECT pgq.unregister_worker(%s)", (worker,))
    return ids
