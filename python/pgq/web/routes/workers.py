"""The workers' routes: the list of workers with the jobs each holds, and a worker's page
with its running jobs and its history. Pages only: no action here changes anything.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..site import Site


def routes(site: Site) -> list[Route]:
    db, page = site.db, site.page

    def workers(request: Request) -> Response:
        return page(request, "workers.html", workers=db.workers(), held=db.running_by_worker())

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

    return [
        Route("/workers", site.guarded(workers)),
        Route("/workers/{worker_id:uuid}", site.guarded(worker_page)),
    ]
