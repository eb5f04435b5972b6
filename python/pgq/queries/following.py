"""Following jobs: their status, story, reasons and results, and what Client.wait listens to."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidArgument, UnknownJob
from ..rows import DependencyResult, JobResult, Reason
from .call import Call

# The statuses of finished jobs (pgq.outcomes).
FINISHED_STATUSES = ("succeeded", "canceled", "dead")
# The channel pgq.watch'ed jobs notify when they finish (payload: the id).
FINISHED_CHANNEL = "pgq_finished"
# The channel pgq.progress notifies (payload: {"id", "value", "note", "delivery"} as JSON).
PROGRESS_CHANNEL = "pgq_progress"


def job_status(job_id: int) -> Call:
    return Call("SELECT pgq.job_status(job_id => %s::bigint)", (job_id,))


def job(job_id: int) -> Call:
    return Call("SELECT pgq.job(job_id => %s::bigint)", (job_id,))


def explain(job_id: int) -> Call:
    return Call(
        "SELECT e.reason, e.detail, e.until, e.job_ids FROM pgq.explain(job_id => %s::bigint) AS e",
        (job_id,),
        shape="rows",
        row_class=Reason,
    )


def dependency_results(job_id: int) -> Call:
    return Call(
        "SELECT d.id, d.status, d.result FROM pgq.dependency_results(job_id => %s::bigint) AS d",
        (job_id,),
        shape="rows",
        row_class=DependencyResult,
    )


def watch(job_id: int) -> Call:
    return Call("SELECT pgq.watch(job_id => %s::bigint)", (job_id,))


def to_result(job_id: int, story: dict[str, Any] | None) -> JobResult | None:
    """A JobResult from pgq.job's document: None while the job is unfinished. Raises
    UnknownJob for an id pgq does not know (or whose outcome was pruned)."""
    if story is None:
        raise UnknownJob(f"pgq: job {job_id} is unknown (or its outcome was pruned)")
    if not story["finished"]:
        return None
    return JobResult(job_id, story["status"], story["result"], story["error"])


def progress_of(job_id: int, payload: str) -> dict[str, Any] | None:
    """A pgq_progress notification's report when it is about job_id (Client.wait's
    on_progress gets {"value", "note", "delivery"}), else None."""
    import json

    try:
        doc = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("id") != job_id:
        return None
    return {"value": doc.get("value"), "note": doc.get("note"), "delivery": doc.get("delivery")}


def stored_progress(story: dict[str, Any] | None) -> dict[str, Any] | None:
    """pgq.job's last progress report as on_progress gets it, or None."""
    report = (story or {}).get("progress")
    if not report:
        return None
    return {"value": report["value"], "note": report["note"], "delivery": report["delivery"]}


def check_timeout(timeout: float | None) -> None:
    if timeout is not None and (isinstance(timeout, bool) or timeout < 0):
        raise InvalidArgument(f"pgq: invalid argument timeout: {timeout!r} (hint: seconds >= 0, or None)")
