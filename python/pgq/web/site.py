"""What every page and action of the dashboard shares: the templates (autoescaped), the
page renderer that adds the session's CSRF token and the actions the role may run, the
guard that shows a database error on the page, and the checks every POST passes before it
changes anything (read-only, Origin, CSRF token, the role's EXECUTE right).

It defines no route (routes/ does, by page) and must never let an action run before those
checks.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
import psycopg
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.templating import Jinja2Templates

from . import hosts
from .queries import ACTIONS, Queries
from .render import register_filters
from .security import Config, Sessions

HERE = Path(__file__).parent
# Autoescape everywhere: every value from the database is text, never markup.
_env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(HERE / "templates")), autoescape=True)
register_filters(_env)
templates = Jinja2Templates(env=_env)


@dataclass(frozen=True)
class Site:
    """The shared parts a page's routes use (see make_site)."""

    config: Config
    db: Queries
    page: Callable[..., Response]
    allowed: Callable[[], dict[str, bool]]
    guarded: Callable[[Callable[[Request], Response]], Callable[[Request], Response]]
    action: Callable[..., Awaitable[Response]]


def make_site(config: Config, db: Queries) -> Site:
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

    return Site(config, db, page, allowed, guarded, action)
