"""The jobs' routes: the jobs browser, a job's page, the actions on one job, on the jobs
selected or on every job a filter matches (after a confirmation page), and retrying an
entrypoint's dead jobs. Every action goes through site.action's checks, never around them.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from ..job_queries import FINISHED, FINISHED_WINDOWS, LIVE
from ..overview_queries import ENTRYPOINT_PAGE
from ..site import Site

# Bulk actions on jobs: what each verb says it did; ids per pgq call (at most 10000).
VERBS = {"retry": "re-queued", "cancel": "canceled or discarded", "run_now": "made due now"}
BULK_CHUNK = 5000


def routes(site: Site) -> list[Route]:
    db, page, action = site.db, site.page, site.action

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

    async def retry_dead(request: Request) -> Response:
        def run(form: Any) -> str:
            ids = db.dead_ids(str(form.get("entrypoint") or ""))
            return f"re-queued {db.retry(ids) if ids else 0} dead jobs"

        return await action(request, run, needs="retry")

    return [
        Route("/jobs", site.guarded(jobs)),
        Route("/jobs/{job_id:int}", site.guarded(job)),
        Route("/jobs/bulk", bulk, methods=["POST"]),
        Route("/jobs/bulk/confirm", site.guarded(bulk_confirm)),
        Route("/jobs/{job_id:int}/{verb}", job_action, methods=["POST"]),
        Route("/dead/retry", retry_dead, methods=["POST"]),
    ]
