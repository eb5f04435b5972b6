"""The dashboard's Starlette application: pages, actions, auth and CSRF.

Auth: with a password, every path but /healthz needs HTTP Basic auth. Actions are POSTs
that carry a CSRF token (an HMAC of the session's cookie under a per-process secret, in a
hidden field or the X-CSRF-Token header), run as the DSN's role, and are refused with
--read-only. Against DNS rebinding, every request but /healthz must name an allowed host
(hosts.py), and a POST that carries an Origin must come from the host it was sent to.

The pages' routes live in routes/ (one module per page), the shared renderer and action
checks in site.py, the auth, headers and sessions in security.py; this module puts them
together. It must never add a route that bypasses security.Guard.
"""

from __future__ import annotations

from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from . import metrics
from .queries import Queries, make_pool
from .routes import entrypoints, jobs, overview, schedules, workers
from .security import Config, Guard
from .site import HERE, make_site

__all__ = ["Config", "create_app"]


def create_app(config: Config) -> Starlette:
    pool = make_pool(config.dsn)
    db = Queries(pool)
    site = make_site(config, db)

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
        *overview.routes(site),
        *jobs.routes(site),
        *entrypoints.routes(site),
        *schedules.routes(site),
        *workers.routes(site),
        Route("/favicon.ico", favicon),
        Route("/healthz", healthz),
        Route("/metrics", site.guarded(metrics_endpoint)),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    app = Starlette(routes=routes, middleware=[Middleware(Guard, config=config)], lifespan=lifespan)
    app.state.queries = db
    return app
