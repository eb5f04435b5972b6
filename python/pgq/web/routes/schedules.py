"""The schedules' routes: the schedules with the sweeps' last runs, and triggering a
schedule now. The trigger goes through site.action's checks, never around them.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..site import Site


def routes(site: Site) -> list[Route]:
    db, page, action = site.db, site.page, site.action

    def schedules(request: Request) -> Response:
        return page(request, "schedules.html", schedules=db.schedules(), sweeps=db.sweeps())

    async def trigger(request: Request) -> Response:
        def run(form: Any) -> str:
            name = str(form.get("name") or "")
            return f"schedule {name}: enqueued job {db.trigger_schedule(name)}"

        return await action(request, run, needs="trigger_schedule")

    return [
        Route("/schedules/trigger", trigger, methods=["POST"]),
        Route("/schedules", site.guarded(schedules)),
    ]
