"""The client's worker-protocol, administration, periodic-job and view methods (pgq.Client
and pgq.AsyncClient inherit them; see async_client.py).

Written by hand as async_client_admin.py; client_admin.py is generated from it by
scripts/async_to_sync.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, TypeAlias

import psycopg

from . import queries as q
from .queries import Call
from .rows import JobRow, OutcomeRow, QueueRow, Rerun, ScheduleRow, StatsRow, SweepRow, WorkerRow

Conn: TypeAlias = "psycopg.AsyncConnection[Any] | None"
Interval: TypeAlias = "timedelta | str | None"


class AsyncClientAdmin:
    """Settling, administering and reading the views; the client class runs the calls (_run)."""

    async def _run(self, call: Call, conn: Conn = None) -> Any:
        raise NotImplementedError  # the client class's

    # --- worker protocol -------------------------------------------------------------

    async def complete(
        self,
        worker_id: Any,
        job_ids: Iterable[int],
        *,
        results: Sequence[Any] | None = None,
        deliveries: Sequence[int] | None = None,
        conn: Conn = None,
    ) -> list[int]:
        """Complete jobs the worker holds (pgq.complete, fenced); returns the ids completed.
        results: one JSON value per id; deliveries: per id, the delivery to settle."""
        done: list[int] = await self._run(q.complete(worker_id, job_ids, results, deliveries), conn)
        return done

    async def fail(
        self,
        worker_id: Any,
        job_id: int,
        error: str,
        *,
        retry_in: timedelta | None = None,
        delivery: int | None = None,
        conn: Conn = None,
    ) -> str | None:
        """Fail a held job (pgq.fail): 'queued', 'dead', 'canceled', or None when the worker
        no longer holds it (or that delivery)."""
        outcome: str | None = await self._run(q.fail(worker_id, job_id, error, retry_in, delivery), conn)
        return outcome

    async def snooze(
        self,
        worker_id: Any,
        job_id: int,
        delay: timedelta,
        *,
        delivery: int | None = None,
        conn: Conn = None,
    ) -> str | None:
        """Put a held job back for `delay` without spending an attempt (pgq.snooze):
        'snoozed'; 'queued', 'dead' or 'canceled' past max_snoozes (the job failed); None
        when the worker no longer holds it (or that delivery)."""
        outcome: str | None = await self._run(q.snooze(worker_id, job_id, delay, delivery), conn)
        return outcome

    async def confirm_cancel(
        self, worker_id: Any, job_id: int, *, delivery: int | None = None, conn: Conn = None
    ) -> str | None:
        """Settle a held job whose cancellation was requested (pgq.heartbeat returned its id)
        as canceled, no attempt spent (pgq.confirm_cancel): 'canceled', or None when the
        worker no longer holds it (or that delivery)."""
        outcome: str | None = await self._run(q.confirm_cancel(worker_id, job_id, delivery), conn)
        return outcome

    # --- administration --------------------------------------------------------------

    async def cancel(self, job_ids: int | Iterable[int], *, conn: Conn = None) -> int:
        """Cancel jobs (pgq.cancel): queued, waiting and dead ones at once, running ones at
        their next heartbeat. Returns how many were canceled or marked."""
        return int(await self._run(q.cancel(job_ids), conn))

    async def retry(self, job_ids: int | Iterable[int], *, conn: Conn = None) -> int:
        """Re-queue dead jobs now with attempts reset (pgq.retry); returns how many."""
        return int(await self._run(q.retry(job_ids), conn))

    async def forget_steps(self, job_ids: int | Iterable[int], *, conn: Conn = None) -> int:
        """Forget the durable steps of jobs that are not running (pgq.forget_steps), so that
        their next run starts over; with retry() in one transaction, a retry from scratch."""
        return int(await self._run(q.forget_steps(job_ids), conn))

    async def rerun(self, job_ids: int | Iterable[int], *, conn: Conn = None) -> list[Rerun]:
        """Enqueue finished jobs (succeeded, canceled, discarded) again, each as a new job
        from its stored row (pgq.rerun); live and unknown ids are skipped."""
        rows: list[Rerun] = await self._run(q.rerun(job_ids), conn)
        return rows

    async def pause(self, entrypoint: str, *, create_new: bool | None = None, conn: Conn = None) -> None:
        """Stop claims of an entrypoint until resume(); enqueue still accepts jobs.
        create_new=False refuses an entrypoint nothing names yet (no job, settings, schedule
        or worker: a typo) with InvalidArgument; None or True pauses it anyway."""
        await self._run(q.pause(entrypoint, create_new), conn)

    async def resume(self, entrypoint: str, *, conn: Conn = None) -> None:
        """Let claims take an entrypoint's jobs again."""
        await self._run(q.resume(entrypoint), conn)

    async def isolate(self, entrypoint: str, *, conn: Conn = None) -> int:
        """Give an entrypoint a partition of the job table of its own and move its jobs
        there (pgq.isolate: it locks the job table while it moves them); returns the
        jobs moved, 0 when it had one already."""
        return int(await self._run(q.isolate(entrypoint), conn))

    async def unisolate(self, entrypoint: str, *, conn: Conn = None) -> int:
        """Move an entrypoint's jobs back into the shared partition and drop its own
        (pgq.unisolate: it locks the whole job table while it moves them); returns the jobs
        moved, 0 when it had no partition of its own."""
        return int(await self._run(q.unisolate(entrypoint), conn))

    async def configure(
        self,
        entrypoint: str,
        *,
        max_attempts: int | None = None,
        backoff_base: Interval = None,
        backoff_max: Interval = None,
        lease: Interval = None,
        timeout: Interval = None,
        concurrency: int | None = None,
        rate: Decimal | float | None = None,
        retention: Interval = None,
        max_deliveries: int | None = None,
        key_concurrency: int | None = None,
        max_snoozes: int | None = None,
        create_new: bool | None = None,
        conn: Conn = None,
    ) -> None:
        """Set per-entrypoint settings (pgq.configure); None leaves a setting as it is.

        Intervals are timedeltas or PostgreSQL interval text ("30 seconds").
        concurrency=0 removes the limit. rate: jobs started per second across all workers
        (0.001 to 1000000; a Decimal, or a float or int); rate=0 removes the limit.
        key_concurrency: the most running jobs of one concurrency key (1: one at a time, in
        order); 0 removes the limit. max_snoozes: how often one job may snooze.
        create_new=False refuses an entrypoint nothing names yet (a typo).
        Raises InvalidArgument; nothing changes then.
        """
        call = q.configure(
            entrypoint,
            max_attempts=max_attempts,
            backoff_base=backoff_base,
            backoff_max=backoff_max,
            lease=lease,
            timeout=timeout,
            concurrency=concurrency,
            rate=rate,
            retention=retention,
            max_deliveries=max_deliveries,
            key_concurrency=key_concurrency,
            max_snoozes=max_snoozes,
            create_new=create_new,
        )
        await self._run(call, conn)

    async def reap(self, *, conn: Conn = None) -> int:
        """Run the sweep now (pgq.reap); returns how many jobs it released or failed."""
        return int(await self._run(q.reap(), conn))

    async def prune(self, *, conn: Conn = None) -> int:
        """Apply outcome-log retention now (pgq.prune); returns how many outcomes it removed.
        pg_cron (or the workers' sweep) runs it hourly; 0 while another prune is running."""
        return int(await self._run(q.prune(), conn))

    # --- periodic jobs ---------------------------------------------------------------

    async def schedule(
        self, name: str, cron: str, entrypoint: str, payload: Any = None, *, conn: Conn = None
    ) -> datetime:
        """Create or replace the periodic job `name` (pgq.schedule); returns its next run.
        cron: 5 fields in UTC or a macro such as @daily; every matching minute,
        pgq.run_schedules enqueues one job of entrypoint with payload. Replacing a schedule
        keeps its last run (and next run when the cron is unchanged). Raises InvalidCron
        (naming the field, or for a cron that matches no date), InvalidArgument."""
        next_run: datetime = await self._run(q.schedule(name, cron, entrypoint, payload), conn)
        return next_run

    async def unschedule(self, name: str, *, conn: Conn = None) -> bool:
        """Remove the periodic job `name` (pgq.unschedule); False when there was none. Jobs it
        already enqueued are left alone."""
        return bool(await self._run(q.unschedule(name), conn))

    async def run_schedules(self, now: datetime | None = None, *, conn: Conn = None) -> int:
        """Enqueue the schedules due at `now` (pgq.run_schedules); returns how many.

        now: an aware datetime, default the database's current time. Each schedule fires
        at most once per minute however often this runs; pg_cron and the workers' sweep
        call it, so call it yourself only without either (or in tests).
        """
        return int(await self._run(q.run_schedules(now), conn))

    # --- views -----------------------------------------------------------------------

    async def schedules(self, *, conn: Conn = None) -> list[ScheduleRow]:
        """The pgq.schedules view: every periodic job, by name."""
        rows: list[ScheduleRow] = await self._run(q.schedules(), conn)
        return rows

    async def stats(
        self, since: timedelta | str = timedelta(minutes=5), *, conn: Conn = None
    ) -> list[StatsRow]:
        """pgq.stats: per-entrypoint outcomes, jobs per second and wait/run percentiles over
        the last `since` (a timedelta or interval text, 1 second to 31 days); only entrypoints
        with outcomes in the window have a row. Raises InvalidArgument."""
        rows: list[StatsRow] = await self._run(q.stats(since), conn)
        return rows

    async def queues(self, *, conn: Conn = None) -> list[QueueRow]:
        """The pgq.queues view: one row per entrypoint with jobs or settings."""
        rows: list[QueueRow] = await self._run(q.queues(), conn)
        return rows

    async def workers(self, *, conn: Conn = None) -> list[WorkerRow]:
        """The pgq.workers view: alive workers first, then the most recently registered."""
        rows: list[WorkerRow] = await self._run(q.workers(), conn)
        return rows

    async def sweeps(self, *, conn: Conn = None) -> list[SweepRow]:
        """The pgq.sweeps view: per sweep (reap, run_schedules, prune), how often it should
        run, when it last ran and how late it is (a stopped pg_cron shows here)."""
        rows: list[SweepRow] = await self._run(q.sweeps(), conn)
        return rows

    async def jobs(
        self, entrypoint: str | None = None, status: str | None = None, limit: int = 100, *, conn: Conn = None
    ) -> list[JobRow]:
        """Live jobs from the pgq.jobs view, oldest id first, optionally filtered. status:
        queued, waiting, running or dead (finished jobs: outcomes())."""
        rows: list[JobRow] = await self._run(q.jobs(entrypoint, status, limit), conn)
        return rows

    async def outcomes(
        self,
        entrypoint: str | None = None,
        outcome: str | None = None,
        limit: int = 100,
        *,
        conn: Conn = None,
    ) -> list[OutcomeRow]:
        """The outcome log (pgq.outcomes), newest first, optionally filtered. outcome:
        succeeded, canceled, dead (discarded) or failed (one row per failed attempt)."""
        rows: list[OutcomeRow] = await self._run(q.outcomes(entrypoint, outcome, limit), conn)
        return rows
