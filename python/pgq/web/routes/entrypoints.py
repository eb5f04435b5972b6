"""The entrypoints' routes: an entrypoint's page, the settings of every entrypoint, and
the actions that change them (configure, pause, resume). Every action goes through
site.action's checks, never around them.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from ..overview_queries import ENTRYPOINT_PAGE
from ..queries import SETTINGS
from ..render import setting_text
from ..site import Site


def routes(site: Site) -> list[Route]:
    db, page, action = site.db, site.page, site.action

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

    async def pause(request: Request) -> Response:
        verb = request.path_params["verb"]

        def run(form: Any) -> str:
            name = str(form.get("entrypoint") or "")
            (db.pause if verb == "pause" else db.resume)(name)
            return f"{verb}d {name}"

        if verb not in ("pause", "resume"):
            return PlainTextResponse("unknown action\n", status_code=404)
        return await action(request, run, needs=verb)

    return [
        Route("/entrypoints/configure", configure, methods=["POST"]),
        Route("/entrypoints/{verb}", pause, methods=["POST"]),
        Route("/entrypoint", site.guarded(entrypoint_page)),
        Route("/settings", site.guarded(settings)),
    ]
