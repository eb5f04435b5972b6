"""The client's producing methods: enqueue, enqueue_job, enqueue_batch, batch (pgq.Client and
pgq.AsyncClient inherit them; see async_client.py).

Written by hand as async_client_enqueue.py; client_enqueue.py is generated from it by
scripts/async_to_sync.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeAlias

import psycopg

from . import queries as q
from .queries import Call, Callback
from .rows import Batch, BatchMember, Enqueued

Conn: TypeAlias = "psycopg.AsyncConnection[Any] | None"
Interval: TypeAlias = "timedelta | str | None"


class AsyncClientEnqueue:
    """Producing jobs; the client class runs the calls (_run)."""

    async def _run(self, call: Call, conn: Conn = None) -> Any:
        raise NotImplementedError  # the client class's

    async def enqueue(
        self,
        entrypoint: str,
        payload: Any = None,
        *,
        priority: int = 0,
        run_at: datetime | timedelta | None = None,
        dedupe_key: str | None = None,
        headers: dict[str, Any] | None = None,
        max_attempts: int | None = None,
        depends_on: Iterable[int] | None = None,
        concurrency_key: str | None = None,
        dedupe_scope: str | None = None,
        dedupe_window: Interval = None,
        dedupe_mode: str | None = None,
        conn: Conn = None,
    ) -> int:
        """Enqueue one job (pgq.enqueue); returns its id.

        payload: any JSON-serialisable value (None is SQL NULL). run_at: an aware datetime,
        or a timedelta from the database's now(). A live job with the same entrypoint and
        dedupe_key is not duplicated: its id is returned. depends_on: ids of jobs that must
        succeed first: the job is 'waiting' until they all have, and is canceled if one of
        them ends dead or canceled. concurrency_key: the key (a tenant, a customer) the job
        counts against: claims rotate among keys, and the entrypoint's key_concurrency limits
        the running jobs of one key. dedupe_scope, dedupe_window, dedupe_mode: see
        enqueue_job(), which also tells whether the call created the job. Raises
        InvalidArgument, PayloadTooLarge.
        """
        call = q.enqueue(
            entrypoint,
            payload,
            priority=priority,
            run_at=run_at,
            dedupe_key=dedupe_key,
            headers=headers,
            max_attempts=max_attempts,
            depends_on=depends_on,
            concurrency_key=concurrency_key,
            dedupe_scope=dedupe_scope,
            dedupe_window=dedupe_window,
            dedupe_mode=dedupe_mode,
        )
        return int(await self._run(call, conn))

    async def enqueue_job(
        self,
        entrypoint: str,
        payload: Any = None,
        *,
        priority: int = 0,
        run_at: datetime | timedelta | None = None,
        dedupe_key: str | None = None,
        headers: dict[str, Any] | None = None,
        max_attempts: int | None = None,
        depends_on: Iterable[int] | None = None,
        concurrency_key: str | None = None,
        dedupe_scope: str | None = None,
        dedupe_window: Interval = None,
        dedupe_mode: str | None = None,
        conn: Conn = None,
    ) -> Enqueued:
        """Enqueue one job (pgq.enqueue_job) and tell whether this call created it: an
        Enqueued(id, created, replaced). Takes enqueue()'s arguments. dedupe_scope: which jobs
        with the same entrypoint and dedupe_key stand for this one: 'live' (default: queued,
        waiting, running) or 'queued' (not started yet: a running job gives its key up and
        a new job is created). dedupe_window (a timedelta or interval text): a job with the
        key that succeeded within it stands too. dedupe_mode 'replace': a standing job not
        started yet takes this call's payload, priority, run_at, headers, max_attempts and
        concurrency_key (replaced=True). Raises InvalidArgument, PayloadTooLarge,
        WrongIsolation (a window in a REPEATABLE READ or SERIALIZABLE transaction).
        """
        call = q.enqueue_job(
            entrypoint,
            payload,
            priority=priority,
            run_at=run_at,
            dedupe_key=dedupe_key,
            headers=headers,
            max_attempts=max_attempts,
            depends_on=depends_on,
            concurrency_key=concurrency_key,
            dedupe_scope=dedupe_scope,
            dedupe_window=dedupe_window,
            dedupe_mode=dedupe_mode,
        )
        enqueued: Enqueued = await self._run(call, conn)
        return enqueued

    async def enqueue_batch(
        self,
        entrypoint: str,
        payloads: Iterable[Any],
        *,
        priority: int = 0,
        run_at: datetime | timedelta | None = None,
        concurrency_keys: Sequence[str | None] | None = None,
        dedupe_keys: Sequence[str | None] | None = None,
        dedupe_scope: str | None = None,
        dedupe_window: Interval = None,
        dedupe_mode: str | None = None,
        headers: dict[str, Any] | None = None,
        max_attempts: int | None = None,
        depends_on: Iterable[int] | None = None,
        batch: int | None = None,
        conn: Conn = None,
    ) -> list[int]:
        """Enqueue one job per payload in one statement (pgq.enqueue_batch); returns the ids
        in the order of payloads. At most 100000 payloads. dedupe_keys: one per payload (None:
        no key), with dedupe_scope, dedupe_window, dedupe_mode as in enqueue_job(); a payload
        whose key finds a standing job gets that job's id (jobs go in one by one then).
        headers, max_attempts, depends_on: as in enqueue(), for every job of the batch.
        batch: the id of a batch opened by pgq.batch in this transaction (pass conn=): the
        jobs become its members (see batch()). Raises InvalidArgument, PayloadTooLarge."""
        call = q.enqueue_batch(
            entrypoint,
            payloads,
            priority=priority,
            run_at=run_at,
            concurrency_keys=concurrency_keys,
            dedupe_keys=dedupe_keys,
            dedupe_scope=dedupe_scope,
            dedupe_window=dedupe_window,
            dedupe_mode=dedupe_mode,
            headers=headers,
            max_attempts=max_attempts,
            depends_on=depends_on,
            batch=batch,
        )
        ids: list[int] = await self._run(call, conn)
        return ids

    async def batch(
        self,
        entrypoint: str,
        payloads: Iterable[Any],
        *,
        on_finish: Callback = None,
        on_success: Callback = None,
        on_death: Callback = None,
        conn: Conn = None,
        **options: Any,
    ) -> Batch:
        """Enqueue one job per payload as a batch (pgq.batch + pgq.enqueue_batch(batch =>
        ...)); returns its id and the members' ids. Its callbacks are enqueued once each:
        on_death at the first death of a member, on_finish when every member has ended,
        on_success when every member has succeeded. A callback is an entrypoint, or a dict
        with entrypoint, payload (a dict; the batch's id and counts are added under
        "batch"), priority, headers, max_attempts. options: enqueue_batch's (priority,
        run_at, headers, max_attempts, depends_on, concurrency_keys; not dedupe_keys). With
        conn=, the batch commits (and closes) with your transaction. Raises InvalidArgument."""
        call = q.batch(
            entrypoint, payloads, on_finish=on_finish, on_success=on_success, on_death=on_death, **options
        )
        opened: Batch = await self._run(call, conn)
        return opened

    async def batch_results(self, batch: int, *, conn: Conn = None) -> list[BatchMember]:
        """The members of a batch, in id order, each with its status and (once it succeeded)
        its result (pgq.batch_results): what a callback's handler reads. Raises UnknownJob
        for an unknown batch, or one that is not the caller's to read."""
        members: list[BatchMember] = await self._run(q.batch_results(batch), conn)
        return members
