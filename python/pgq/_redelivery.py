"""What the worker says when it starts a job that was delivered before.

A retry or a snooze follows a line the worker already logged (the failure at WARNING, the
snooze with --log-jobs): its re-delivery is DEBUG. A delivery after a lost one (a crashed
or partitioned worker, an expired lease, a job given back at shutdown while it ran) is news:
the run before it may have done its work without its outcome being recorded, and nothing
else in this worker's log says so. That is a WARNING, with the reason and the numbers.
"""

from __future__ import annotations

import logging

from .job import Job

_WHY = {
    "retry": "after a failed attempt",
    "snooze": "after a snooze",
    "lost": "after a lost delivery (its worker was lost or gave it back while it ran:"
    " that run may have done its work)",
}


def log_redelivery(log: logging.Logger, job: Job) -> None:
    """Log the start of a job with deliveries > 1, at the level its reason deserves."""
    level = logging.WARNING if job.reason == "lost" else logging.DEBUG
    if log.isEnabledFor(level):
        log.log(
            level,
            "job %d (%s): delivery %d %s, attempt %d",
            job.id,
            job.entrypoint,
            job.deliveries,
            _WHY.get(job.reason, f"({job.reason})"),
            job.attempt,
            extra={
                "job_id": job.id,
                "entrypoint": job.entrypoint,
                "attempt": job.attempt,
                "deliveries": job.deliveries,
                "reason": job.reason,
            },
        )
