"""The overview's routes: the page of entrypoints with their counts, its table refreshed
in place (htmx), and the charts' series. Pages only: no action here changes anything.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..site import Site


def routes(site: Site) -> list[Route]:
    db, page = site.db, site.page

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

    return [
        Route("/", site.guarded(overview)),
        Route("/partials/queues", site.guarded(overview_table)),
        Route("/api/series", site.guarded(series)),
    ]
