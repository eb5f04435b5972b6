"""The SQL that pgq.Client and pgq.AsyncClient send, shared by both.

Each public function here checks its Python arguments and returns a Call: the statement,
its parameters, the shape of the answer and how to convert it. The clients only execute
Calls, on their own connection or the caller's (`conn=`), so the sync and async clients
cannot drift apart.

By area: call (Call, the prepare policy, errors, the pieces of every statement), producing
(enqueue), batches, following (a job's status, story, results; wait's channels), admin (settling,
administration, periodic jobs), views. The clients use them through this package
(`from pgq import queries as q`), so that a test may replace one name here.
"""

from .admin import (
    cancel,
    complete,
    configure,
    confirm_cancel,
    fail,
    forget_steps,
    pause,
    prune,
    reap,
    rerun,
    resume,
    retry,
    run_schedules,
    schedule,
    snooze,
    unschedule,
)
from .batches import Callback, batch, batch_results
from .call import (
    BACKEND_PID,
    INTERVAL_CHECK,
    PREPARE_THRESHOLD,
    STATEMENT_LOST,
    Call,
    check_aware,
    database_error,
    interval_error,
    pooled_prepare,
    pooled_threshold,
    shape_rows,
)
from .following import (
    FINISHED_CHANNEL,
    FINISHED_STATUSES,
    PROGRESS_CHANNEL,
    check_timeout,
    dependency_results,
    explain,
    job,
    job_status,
    progress_of,
    stored_progress,
    to_result,
    watch,
)
from .producing import enqueue, enqueue_batch, enqueue_job
from .views import LIVE_STATUSES, OUTCOMES, jobs, outcomes, queues, schedules, stats, sweeps, workers

__all__ = [
    "BACKEND_PID",
    "FINISHED_CHANNEL",
    "FINISHED_STATUSES",
    "INTERVAL_CHECK",
    "LIVE_STATUSES",
    "OUTCOMES",
    "PREPARE_THRESHOLD",
    "PROGRESS_CHANNEL",
    "STATEMENT_LOST",
    "Call",
    "Callback",
    "batch",
    "batch_results",
    "cancel",
    "check_aware",
    "check_timeout",
    "complete",
    "configure",
    "confirm_cancel",
    "database_error",
    "dependency_results",
    "enqueue",
    "enqueue_batch",
    "enqueue_job",
    "explain",
    "fail",
    "forget_steps",
    "interval_error",
    "job",
    "job_status",
    "jobs",
    "outcomes",
    "pause",
    "pooled_prepare",
    "pooled_threshold",
    "progress_of",
    "prune",
    "queues",
    "reap",
    "rerun",
    "resume",
    "retry",
    "run_schedules",
    "schedule",
    "schedules",
    "shape_rows",
    "snooze",
    "stats",
    "stored_progress",
    "sweeps",
    "to_result",
    "unschedule",
    "watch",
    "workers",
]
