"""The dashboard's Starlette application: pages, actions, auth and CSRF.

Auth: with a password, every path but /healthz needs HTTP Basic auth. Actions are POSTs
that carry a CSRF token (an HMAC of the session's cookie under a per-process secret, in a
hidden field or the X-CSRF-Token header), run as the DSN's role, and are refused with
--read-only. Against DNS rebinding, every request but /healthz must name an allowed host
(hosts.py), and a POST that carries an Origin must come from the host it was sent to.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
import psycopg
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from . import hosts, metrics
from .queries import ACTIONS, ENTRYPOINT_PAGE, FINISHED, FINISHED_WINDOWS, LIVE, SETTINGS, Queries, make_pool
from .render import register_filters, setting_text

HERE = Path(__file__).parent
# Autoescape everywhere: every value from the database is text, never markup.
_env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(HERE / "templates")), autoescape=True)
register_filters(_env)
templates = Jinja2Templates(env=_env)

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:;"
    " object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)


Next = Callable[[Request], Awaitable[Response]]

# Bulk actions on jobs: what each verb says it did; ids per pgq call (at most 10000).
VERBS = {"retry": "re-queued", "cancel": "canceled or discarded", "run_now": "made due now"}
BULK_CHUNK = 5000


@dataclass(frozen=True)
class Config:
    dsn: str
    user: str = "admin"
    password: str | None = None
    read_only: bool = False
    # The address it listens on, and the names clients may use for it (hosts.allowed).
    host: str = "127.0.0.1"
    allowed_hosts: tuple[str, ...] = ()


class Guard(BaseHTTPMiddleware):
    """Basic auth (when a password is set) and security headers on every response."""

    def __init__(self, app: Any, config: Config) -> None:
        super().__init__(app)
        self.config = config
        self.hosts = hosts.allowed(config.host, config.allowed_hosts)

    async def dispatch(self, request: Request, call_next: Next) -> Response:
        # Before auth: a rebound name gets nothing, not even a password prompt.
        if request.url.path != "/healthz" and not hosts.host_ok(request.headers.get("host", ""), self.hosts):
            return PlainTextResponse(
                "this dashboard does not serve the Host this request names (pgq dashboard --allowed-host)\n",
                status_code=421,
            )
        needs_auth = self.config.password is not None and request.url.path != "/healthz"
        if needs_auth and not _authorized(request.headers.get("authorization", ""), self.config):
            return PlainTextResponse(
                "authentication required\n",
                status_code=401,
                headers={"WWW-Authenticate": 'Basic realm="pgq dashboard", charset="UTF-8"'},
            )
        response = await call_next(request)
        response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        return response


def _authorized(header: str, config: Config) -> bool:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        user, sep, password = base64.b64decode(value, validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return False
    ok_user = hmac.compare_digest(user.encode(), config.user.encode())
    ok_password = hmac.compare_digest(password.encode(), (config.password or "").encode())
    return bool(sep) and ok_user and ok_password


class Sessions:
    """Per-browser CSRF tokens. The cookie holds a random session id and its HMAC (so a
    cookie planted by someone else is refused); the page's token is another HMAC of that
    id. Another browser's token, or a token without its cookie, does not pass."""

    COOKIE = "pgq_session"

    def __init__(self, secret: bytes) -> None:
        self.secret = secret

    def _mac(self, purpose: bytes, session: str) -> str:
        return hmac.new(self.secret, purpose + session.encode(), hashlib.sha256).hexdigest()

    def new(self) -> str:
        return secrets.token_hex(16)

    def of(self, request: Request) -> str | None:
        """The session id of the request's cookie when its signature holds, else None."""
        session, _, mac = request.cookies.get(self.COOKIE, "").partition(".")
        if session and hmac.compare_digest(mac.encode(), self._mac(b"cookie:", session).encode()):
            return session
        return None

    def token(self, session: str) -> str:
        return self._mac(b"csrf:", session)

    def set_cookie(self, response: Response, request: Request, session: str) -> None:
        # HttpOnly: no script reads it; Strict: no other site's request carries it.
        response.set_cookie(
            self.COOKIE,
            f"{session}.{self._mac(b'cookie:', session)}",
            path="/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )


def create_app(config: Config) -> Starlette:
    pool = make_pool(config.dsn)
    db = Queries(pool)
    sessions = Sessions(secrets.token_bytes(32))

    def page(request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
        session = known = sessions.of(request)
        if session is None:
            session = sessions.new()
        context.update(
            request=request,
            read_only=config.read_only,
            # An error page offers nothing (and does not ask a database that may be down).
            may=dict.fromkeys(ACTIONS, False) if name == "error.html" else allowed(),
            now=datetime.now(timezone.utc),
            csrf=sessions.token(session),
            message=request.query_params.get("msg", ""),
            error=context.get("error") or request.query_params.get("err", ""),
        )
        response = templates.TemplateResponse(request, name, context, status_code=status_code)
        if known is None:
            sessions.set_cookie(response, request, session)
        return response

    def allowed() -> dict[str, bool]:
        """The actions the pages offer: those the role may run, none when read-only."""
        if config.read_only:
            return dict.fromkeys(ACTIONS, False)
        try:
            return db.may()
        except psycopg.Error:  # the database is down: the page says so; offer nothing
            return dict.fromkeys(ACTIONS, False)

    def guarded(render: Callable[[Request], Response]) -> Callable[[Request], Response]:
        """Database errors (a role without the privilege, a timeout) shown on the page."""

        def endpoint(request: Request) -> Response:
            try:
                return render(request)
            except psycopg.errors.InsufficientPrivilege as exc:
                message = f"permission denied: {exc.diag.message_primary}"
                return page(request, "error.html", 403, error=message)
            except psycopg.Error as exc:
                return page(request, "error.html", 500, error=f"database error: {exc}")

        return endpoint

    async def action(request: Request, run: Callable[[Any], str], needs: str | None = None) -> Response:
        """A POST: checks, then `run(form)` (the form's fields, `getlist` for repeated ones)
        in a thread; back to the form's `back` page with its message. `needs`: the pgq
        function it calls, refused up front (changing nothing) when the role may not run it."""
        form = await request.form()
        back = str(form.get("back") or "/")
        if not back.startswith("/") or back.startswith("//"):
            back = "/"
        if config.read_only:
            return PlainTextResponse("the dashboard is read-only\n", status_code=403)
        if not hosts.origin_ok(request.headers.get("origin"), request.headers.get("host", "")):
            return PlainTextResponse("cross-origin request refused (Origin)\n", status_code=403)
        token = request.headers.get("x-csrf-token") or str(form.get("csrf") or "")
        session = sessions.of(request)
        if session is None or not hmac.compare_digest(token.encode(), sessions.token(session).encode()):
            return PlainTextResponse("missing or wrong CSRF token (or session cookie)\n", status_code=403)
        if needs is not None:
            may = await run_in_threadpool(allowed)
            if not may.get(needs):
                role = await run_in_threadpool(db.role)
                return PlainTextResponse(
                    f"refused: the dashboard's database role {role} may not run pgq.{needs}"
                    " (it has no EXECUTE on it; a member of pgq_admin may); nothing was changed\n",
                    status_code=403,
                )
        try:
            text = await run_in_threadpool(run, form)
            key = "msg"
        except psycopg.errors.InsufficientPrivilege as exc:
            text, key = f"permission denied: {exc.diag.message_primary}", "err"
        except psycopg.Error as exc:
            text, key = f"{exc.diag.message_primary or exc}", "err"
        sep = "&" if "?" in back else "?"
        return RedirectResponse(f"{back}{sep}{urlencode({key: text})}", status_code=303)

    def _overview(request: Request) -> dict[str, Any]:
        """A page of entrypoints (?ep= a search, ?page= its number)."""
        q = request.query_params
        result = db.overview(q.get("ep", ""), int(q["page"]) if q.get("page", "").isdigit() else 1)
        return {"queues": result.queues, "view": result, "query": request.url.query}

    def overview(request: Request) -> Response:
        return page(request, "overview.html", **_overview(request))

    def overview_table(request: Request) -> Response:
        return page(request, "_queues.html", **_overview(request))

    def series(request: Request) -> Response:
        return JSONResponse(db.series(request.query_params.get("window", "5m")))

    def jobs(request: Request) -> Response:
        q = request.query_params
        raw_id = q.get("id", "").strip()
        job_id = int(raw_id) if raw_id.isdigit() else None
        status = q.get("status", "") if q.get("status", "") in (*LIVE, *FINISHED) else ""
        window = q.get("window", "24h")
        before = q.get("before", "")
        result = db.jobs(q.get("entrypoint", ""), status, job_id, q.get("q", ""), before, window)
        filters = {k: v for k, v in q.items() if k not in ("before", "msg", "err")}
        return page(
            request,
            "jobs.html",
            rows=result.rows,
            next_page=result.next,
            searched=result.searched,
            first_page=not before,
            filters=filters,
            statuses=(*LIVE, *FINISHED),
            windows=FINISHED_WINDOWS,
            # A suggestion list for the entrypoint filter, not every name (there may be many).
            entrypoints=db.entrypoints(limit=ENTRYPOINT_PAGE),
            bad_id=bool(raw_id) and job_id is None,
            here=request.url.path + ("?" + request.url.query if request.url.query else ""),
        )

    def job(request: Request) -> Response:
        job_id = request.path_params["job_id"]
        story = db.job(job_id)
        if story is None:
            message = f"no job {job_id} (unknown, or pruned from the log)"
            return page(request, "error.html", 404, error=message)
        return page(request, "job.html", job=story)

    def workers(request: Request) -> Response:
        return page(request, "workers.html", workers=db.workers(), held=db.running_by_worker())

    def schedules(request: Request) -> Response:
        return page(request, "schedules.html", schedules=db.schedules(), sweeps=db.sweeps())

    def settings(request: Request) -> Response:
        q = request.query_params
        rows = db.settings(q.get("ep", ""), q.get("after", ""))
        next_after = rows[ENTRYPOINT_PAGE - 1]["entrypoint"] if len(rows) > ENTRYPOINT_PAGE else None
        rows = rows[:ENTRYPOINT_PAGE]
        columns = [c for c in (rows[0].keys() if rows else []) if c not in ("entrypoint", "paused")]
        return page(
            request,
            "settings.html",
            rows=rows,
            columns=columns,
            search=q.get("ep", ""),
            after=q.get("after", ""),
            next_after=next_after,
        )

    async def job_action(request: Request) -> Response:
        job_id = request.path_params["job_id"]
        verb = request.path_params["verb"]

        def run(form: Any) -> str:
            if verb == "retry":
                return f"job {job_id}: {'re-queued' if db.retry([job_id]) else 'not dead, nothing to retry'}"
            if verb == "run_now":
                moved = db.run_now([job_id])
                return f"job {job_id}: {'due now' if moved else 'not scheduled, nothing to run now'}"
            n = db.cancel([job_id])
            return f"job {job_id}: {'canceled (or cancel requested)' if n else 'not cancelable'}"

        if verb not in ("retry", "cancel", "run_now"):
            return PlainTextResponse("unknown action\n", status_code=404)
        return await action(request, run, needs=verb)

    def _filter(source: Any) -> tuple[str, str, str]:
        """(entrypoint, status, payload text) of a bulk action's filter. Of all live jobs,
        retry acts on the dead ones and run now on the scheduled ones only: only those are
        walked and counted."""
        status = str(source.get("status") or "")
        if not status:
            status = {"retry": "dead", "run_now": "scheduled"}.get(str(source.get("verb") or ""), "")
        return (
            str(source.get("entrypoint") or ""),
            status if status in LIVE else "",
            str(source.get("q") or ""),
        )

    async def bulk(request: Request) -> Response:
        """Retry, cancel (a dead job: discard) or run now: the selected jobs, or every live
        job the filter matches (after the confirmation page), in chunks of BULK_CHUNK ids."""

        def run(form: Any) -> str:
            verb = str(form.get("verb") or "")
            call = {"retry": db.retry, "cancel": db.cancel, "run_now": db.run_now}[verb]
            if form.get("scope") == "all":
                if form.get("confirm") != "yes":
                    raise ValueError("not confirmed")
                done = seen = after = 0
                while True:
                    ids = db.matching_ids(*_filter(form), after=after, limit=BULK_CHUNK)
                    if not ids:
                        break
                    done += call(ids)
                    seen += len(ids)
                    after = ids[-1]
            else:
                ids = [int(i) for i in form.getlist("ids") if str(i).isdigit()]
                if not ids:
                    return "no job selected"
                seen = len(ids)
                done = sum(call(ids[i : i + BULK_CHUNK]) for i in range(0, len(ids), BULK_CHUNK))
            return f"{VERBS[verb]} {done} of {seen} jobs"

        form = await request.form()
        verb = str(form.get("verb") or "")
        if verb not in VERBS:
            return PlainTextResponse("unknown action\n", status_code=404)
        if form.get("scope") == "all" and form.get("confirm") != "yes":
            text = "an action on all matching jobs needs its confirmation\n"
            return PlainTextResponse(text, status_code=400)
        return await action(request, run, needs=verb)

    def bulk_confirm(request: Request) -> Response:
        q = request.query_params
        verb = q.get("verb", "")
        if verb not in VERBS:
            return page(request, "error.html", 404, error="unknown action")
        entrypoint, status, text = _filter(q)
        n = db.count_matching(entrypoint, status, text)
        filters = {"entrypoint": entrypoint, "status": status, "q": text}
        back = "/jobs?" + urlencode({k: v for k, v in filters.items() if v})
        return page(
            request,
            "confirm.html",
            verb=verb,
            count=n,
            filters=filters,
            back=back,
        )

    async def trigger(request: Request) -> Response:
        def run(form: Any) -> str:
            name = str(form.get("name") or "")
            return f"schedule {name}: enqueued job {db.trigger_schedule(name)}"

        return await action(request, run, needs="trigger_schedule")

    async def configure(request: Request) -> Response:
        def run(form: Any) -> str:
            name = str(form.get("entrypoint") or "")
            current = db.entrypoint_settings(name) or {}
            changes = {}
            for key in SETTINGS:
                value = str(form.get(key) or "").strip()
                if value and value != setting_text(current.get(key)):
                    changes[key] = value
            if not changes:
                return f"{name}: nothing changed"
            db.configure(name, changes)
            return f"{name}: set {', '.join(f'{k} = {v}' for k, v in changes.items())}"

        return await action(request, run, needs="configure")

    def entrypoint_page(request: Request) -> Response:
        name = request.query_params.get("name", "")
        queue = db.queue(name) if name else None
        settings = db.entrypoint_settings(name) if name else None
        if queue is None and settings is None:
            return page(request, "error.html", 404, error=f"no entrypoint {name!r}")
        rows = db.jobs(entrypoint=name, window="24h").rows
        return page(
            request,
            "entrypoint.html",
            ep=name,
            q=queue,
            settings=settings,
            fields=SETTINGS,
            rows=rows[:20],
            schedules=db.schedules_of(name),
        )

    def worker_page(request: Request) -> Response:
        worker_id = str(request.path_params["worker_id"])
        row = db.worker(worker_id)
        if row is None:
            return page(request, "error.html", 404, error=f"no worker {worker_id} (unknown, or pruned)")
        return page(
            request,
            "worker.html",
            w=row,
            running=db.running_of(worker_id),
            history=db.worker_history(worker_id),
        )

    async def retry_dead(request: Request) -> Response:
        def run(form: Any) -> str:
            ids = db.dead_ids(str(form.get("entrypoint") or ""))
            return f"re-queued {db.retry(ids) if ids else 0} dead jobs"

        return await action(request, run, needs="retry")

    async def pause(request: Request) -> Response:
        verb = request.path_params["verb"]

        def run(form: Any) -> str:
            name = str(form.get("entrypoint") or "")
            (db.pause if verb == "pause" else db.resume)(name)
            return f"{verb}d {name}"

        if verb not in ("pause", "resume"):
            return PlainTextResponse("unknown action\n", status_code=404)
        return await action(request, run, needs=verb)

    def favicon(request: Request) -> Response:
        return FileResponse(HERE / "static" / "favicon.svg", media_type="image/svg+xml")

    def healthz(request: Request) -> Response:
        try:
            db.ping()
        except Exception as exc:
            return PlainTextResponse(f"database unreachable: {type(exc).__name__}\n", status_code=503)
        return PlainTextResponse("ok\n")

    def metrics_endpoint(request: Request) -> Response:
        body, content_type = metrics.render(db)
        return Response(body, media_type=content_type)

    @asynccontextmanager
    async def lifespan(app: Starlette):  # type: ignore[no-untyped-def]
        pool.open(wait=False)
        yield
        pool.close()

    routes = [
        Route("/", guarded(overview)),
        Route("/partials/queues", guarded(overview_table)),
        Route("/api/series", guarded(series)),
        Route("/jobs", guarded(jobs)),
        Route("/jobs/{job_id:int}", guarded(job)),
        Route("/jobs/bulk", bulk, methods=["POST"]),
        Route("/jobs/bulk/confirm", guarded(bulk_confirm)),
        Route("/jobs/{job_id:int}/{verb}", job_action, methods=["POST"]),
        Route("/dead/retry", retry_dead, methods=["POST"]),
        Route("/entrypoints/configure", configure, methods=["POST"]),
        Route("/entrypoints/{verb}", pause, methods=["POST"]),
        Route("/entrypoint", guarded(entrypoint_page)),
        Route("/schedules/trigger", trigger, methods=["POST"]),
        Route("/workers", guarded(workers)),
        Route("/workers/{worker_id:uuid}", guarded(worker_page)),
        Route("/favicon.ico", favicon),
        Route("/schedules", guarded(schedules)),
        Route("/settings", guarded(settings)),
        Route("/healthz", healthz),
        Route("/metrics", guarded(metrics_endpoint)),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    app = Starlette(routes=routes, middleware=[Middleware(Guard, config=config)], lifespan=lifespan)
    app.state.queries = db
    return app
