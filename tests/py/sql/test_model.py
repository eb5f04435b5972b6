"""Model-based test of the job lifecycle (DESIGN.md: Guarantees, Job lifecycle, SQL API).

Hypothesis drives random sequences of SQL API calls (enqueue, enqueue_batch, register and
unregister workers, claim, heartbeat, complete and fail by the holder and by non-holders,
release, reap, cancel, retry, pause, resume, configure, and a "work" round in which every
worker beats, claims and finishes jobs) and clock advances against a small Python model of
the contract. After every step the database must agree with the model: each live job's state,
holder, attempt, deliveries, run_at and cancel flag (pgq.jobs); pgq.job_status of every job
ever enqueued; the outcome log (one 'failed' row per failure, exactly one terminal row per
finished job); the counts and settings in pgq.queues; the workers' states and heartbeats.
Claims must match the model exactly: priority order among due jobs, pause, concurrency.
A complete or fail by a worker that does not hold the job, or that names an earlier delivery
of it, must change nothing at all. Heartbeats may name the jobs the worker runs: the others it
holds are released. Jobs of reaped workers count lost deliveries and go dead at the
entrypoint's max_deliveries; a lease shortened by configure applies from the next heartbeat.

Time. The SQL reads now() and this test does not change the SQL: "advance the clock by d"
shifts every stored timestamp back by d (as superuser), which is the same as moving now()
forward by d. The model counts in virtual time, V = now() + (total shift), in microseconds.
Every call runs in a transaction that first reads now() (the same now() the functions see),
so the model predicts each call for the exact instant the database sees: no lease, run_at or
timeout is ever ambiguous, whatever real time passes between the steps. The backoff's jitter
is read back after each failure and checked against its bounds.

Where the contract is silent the model follows the SQL: leases are enforced by the sweeps
(reap, and the sweep in every heartbeat and register_worker), so a worker past its lease
that no sweep has reaped yet still holds its jobs, may claim, and revives with a heartbeat.

Each worker has an autocommit connection of its own (three slots; registering again on a
slot abandons the slot's previous worker, as a crash would). Steps run one at a time.
Examples are cheap (about 50 ms), hence 300 of them: hypothesis enables a random subset of
the rules in each example, and fewer examples leave whole paths (timeouts, retries of dead
jobs, cancellation of running ones) untested.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from support.marks import BELOW_MARK

SEC = 1_000_000  # the model counts time in microseconds, as timestamptz does
HOUR = 3600 * SEC
DAY = 24 * HOUR
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
ENTRYPOINTS = ("a", "b")
SLOTS = 3
MAX_WORKERS = 8
# Below the default 7-day retention, so pgq.prune (run by heartbeats) never removes an
# outcome the model knows of.
MAX_SHIFT = 6 * DAY
DEFAULTS = {
    "max_attempts": 5,
    "backoff_base": SEC,
    "backoff_max": HOUR,
    "lease": 30 * SEC,
    "timeout": HOUR,
    "max_deliveries": 10,
}
LIVE = ("queued", "running", "dead")
MAX_SNOOZES = 100  # pgq._defaults(): past it, a snooze fails the job
BOGUS_ID = 10**9  # never a job
CALLBACKS = "batch_done"  # the entrypoint of the batches' callbacks: no worker serves it

# `make test` runs 120 examples (about 15 s); `make model` the long form (PGQ_MODEL_EXAMPLES).
SETTINGS = settings(
    max_examples=int(os.environ.get("PGQ_MODEL_EXAMPLES", "120")),
    stateful_step_count=30,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],  # no explain: minutes
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

ENTRYPOINT = st.sampled_from(ENTRYPOINTS)
PRIORITY = st.sampled_from([0, 0, 1, 2, -1])
KEY = st.sampled_from([None, "k1", "k1", "k2"])  # dedupe keys
CKEY = st.sampled_from([None, None, "t1", "t2", "t3"])  # concurrency keys
MAX_ATTEMPTS = st.sampled_from([None, 1, 1, 2, 3])
ENTRYPOINT_SETS = [("a", "b"), ("a", "b"), ("a",), ("b",)]
PICK = st.integers(0, 255)
# Seconds the clock moves on before a call (besides the advance_clock rule: hypothesis tests
# a random subset of the rules in each example, and time must pass in most of them).
ADVANCES = [1, 2, 5, 5, 10, 10, 31, 61, 130, 3700, 90_000]
WAIT = st.sampled_from([0, 0, 0, 0, *ADVANCES])
PICKS = st.lists(PICK, min_size=1, max_size=3)
CONFIGURE = {
    "ep": ENTRYPOINT,
    "max_attempts": st.sampled_from([None, 1, 2, 3]),
    "concurrency": st.sampled_from([None, 0, 1, 2]),
    "lease": st.sampled_from([None, 5, 30, 60]),
    "timeout": st.sampled_from([None, None, 1, 20, 3600]),
    "backoff": st.sampled_from([(None, None), (None, None), (10, None), (1, 60), (None, 5), (10, 5)]),
    "max_deliveries": st.sampled_from([None, None, 0, 1, 2]),
    "key_concurrency": st.sampled_from([None, None, 0, 1, 2]),
}


def micros(value: datetime | timedelta) -> int:
    if isinstance(value, datetime):
        value = value - EPOCH
    return value // timedelta(microseconds=1)


def seconds(n: float | None) -> timedelta | None:
    return None if n is None else timedelta(seconds=n)


@dataclass
class Job:
    id: int
    entrypoint: str
    priority: int
    run_at: int
    enqueued_at: int
    dedupe_key: str | None
    max_attempts: int | None
    # queued, running, dead (live, in the hot table) | succeeded, canceled, discarded (a dead
    # job that pgq.cancel removed: outcome 'dead')
    state: str = "queued"
    attempt: int = 0
    deliveries: int = 0
    holder: uuid.UUID | None = None
    started_at: int | None = None
    cancel_requested: bool = False
    lost: int = 0  # deliveries that ended with the worker lost (reaped): the poison-pill count
    # (outcome, attempt, deliveries, worker_id) rows of pgq.outcomes
    outcomes: list[tuple[str, int, int, uuid.UUID | None]] = field(default_factory=list)
    concurrency_key: str | None = None
    snoozes: int = 0
    # Durable steps recorded: name -> (result, the delivery that recorded it)
    steps: dict[str, tuple[Any, int]] = field(default_factory=dict)

    @property
    def live(self) -> bool:
        return self.state in LIVE

    @property
    def status(self) -> str:
        return "dead" if self.state == "discarded" else self.state

    def sort_key(self) -> tuple[int, int, int]:
        return (-self.priority, self.run_at, self.id)


@dataclass
class Batch:
    members: list[int]
    # The events whose callback the database must have enqueued by now: each at most once,
    # whatever happens to the members later (a retry of a dead member fires nothing again).
    fired: set[str] = field(default_factory=set)


@dataclass
class Worker:
    id: uuid.UUID
    slot: int
    entrypoints: tuple[str, ...]
    heartbeat_at: int
    state: str = "alive"  # alive, dead (reaped), stopped (unregistered), deleted (row removed)
    stopped_at: int | None = None
    lease: int | None = None  # the lease in force at its last heartbeat (it paces by it)


@dataclass
class Queue:
    row: bool = False  # pgq._queues has a row (configure or pause made it)
    paused: bool = False
    max_attempts: int | None = None
    backoff_base: int | None = None
    backoff_max: int | None = None
    lease: int | None = None
    timeout: int | None = None
    concurrency: int | None = None
    max_deliveries: int | None = None
    key_concurrency: int | None = None
    keyed: bool = False  # a job with a concurrency key was enqueued: claims rotate among keys
    key_cursor: str | None = None  # the key the last keyed claim ended on

    def get(self, name: str) -> int:
        value = getattr(self, name)
        return DEFAULTS[name] if value is None else value


class QueueModel(RuleBasedStateMachine):
    admin: psycopg.Connection
    slots: list[psycopg.Connection]

    def __init__(self) -> None:
        super().__init__()
        self.shift = 0  # total clock advance, microseconds
        self.jobs: dict[int, Job] = {}
        self.workers: list[Worker] = []
        self.queues = {ep: Queue() for ep in ENTRYPOINTS}
        self.read_back: list[tuple[int, int, int]] = []  # (job id, fail instant, backoff cap)
        self.batches: dict[int, Batch] = {}
        self.isolated: frozenset[str] = frozenset()  # entrypoints in a partition of their own

    # --- plumbing ---------------------------------------------------------------------------

    def call(
        self, conn: psycopg.Connection, query: str, params: Any = (), isolation: str | None = None
    ) -> tuple[int, list[tuple]]:
        """Run one API call in its own transaction (READ COMMITTED unless `isolation`);
        returns (virtual now, rows)."""
        with conn.transaction():
            if isolation:
                conn.execute(f"SET TRANSACTION ISOLATION LEVEL {isolation}")
            now = conn.execute("SELECT now()").fetchone()[0]
            rows = conn.execute(query, params).fetchall()
        return micros(now) + self.shift, rows

    def expect_error(self, sqlstate: str, conn: psycopg.Connection, query: str, params: Any) -> None:
        with pytest.raises(psycopg.Error) as err:
            self.call(conn, query, params)
        assert err.value.sqlstate == sqlstate, f"{query}: {err.value.sqlstate} {err.value}"

    def virtual(self, ts: datetime | None) -> int | None:
        return None if ts is None else micros(ts) + self.shift

    def snapshot(self) -> tuple[list, list, list]:
        return (
            self.admin.execute("SELECT row_to_json(j)::text FROM pgq._jobs AS j ORDER BY j.id").fetchall(),
            self.admin.execute(
                "SELECT row_to_json(o)::text FROM pgq._outcomes AS o ORDER BY o.job_id, o.finished_at"
            ).fetchall(),
            self.admin.execute("SELECT row_to_json(w)::text FROM pgq._workers AS w ORDER BY w.id").fetchall(),
        )

    def pick(self, items: list, n: int) -> Any:
        return items[n % len(items)]

    def choose_worker(self, n: int) -> Worker:
        """Mostly a live worker; one pick in four from all, the gone ones included."""
        alive = [w for w in self.workers if w.state == "alive"]
        return self.pick(alive if alive and n % 4 else self.workers, n // 4)

    def workers_in(self, slot: int) -> list[Worker]:
        return [w for w in self.workers if w.slot == slot]

    def job_ids(self) -> list[int]:
        return sorted(self.jobs)

    def in_state(self, *states: str) -> list[Job]:
        return [j for _, j in sorted(self.jobs.items()) if j.state in states]

    def held_by(self, worker_id: uuid.UUID) -> list[Job]:
        return [j for j in self.in_state("running") if j.holder == worker_id]

    def worker(self, worker_id: uuid.UUID) -> Worker:
        return next(w for w in self.workers if w.id == worker_id)

    def effective_max_attempts(self, job: Job) -> int:
        return (
            job.max_attempts
            if job.max_attempts is not None
            else self.queues[job.entrypoint].get("max_attempts")
        )

    def due(self, job: Job, now: int) -> bool:
        return job.state == "queued" and job.run_at <= now

    def resolve_read_back(self) -> None:
        """A failed job's run_at has jitter: read it back and check it against the backoff."""
        if not self.read_back:
            return
        ids = [i for i, _, _ in self.read_back]
        rows = dict(
            self.admin.execute("SELECT id, run_at FROM pgq.jobs WHERE id = ANY(%s)", (ids,)).fetchall()
        )
        for job_id, failed_at, cap in self.read_back:
            assert job_id in rows, f"job {job_id} should be queued for a retry, it is gone"
            delay = self.virtual(rows[job_id]) - failed_at
            # base * 2^(attempt-1), capped, times a random factor in [0.5, 1); 2 us of rounding
            assert cap // 2 - 2 <= delay <= cap + 2, (
                f"job {job_id}: retry delay {delay / SEC:.6f}s outside [{cap / 2 / SEC}s, {cap / SEC}s]"
            )
            self.jobs[job_id].run_at = failed_at + delay
        self.read_back = []

    # --- the model of the contract -----------------------------------------------------------

    def m_fail(self, job: Job, now: int, retry_in: int | None) -> str:
        """pgq._fail: retry with backoff while attempts remain, else dead; canceled if requested."""
        holder, queue = job.holder, self.queues[job.entrypoint]
        job.holder = job.started_at = None
        if job.cancel_requested:
            job.state = "canceled"
            job.outcomes.append(("canceled", job.attempt + 1, job.deliveries, holder))
            return "canceled"
        dead = job.attempt + 1 >= self.effective_max_attempts(job)
        job.outcomes.append(("failed", job.attempt + 1, job.deliveries, holder))
        if dead:
            job.state = "dead"
        else:
            job.state = "queued"
            if retry_in is not None:
                job.run_at = now + retry_in
            else:
                cap = min(queue.get("backoff_base") * 2 ** min(job.attempt, 60), queue.get("backoff_max"))
                self.read_back.append((job.id, now, cap))
        job.attempt += 1
        return job.state

    def m_release(
        self, worker_ids: set[uuid.UUID], keep: frozenset[int] = frozenset(), lost: bool = False
    ) -> int:
        """pgq._release: the jobs of these workers, but those in keep, go back to queued (or
        canceled, if requested). If the workers were lost, each job counts a lost delivery,
        and one that lost its worker max_deliveries times is dead (a poison pill)."""
        count = 0
        for job in self.in_state("running"):
            if job.holder in worker_ids and job.id not in keep:
                cap = self.queues[job.entrypoint].get("max_deliveries")
                if job.cancel_requested:
                    job.state = "canceled"
                    job.outcomes.append(("canceled", job.attempt + 1, job.deliveries, job.holder))
                elif lost and cap > 0 and job.lost + 1 >= cap:
                    # The poison pill's last run is a failed attempt, counted.
                    job.state = "dead"
                    job.outcomes.append(("failed", job.attempt + 1, job.deliveries, job.holder))
                    job.lost += 1
                    job.attempt += 1
                else:
                    job.state = "queued"
                    job.lost += lost
                job.holder = job.started_at = None
                count += 1
        return count

    def current_lease(self, worker: Worker) -> int:
        return min(self.queues[ep].get("lease") for ep in worker.entrypoints)

    def m_reap(self, now: int) -> int:
        for w in self.workers:
            # A shorter lease applies to a worker from its next heartbeat on.
            lease = max(w.lease or 0, self.current_lease(w))
            if w.state == "alive" and w.heartbeat_at < now - lease:
                w.state, w.stopped_at = "dead", now
        lost = {w.id for w in self.workers if w.state in ("dead", "deleted")}
        stopped = {w.id for w in self.workers if w.state == "stopped"}
        count = self.m_release(lost, lost=True) + self.m_release(stopped)
        for job in self.in_state("running"):
            queue = self.queues[job.entrypoint]
            if job.started_at < now - queue.get("timeout") - queue.get("lease"):
                self.m_fail(job, now, None)
                count += 1
        for w in self.workers:
            if w.state in ("dead", "stopped") and w.stopped_at < now - DAY and not self.held_by(w.id):
                w.state = "deleted"
        return count

    def m_enqueue(
        self,
        now: int,
        job_id: int,
        ep: str,
        priority: int,
        offset: int | None,
        key: str | None,
        max_att: int | None,
        ckey: str | None = None,
    ) -> None:
        assert job_id not in self.jobs, f"enqueue returned the id {job_id} of an existing job"
        run_at = now if offset is None else now + max(offset, 0)
        self.jobs[job_id] = Job(job_id, ep, priority, run_at, now, key, max_att, concurrency_key=ckey)
        if ckey is not None:
            self.queues[ep].keyed = self.queues[ep].row = True

    def keyed_candidates(self, ep: str, allowed: int, now: int) -> list[Job]:
        """The claim of an entrypoint with keyed jobs (pgq._claim_keyed): within a priority,
        each key's oldest due jobs take turns, keys in order from the cursor; a key gets at
        most key_concurrency minus its running jobs; jobs without a key come from the head
        of the plain order as the key ''."""
        queue = self.queues[ep]
        queued = [j for j in self.jobs.values() if j.entrypoint == ep and j.state == "queued"]
        groups = sorted(
            {(j.priority, j.concurrency_key) for j in queued if j.concurrency_key is not None},
            key=lambda g: (-g[0], g[1]),
        )

        def room(key: str) -> int:
            if queue.key_concurrency is None:
                return allowed
            running = sum(
                1
                for j in self.jobs.values()
                if j.entrypoint == ep and j.state == "running" and j.concurrency_key == key
            )
            return min(allowed, max(queue.key_concurrency - running, 0))

        pool: list[tuple[Job, str, int]] = []
        for priority, key in groups:
            mine = sorted(
                (
                    j
                    for j in queued
                    if self.due(j, now) and (j.priority, j.concurrency_key) == (priority, key)
                ),
                key=lambda j: (j.run_at, j.id),
            )
            pool += [(j, key, room(key)) for j in mine[: room(key)]]
        head = sorted((j for j in queued if self.due(j, now)), key=Job.sort_key)[:allowed]
        pool += [(j, "", allowed) for j in head if j.concurrency_key is None]
        ranked = []
        for job, key, limit in pool:
            turn = sum(
                1
                for o, k, _ in pool
                if (o.priority, k) == (job.priority, key) and (o.run_at, o.id) <= (job.run_at, job.id)
            )
            nth = sum(1 for o, k, _ in pool if k == key and o.sort_key() <= job.sort_key())
            if nth <= limit:
                after = queue.key_cursor is not None and key <= queue.key_cursor
                ranked.append(((-job.priority, turn, after, key, job.run_at, job.id), job, key))
        ranked.sort(key=lambda r: r[0])
        taken = ranked[:allowed]
        if taken:
            queue.key_cursor = taken[-1][2]
        return [job for _, job, _ in taken]

    # --- rules -------------------------------------------------------------------------------

    @initialize(
        workers=st.lists(st.sampled_from(ENTRYPOINT_SETS), min_size=2, max_size=SLOTS),
        jobs=st.lists(st.tuples(ENTRYPOINT, PRIORITY, KEY, MAX_ATTEMPTS), min_size=1, max_size=5),
        configs=st.lists(st.fixed_dictionaries(CONFIGURE), max_size=2),
        batch=st.sampled_from([None, ("a", 1, None), ("a", 2, 1), ("b", 3, 1), ("b", 2, None)]),
    )
    def start(
        self,
        workers: list[tuple[str, ...]],
        jobs: list[tuple[str, int, str | None, int | None]],
        configs: list[dict[str, Any]],
        batch: tuple[str, int, int | None] | None,
    ) -> None:
        """An empty queue, then settings, 2-3 workers, maybe a batch (first in line: claimed,
        so ended, within the example's steps) and a few jobs."""
        # DELETE rather than TRUNCATE: the same empty tables in 1 ms instead of 70 (hypothesis
        # runs thousands of examples while it shrinks a failure).
        with self.admin.transaction():
            # The batches first: deleting their members would count them canceled at commit
            # and enqueue the callbacks into the emptied job table.
            for table in (
                "_batch_members",
                "_batches",
                "_jobs",
                "_outcomes",
                "_workers",
                "_queues",
                "_marks",
                "_mark_lows",
                "_steps",
            ):
                self.admin.execute(f"DELETE FROM pgq.{table}")
            self.admin.execute("SELECT setval(pg_get_serial_sequence('pgq._jobs', 'id'), 1, false)")
            # The partitions an earlier example's `move` left (empty now).
            self.admin.execute("SELECT pgq.unisolate(e) FROM unnest(%s::text[]) AS e", (list(ENTRYPOINTS),))
        # The backoff's jitter is random(): seed every session, so that hypothesis replays an
        # example exactly (run_at decides which jobs are due, and so the rest of the example).
        for conn in (self.admin, *self.slots):
            conn.execute("SELECT setseed(0.5)")
        for config in configs:
            self.configure(**config)
        for slot, entrypoints in enumerate(workers):
            self.register_worker(slot, entrypoints)
        if batch is not None:
            self.enqueue_batch(batch[0], batch[1], 1, None, True, max_attempts=batch[2])
        for ep, priority, key, max_attempts in jobs:
            self.enqueue(ep, priority, None, key, max_attempts)

    @rule(
        ep=ENTRYPOINT,
        priority=PRIORITY,
        offset=st.sampled_from([None, -10, 0, 5, 40, 600]),
        key=KEY,
        max_attempts=MAX_ATTEMPTS,
        ckey=CKEY,
        repeatable_read=st.booleans(),
    )
    def enqueue(
        self,
        ep: str,
        priority: int,
        offset: int | None,
        key: str | None,
        max_attempts: int | None,
        ckey: str | None = None,
        repeatable_read: bool = False,
    ) -> None:
        """A producer in REPEATABLE READ cannot trust its snapshot to show the claim mark: it
        records a low instead of lowering the mark (pgq._lower_mark); nothing else differs."""
        now, rows = self.call(
            self.admin,
            "SELECT pgq.enqueue(%s, '{}'::jsonb, priority => %s, run_at => now() + %s::interval,"
            " dedupe_key => %s, max_attempts => %s, concurrency_key => %s)",
            (ep, priority, seconds(offset), key, max_attempts, ckey),
            "REPEATABLE READ" if repeatable_read else None,
        )
        job_id = rows[0][0]
        # A live job (not dead) with the same dedupe_key is not duplicated: its id comes back.
        same = [
            j for j in self.in_state("queued", "running") if key and (j.entrypoint, j.dedupe_key) == (ep, key)
        ]
        if same:
            assert job_id == same[0].id, f"dedupe: expected the live job {same[0].id}, got {job_id}"
            return
        self.m_enqueue(
            now, job_id, ep, priority, None if offset is None else offset * SEC, key, max_attempts, ckey
        )

    @rule(
        ep=ENTRYPOINT,
        n=st.integers(0, 3),
        priority=st.sampled_from([0, 1]),
        offset=st.sampled_from([None, 0, 5]),
        in_batch=st.booleans(),
    )
    def enqueue_batch(
        self,
        ep: str,
        n: int,
        priority: int,
        offset: int | None,
        in_batch: bool,
        max_attempts: int | None = None,
    ) -> None:
        # In a batch (pgq.batch): its callbacks go to CALLBACKS, which no worker serves;
        # batches_match_model checks their counts and that each callback came exactly once.
        query = (
            "SELECT * FROM pgq.enqueue_batch(%s, %s::jsonb[], %s, now() + %s::interval, max_attempts => %s"
        )
        params: tuple[Any, ...] = (
            ep,
            [f'{{"n": {k}}}' for k in range(n)],
            priority,
            seconds(offset),
            max_attempts,
        )
        with self.admin.transaction():
            now = micros(self.admin.execute("SELECT now()").fetchone()[0]) + self.shift
            batch = None
            if in_batch:
                callback = f'{{"entrypoint": "{CALLBACKS}"}}'
                batch = self.admin.execute(
                    "SELECT pgq.batch(on_finish => %s, on_success => %s, on_death => %s)", (callback,) * 3
                ).fetchone()[0]
                query, params = query + ", batch => %s", (*params, batch)
            rows = self.admin.execute(query + ")", params).fetchall()
        ids = [r[0] for r in rows]
        assert len(ids) == n and ids == sorted(ids), ids
        for job_id in ids:
            self.m_enqueue(
                now, job_id, ep, priority, None if offset is None else offset * SEC, None, max_attempts
            )
        if batch is not None:
            self.batches[batch] = Batch(ids)

    @precondition(lambda self: len(self.workers) < MAX_WORKERS)
    @rule(slot=st.integers(0, SLOTS - 1), entrypoints=st.sampled_from(ENTRYPOINT_SETS))
    def register_worker(self, slot: int, entrypoints: tuple[str, ...]) -> None:
        """On a slot whose worker is alive, the old worker is abandoned: a crash."""
        now, rows = self.call(
            self.slots[slot], "SELECT pgq.register_worker(%s, %s::text[])", (f"slot{slot}", list(entrypoints))
        )
        self.workers.append(Worker(rows[0][0], slot, entrypoints, now))
        self.m_reap(now)  # register_worker sweeps
        self.resolve_read_back()

    @rule(w=PICK)
    def unregister_worker(self, w: int) -> None:
        worker = self.choose_worker(w)
        query, params = "SELECT pgq.unregister_worker(%s)", (worker.id,)
        if worker.state == "deleted":
            self.expect_error("PQ002", self.slots[worker.slot], query, params)
            return
        now, rows = self.call(self.slots[worker.slot], query, params)
        if worker.state == "alive":
            worker.state, worker.stopped_at = "stopped", now
        assert rows[0][0] == self.m_release({worker.id})

    @rule(w=PICK, subset=st.integers(0, 7), others=st.lists(PICK, max_size=2))
    def release(self, w: int, subset: int, others: list[int]) -> None:
        """A worker gives back the jobs it holds but does not know of (pgq.release): all but
        `keep`, a subset of its jobs plus ids it does not hold."""
        worker = self.choose_worker(w)
        held = self.held_by(worker.id)
        keep = [job.id for k, job in enumerate(held) if subset >> k & 1]
        keep += [self.pick([*self.job_ids(), BOGUS_ID], o) for o in others]
        query, params = "SELECT pgq.release(%s, %s::bigint[])", (worker.id, keep)
        if worker.state != "alive":
            self.expect_error(
                "PQ002" if worker.state == "deleted" else "PQ003", self.slots[worker.slot], query, params
            )
            return
        _, rows = self.call(self.slots[worker.slot], query, params)
        assert rows[0][0] == self.m_release({worker.id}, frozenset(keep)), f"release(keep={keep})"

    @rule(w=PICK, subset=st.sampled_from([3, 3, 1, 2]), batch=st.integers(1, 3), wait=WAIT)
    def claim(self, w: int, subset: int, batch: int, wait: int) -> None:
        self.advance_clock(wait)
        worker = self.choose_worker(w)
        eps = [ep for k, ep in enumerate(worker.entrypoints) if subset >> k & 1] or list(worker.entrypoints)
        self.do_claim(worker, eps, batch)

    def do_claim(self, worker: Worker, eps: list[str], batch: int) -> None:
        query, params = (
            "SELECT id, entrypoint, priority, attempt, deliveries, max_attempts, run_at FROM "
            "pgq.claim(%s, %s::text[], %s)",
            (worker.id, eps, batch),
        )
        if worker.state != "alive":
            self.expect_error(
                "PQ002" if worker.state == "deleted" else "PQ003", self.slots[worker.slot], query, params
            )
            return
        now, rows = self.call(self.slots[worker.slot], query, params)

        candidates: list[Job] = []
        for ep in eps:
            queue = self.queues[ep]
            if queue.paused:
                continue
            allowed = batch
            if queue.concurrency is not None:
                running = sum(1 for j in self.jobs.values() if j.entrypoint == ep and j.state == "running")
                allowed = min(allowed, max(queue.concurrency - running, 0))
            if queue.keyed:
                if allowed > 0:
                    candidates += self.keyed_candidates(ep, allowed, now)
                continue
            due = sorted(
                (j for j in self.jobs.values() if j.entrypoint == ep and self.due(j, now)), key=Job.sort_key
            )
            candidates += due[:allowed]
        expected = sorted(candidates, key=Job.sort_key)[:batch]

        got = [r[0] for r in rows]
        assert got == [j.id for j in expected], (
            f"claim({eps}, {batch}) took {got}, expected {[j.id for j in expected]}"
        )
        # Independently of the model: claim order, and priority order within each entrypoint.
        keys = [(-r[2], self.virtual(r[6]), r[0]) for r in rows]
        assert keys == sorted(keys), f"claimed out of order: {rows}"
        for job in expected:
            job.state, job.holder, job.started_at = "running", worker.id, now
            job.deliveries += 1
        for row, job in zip(rows, expected, strict=True):
            assert row[1:6] == (
                job.entrypoint,
                job.priority,
                job.attempt,
                job.deliveries,
                self.effective_max_attempts(job),
            )
        for ep in {j.entrypoint for j in expected}:
            left = [j for j in self.jobs.values() if j.entrypoint == ep and self.due(j, now)]
            taken = [j for j in expected if j.entrypoint == ep]
            key_limit = self.queues[ep].key_concurrency
            for key in {j.concurrency_key for j in taken} - {None}:
                running = sum(
                    1
                    for j in self.jobs.values()
                    if j.entrypoint == ep and j.state == "running" and j.concurrency_key == key
                )
                assert key_limit is None or running <= key_limit, f"{ep}/{key}: {running} over {key_limit}"
            if self.queues[ep].keyed:
                continue  # rotation, not the plain order: the model's claim above decides
            assert not left or min(left, key=Job.sort_key).sort_key() > max(j.sort_key() for j in taken), (
                f"claim skipped a higher-ranked due job of {ep}"
            )
            limit = self.queues[ep].concurrency
            running = sum(1 for j in self.jobs.values() if j.entrypoint == ep and j.state == "running")
            assert limit is None or running <= limit, f"{ep}: {running} running over the limit {limit}"

    @rule(w=PICK, wait=WAIT)
    def heartbeat(self, w: int, wait: int) -> None:
        self.advance_clock(wait)
        self.beat(self.choose_worker(w))

    @rule(
        wait=st.sampled_from([0, 5, 10, 31]),
        batch=st.integers(0, 2),
        fates=st.lists(st.sampled_from(["complete", "fail", "fail", "retry_in", "keep"]), max_size=4),
    )
    def work(self, wait: int, batch: int, fates: list[str]) -> None:
        """A round of the worker loop on every slot: time passes; the slot's worker beats (its
        sweep reaps the others' lapsed leases and timeouts), or registers again if it was
        reaped or stopped, and claims up to `batch` jobs; then the holders of the first running
        jobs complete them, fail them, or keep them running."""
        self.advance_clock(wait)
        for slot in range(SLOTS):
            mine = self.workers_in(slot)
            entrypoints = mine[-1].entrypoints if mine else ENTRYPOINTS
            if mine and mine[-1].state == "alive":
                self.beat(mine[-1])
            else:
                self.register_worker(slot, entrypoints)
            if batch:
                self.do_claim(self.workers_in(slot)[-1], list(entrypoints), batch)
        for job, fate in zip(self.in_state("running"), fates, strict=False):
            if fate == "complete":
                self.do_complete(job.holder, [job.id], [])
            elif fate in ("fail", "retry_in"):
                self.do_fail(job, 0 if fate == "retry_in" else None)

    def beat(self, worker: Worker, running: list[int] | None = None) -> None:
        """A heartbeat; with `running`, the worker says which jobs it runs, and the jobs it
        holds but does not run are released (a claim whose reply was lost, a failover)."""
        query, params = "SELECT * FROM pgq.heartbeat(%s, %s::bigint[])", (worker.id, running)
        if worker.state != "alive":
            self.expect_error(
                "PQ002" if worker.state == "deleted" else "PQ003", self.slots[worker.slot], query, params
            )
            return
        now, rows = self.call(self.slots[worker.slot], query, params)
        worker.heartbeat_at, worker.lease = now, self.current_lease(worker)
        if running is not None:
            self.m_release({worker.id}, frozenset(running))
        self.m_reap(now)  # heartbeat sweeps
        self.resolve_read_back()
        expected = {j.id for j in self.held_by(worker.id) if j.cancel_requested}
        assert {r[0] for r in rows} == expected, "heartbeat: the jobs to cancel"

    @rule(w=PICK, subset=st.integers(0, 7), others=st.lists(PICK, max_size=2), wait=WAIT)
    def heartbeat_reconcile(self, w: int, subset: int, others: list[int], wait: int) -> None:
        """The worker runs only a subset of what it holds (plus ids it does not hold)."""
        self.advance_clock(wait)
        worker = self.choose_worker(w)
        running = [job.id for k, job in enumerate(self.held_by(worker.id)) if subset >> k & 1]
        running += [self.pick([*self.job_ids(), BOGUS_ID], o) for o in others]
        self.beat(worker, running)

    @precondition(lambda self: self.in_state("running"))
    @rule(j=PICK, subset=st.integers(0, 7), stale=st.integers(0, 7))
    def complete_by_delivery(self, j: int, subset: int, stale: int) -> None:
        """The holder completes some of its jobs naming their deliveries; those it names with
        an earlier delivery (a late call of a previous run) are left alone."""
        holder = self.pick(self.in_state("running"), j).holder
        held = self.held_by(holder)
        chosen = [job for k, job in enumerate(held) if subset >> k & 1] or [held[0]]
        deliveries = [job.deliveries - (stale >> k & 1) for k, job in enumerate(chosen)]
        _, rows = self.call(
            self.slots[self.worker(holder).slot],
            "SELECT * FROM pgq.complete(%s, %s::bigint[], deliveries => %s::int[])",
            ([holder, [job.id for job in chosen], deliveries]),
        )
        current = [job for job, d in zip(chosen, deliveries, strict=True) if d == job.deliveries]
        assert sorted(r[0] for r in rows) == sorted(job.id for job in current), "complete by delivery"
        for job in current:
            job.state = "succeeded"
            job.outcomes.append(("succeeded", job.attempt + 1, job.deliveries, holder))
            job.holder = job.started_at = None

    @precondition(lambda self: self.in_state("running"))
    @rule(j=PICK, stale=st.booleans(), retry_in=st.sampled_from([None, 0, 10]))
    def fail_by_delivery(self, j: int, stale: bool, retry_in: int | None) -> None:
        """fail naming the delivery: an earlier delivery's late call returns NULL, changes nothing."""
        job = self.pick(self.in_state("running"), j)
        delivery = job.deliveries - 1 if stale else job.deliveries
        before = self.snapshot()
        now, rows = self.call(
            self.slots[self.worker(job.holder).slot],
            "SELECT pgq.fail(%s, %s, 'boom', %s::interval, delivery => %s)",
            (job.holder, job.id, seconds(retry_in), delivery),
        )
        if stale:
            assert rows[0][0] is None, f"fail({job.id}) of a stale delivery returned {rows[0][0]}"
            assert self.snapshot() == before, "fail of a stale delivery changed the database"
            return
        expected = self.m_fail(job, now, None if retry_in is None else retry_in * SEC)
        assert rows[0][0] == expected, f"fail({job.id}) returned {rows[0][0]}, expected {expected}"
        self.resolve_read_back()

    @precondition(lambda self: self.in_state("running"))
    @rule(j=PICK, stale=st.booleans(), delay=st.sampled_from([0, 10, 120]))
    def snooze_by_delivery(self, j: int, stale: bool, delay: int) -> None:
        """snooze: queued again after the delay with no attempt spent and a 'snoozed' row in
        the outcome log; a cancel requested cancels instead; a stale delivery changes nothing."""
        job = self.pick(self.in_state("running"), j)
        delivery = job.deliveries - 1 if stale else job.deliveries
        before = self.snapshot()
        now, rows = self.call(
            self.slots[self.worker(job.holder).slot],
            "SELECT pgq.snooze(%s, %s, %s::interval, delivery => %s)",
            (job.holder, job.id, seconds(delay), delivery),
        )
        if stale:
            assert rows[0][0] is None, f"snooze({job.id}) of a stale delivery returned {rows[0][0]}"
            assert self.snapshot() == before, "snooze of a stale delivery changed the database"
            return
        if job.cancel_requested or job.snoozes >= MAX_SNOOZES:
            expected = self.m_fail(job, now, None)
        else:
            job.outcomes.append(("snoozed", job.attempt + 1, job.deliveries, job.holder))
            job.state, job.run_at, job.holder, job.started_at = "queued", now + delay * SEC, None, None
            job.snoozes += 1
            expected = "snoozed"
        assert rows[0][0] == expected, f"snooze({job.id}) returned {rows[0][0]}, expected {expected}"
        self.resolve_read_back()

    @precondition(lambda self: self.in_state("running"))
    @rule(
        j=PICK,
        stale=st.sampled_from(["no", "no", "delivery", "worker"]),
        name=st.sampled_from(["charge", "ship"]),
        value=st.integers(0, 3),
    )
    def step(self, j: int, stale: str, name: str, value: int) -> None:
        """A durable step: read it (pgq.step_result), then record it (pgq.record_step). The
        delivery holding the job reads what any earlier delivery recorded, and the first
        record of a name stands; another delivery of it, or another worker, reads and
        records nothing. Steps outlive failures, re-deliveries, retries and the job's end
        (the invariant compares them)."""
        job = self.pick(self.in_state("running"), j)
        worker_id, delivery = job.holder, job.deliveries
        others = [w.id for w in self.workers if w.id != job.holder]
        if stale == "delivery":
            delivery = job.deliveries - 1 or job.deliveries + 1
        elif stale == "worker" and others:
            worker_id = others[0]
        else:
            stale = "no"
        _, rows = self.call(
            self.slots[self.worker(job.holder).slot],
            "SELECT pgq.step_result(%s, %s, %s, %s), pgq.record_step(%s, %s, %s, %s, %s::jsonb)",
            (worker_id, job.id, delivery, name, worker_id, job.id, delivery, name, str(value)),
        )
        read, recorded = rows[0]
        if stale != "no":
            assert (read, recorded) == (None, None), f"a stale step of job {job.id}: {read}, {recorded}"
            return
        want = {"done": True, "result": job.steps[name][0]} if name in job.steps else {"done": False}
        assert read == want, f"step_result({job.id}, {name}) = {read}, model {want}"
        assert recorded == (name not in job.steps), f"record_step({job.id}, {name}) = {recorded}"
        job.steps.setdefault(name, (value, delivery))

    @precondition(lambda self: self.in_state("running"))
    @rule(j=PICK, subset=st.integers(0, 7), others=st.lists(PICK, max_size=2))
    def complete_held(self, j: int, subset: int, others: list[int]) -> None:
        """The holder completes some of its jobs, mixed with ids it does not hold."""
        holder = self.pick(self.in_state("running"), j).holder
        held = self.held_by(holder)
        mine = [job.id for k, job in enumerate(held) if subset >> k & 1] or [held[0].id]
        not_mine = [i for i in self.job_ids() if i not in {job.id for job in held}] + [BOGUS_ID]
        self.do_complete(holder, mine, [self.pick(not_mine, o) for o in others])

    def do_complete(self, holder: uuid.UUID, mine: list[int], others: list[int]) -> None:
        ids = mine + others
        _, rows = self.call(
            self.slots[self.worker(holder).slot],
            "SELECT * FROM pgq.complete(%s, %s::bigint[])",
            (holder, ids),
        )
        assert sorted(r[0] for r in rows) == sorted(mine), f"complete({ids}) by the holder of {mine}"
        for job_id in mine:
            job = self.jobs[job_id]
            job.state = "succeeded"
            job.outcomes.append(("succeeded", job.attempt + 1, job.deliveries, holder))
            job.holder = job.started_at = None

    def not_held_by(self, worker: Worker, elsewhere: bool) -> list[int]:
        """Ids the worker does not hold: only those another worker holds, if `elsewhere` and
        there are any (the case fencing is for), else any job or an unknown id."""
        others = [j.id for j in self.in_state("running") if j.holder != worker.id]
        return (elsewhere and others) or [
            *(i for i in self.job_ids() if self.jobs[i].holder != worker.id),
            BOGUS_ID,
        ]

    @rule(w=PICK, picks=PICKS, elsewhere=st.booleans())
    def complete_not_held(self, w: int, picks: list[int], elsewhere: bool) -> None:
        """Completion by a worker that does not hold the jobs changes nothing."""
        worker = self.choose_worker(w)
        ids = [self.pick(self.not_held_by(worker, elsewhere), p) for p in picks]
        before = self.snapshot()
        _, rows = self.call(
            self.slots[worker.slot], "SELECT * FROM pgq.complete(%s, %s::bigint[])", (worker.id, ids)
        )
        assert rows == [], f"complete({ids}) by a non-holder completed {rows}"
        assert self.snapshot() == before, "complete by a non-holder changed the database"

    @precondition(lambda self: self.in_state("running"))
    @rule(j=PICK, retry_in=st.sampled_from([None, None, 0, 10, 120]))
    def fail_held(self, j: int, retry_in: int | None) -> None:
        self.do_fail(self.pick(self.in_state("running"), j), retry_in)

    def do_fail(self, job: Job, retry_in: int | None) -> None:
        now, rows = self.call(
            self.slots[self.worker(job.holder).slot],
            "SELECT pgq.fail(%s, %s, 'boom', %s::interval)",
            (job.holder, job.id, seconds(retry_in)),
        )
        expected = self.m_fail(job, now, None if retry_in is None else retry_in * SEC)
        assert rows[0][0] == expected, f"fail({job.id}) returned {rows[0][0]}, expected {expected}"
        self.resolve_read_back()

    @rule(w=PICK, p=PICK, elsewhere=st.booleans(), retry_in=st.sampled_from([None, 10]))
    def fail_not_held(self, w: int, p: int, elsewhere: bool, retry_in: int | None) -> None:
        """fail by a worker that does not hold the job returns NULL and changes nothing."""
        worker = self.choose_worker(w)
        job_id = self.pick(self.not_held_by(worker, elsewhere), p)
        before = self.snapshot()
        _, rows = self.call(
            self.slots[worker.slot],
            "SELECT pgq.fail(%s, %s, 'late', %s::interval)",
            (worker.id, job_id, seconds(retry_in)),
        )
        assert rows[0][0] is None, f"fail({job_id}) by a non-holder returned {rows[0][0]}"
        assert self.snapshot() == before, "fail by a non-holder changed the database"

    @rule(wait=WAIT)
    def reap(self, wait: int) -> None:
        self.advance_clock(wait)
        now, rows = self.call(self.admin, "SELECT pgq.reap()")
        expected = self.m_reap(now)
        self.resolve_read_back()
        assert rows[0][0] == expected, f"reap() acted on {rows[0][0]} jobs, expected {expected}"

    @precondition(lambda self: self.jobs)
    @rule(picks=PICKS, running=st.booleans(), bogus=st.booleans())
    def cancel(self, picks: list[int], running: bool, bogus: bool) -> None:
        """Some jobs (running ones only, if `running` and there are any), maybe an unknown id."""
        pool = [j.id for j in self.in_state("running")] if running else []
        ids = [self.pick(pool or self.job_ids(), p) for p in picks] + ([BOGUS_ID] if bogus else [])
        _, rows = self.call(self.admin, "SELECT pgq.cancel(%s::bigint[])", (ids,))
        count = 0
        for job_id in dict.fromkeys(ids):
            job = self.jobs.get(job_id)
            if job is None:
                continue
            if job.state == "queued":
                job.state = "canceled"
                job.outcomes.append(("canceled", job.attempt, job.deliveries, None))
            elif job.state == "dead":
                job.state = "discarded"
                job.outcomes.append(("dead", job.attempt, job.deliveries, None))
            elif job.state == "running" and not job.cancel_requested:
                job.cancel_requested = True
            else:
                continue
            count += 1
        assert rows[0][0] == count, f"cancel({ids}) returned {rows[0][0]}, expected {count}"

    @precondition(lambda self: self.in_state("dead"))
    @rule(picks=st.one_of(st.none(), PICKS), other=st.sampled_from([None, 0, 1]))
    def retry(self, picks: list[int] | None, other: int | None) -> None:
        """Some dead jobs (None: all of them), maybe with another id."""
        dead = self.in_state("dead")
        ids = [j.id for j in dead] if picks is None else [self.pick(dead, p).id for p in picks]
        if other is not None:
            ids.append(self.pick(self.job_ids(), other))
        now, rows = self.call(self.admin, "SELECT pgq.retry(%s::bigint[])", (ids,))
        newest: dict[tuple[str, str | None, int | None], Job] = {}
        for job in (self.jobs[i] for i in set(ids)):
            if job.state == "dead":
                group = (job.entrypoint, job.dedupe_key, None if job.dedupe_key else job.id)
                if group not in newest or newest[group].id < job.id:
                    newest[group] = job
        count = 0
        for job in newest.values():
            taken = any(
                o.entrypoint == job.entrypoint
                and o.dedupe_key == job.dedupe_key
                and o.state in ("queued", "running")
                for o in self.jobs.values()
                if job.dedupe_key is not None
            )
            if not taken:
                job.state, job.attempt, job.lost, job.snoozes, job.run_at = "queued", 0, 0, 0, now
                count += 1
        assert rows[0][0] == count, f"retry({ids}) returned {rows[0][0]}, expected {count}"

    @precondition(lambda self: not any(q.paused for q in self.queues.values()))
    @rule(ep=ENTRYPOINT)
    def pause(self, ep: str) -> None:
        """One entrypoint at most is paused (or the model would spend most of its time idle)."""
        self.call(self.admin, "SELECT pgq.pause(%s)", (ep,))
        self.queues[ep].row = self.queues[ep].paused = True

    @rule(ep=ENTRYPOINT)
    def resume(self, ep: str) -> None:
        self.call(self.admin, "SELECT pgq.resume(%s)", (ep,))
        self.queues[ep].paused = False

    @rule(w=PICK, ep=ENTRYPOINT, own=st.booleans())
    def claim_then_move(self, w: int, ep: str, own: bool) -> None:
        """A claim, then a move of the entrypoint's jobs, held ones included: the rules
        after it settle, reap and claim them in their new partition."""
        worker = self.choose_worker(w)
        self.do_claim(worker, list(worker.entrypoints), 2)
        self.move(ep, own)

    @rule(ep=ENTRYPOINT, own=st.booleans())
    def move(self, ep: str, own: bool) -> None:
        """pgq.isolate / pgq.unisolate move an entrypoint's live jobs between partitions:
        no delivery and no end, so the model changes in nothing (nor batches, nor claims)."""
        _, rows = self.call(self.admin, f"SELECT pgq.{'isolate' if own else 'unisolate'}(%s)", (ep,))
        moves = own != (ep in self.isolated)
        live = sum(1 for j in self.jobs.values() if j.entrypoint == ep and j.live) if moves else 0
        assert rows[0][0] == live, f"moved {rows[0][0]} of {ep}'s jobs, expected {live}"
        self.isolated = self.isolated | {ep} if own else self.isolated - {ep}

    @rule(**CONFIGURE)
    def configure(
        self,
        ep: str,
        max_attempts: int | None,
        concurrency: int | None,
        lease: int | None,
        timeout: int | None,
        backoff: tuple[int | None, int | None],
        max_deliveries: int | None,
        key_concurrency: int | None = None,
    ) -> None:
        queue = self.queues[ep]
        base, cap = (None if b is None else b * SEC for b in backoff)
        query = (
            "SELECT pgq.configure(%s, max_attempts => %s, concurrency => %s, lease => %s::interval,"
            " timeout => %s::interval, backoff_base => %s::interval, backoff_max => %s::interval,"
            " max_deliveries => %s, key_concurrency => %s)"
        )
        params = (
            ep,
            max_attempts,
            concurrency,
            seconds(lease),
            seconds(timeout),
            *map(seconds, backoff),
            max_deliveries,
            key_concurrency,
        )
        if (cap if cap is not None else queue.get("backoff_max")) < (
            base if base is not None else queue.get("backoff_base")
        ):
            self.expect_error("PQ001", self.admin, query, params)  # and nothing changes
            return
        self.call(self.admin, query, params)
        queue.row = True
        for name, value in (("max_attempts", max_attempts), ("backoff_base", base), ("backoff_max", cap)):
            if value is not None:
                setattr(queue, name, value)
        if lease is not None:
            queue.lease = lease * SEC
        if timeout is not None:
            queue.timeout = timeout * SEC
        if concurrency is not None:
            queue.concurrency = concurrency or None
        if max_deliveries is not None:
            queue.max_deliveries = max_deliveries
        if key_concurrency is not None:
            queue.key_concurrency = key_concurrency or None

    @rule(ep=ENTRYPOINT)
    def raise_mark(self, ep: str) -> None:
        """The claim's low-water mark moves up to the first queued job (claims move it every
        0.2 s of real time; this makes it happen between any two steps). It may not change
        what a claim returns: the invariant below checks that no queued job is left below
        the mark and its lows."""
        _, rows = self.call(self.admin, "SELECT pgq._raise_mark(%s)", (ep,))
        assert rows[0][0] is True

    @rule(d=st.sampled_from(ADVANCES))
    def advance_clock(self, d: int) -> None:
        """Move now() forward by d seconds: every stored timestamp moves back by d."""
        if d == 0 or self.shift + d * SEC > MAX_SHIFT:
            return
        delta = timedelta(seconds=d)
        with self.admin.transaction():
            for statement in (
                "UPDATE pgq._jobs SET run_at = run_at - %(d)s, enqueued_at = enqueued_at - %(d)s,"
                " started_at = started_at - %(d)s",
                "UPDATE pgq._workers SET registered_at = registered_at - %(d)s,"
                " heartbeat_at = heartbeat_at - %(d)s, stopped_at = stopped_at - %(d)s",
                "UPDATE pgq._queues SET updated_at = updated_at - %(d)s,"
                " rate_refilled_at = rate_refilled_at - %(d)s",
                "UPDATE pgq._outcomes SET enqueued_at = enqueued_at - %(d)s, started_at = started_at - %(d)s,"
                " finished_at = finished_at - %(d)s",
                "UPDATE pgq._maintenance SET last_run = last_run - %(d)s",
            ):
                self.admin.execute(statement, {"d": delta})
        self.shift += d * SEC

    # --- invariants --------------------------------------------------------------------------

    @invariant()
    def database_matches_model(self) -> None:
        assert not self.read_back
        known = self.job_ids()
        with self.admin.transaction():
            now = self.virtual(self.admin.execute("SELECT now()").fetchone()[0])
            jobs = self.admin.execute(
                "SELECT id, entrypoint, status, priority, run_at, enqueued_at, attempt, deliveries,"
                " max_attempts, worker_id, started_at, cancel_requested, dedupe_key FROM pgq.jobs"
                " WHERE entrypoint <> %s ORDER BY id",
                (CALLBACKS,),
            ).fetchall()
            statuses = dict(
                self.admin.execute(
                    "SELECT i, pgq.job_status(i) FROM unnest(%s::bigint[]) AS i", ([*known, BOGUS_ID],)
                ).fetchall()
            )
            outcomes = self.admin.execute(
                "SELECT job_id, outcome, attempt, deliveries, worker_id FROM pgq.outcomes"
            ).fetchall()
            queues = self.admin.execute(
                "SELECT entrypoint, queued, scheduled, waiting, running, dead, paused, concurrency,"
                " max_attempts, lease, timeout, backoff_base, backoff_max, max_deliveries FROM pgq.queues"
                " WHERE entrypoint <> %s",
                (CALLBACKS,),
            ).fetchall()
            workers = self.admin.execute(
                "SELECT id, state, heartbeat_at, stopped_at, jobs_held FROM pgq.workers"
            ).fetchall()
            # The claim mark's invariant (pgq._raise_mark): no queued job sorts before its
            # entrypoint's mark and all of its lows, or claims would pass it over.
            below_mark = self.admin.execute(BELOW_MARK).fetchone()[0]
            steps = self.admin.execute("SELECT job_id, name, result, delivery FROM pgq._steps").fetchall()
        assert below_mark is None, f"queued jobs below the claim mark: {below_mark}"

        # Live jobs: one row each, in the model's state, held by the model's holder.
        got = {
            r[0]: (*r[1:4], self.virtual(r[4]), self.virtual(r[5]), *r[6:10], self.virtual(r[10]), *r[11:])
            for r in jobs
        }
        want = {
            j.id: (
                j.entrypoint,
                j.state,
                j.priority,
                j.run_at,
                j.enqueued_at,
                # pgq.jobs counts from 1: the run under way or next, a dead job's last one.
                j.attempt + (0 if j.state == "dead" else 1),
                j.deliveries,
                self.effective_max_attempts(j),
                j.holder,
                j.started_at,
                j.cancel_requested,
                j.dedupe_key,
            )
            for j in self.jobs.values()
            if j.live
        }
        assert got == want, _diff("pgq.jobs", got, want)

        # job_status: exactly one state per job, the model's; NULL for an unknown id.
        want_status = {i: self.jobs[i].status for i in known} | {BOGUS_ID: None}
        assert statuses == want_status, _diff("job_status", statuses, want_status)

        # The outcome log: one 'failed' row per failure, one 'snoozed' per snooze; exactly one
        # terminal row per finished job.
        logged: dict[int, Counter] = {}
        for job_id, *row in outcomes:
            logged.setdefault(job_id, Counter())[tuple(row)] += 1
        for job_id, rows in logged.items():
            terminal = sum(n for row, n in rows.items() if row[0] not in ("failed", "snoozed"))
            assert terminal == (0 if job_id in got else 1), (
                f"job {job_id}: {terminal} terminal outcomes: {rows}"
            )
        want_log = {j.id: Counter(j.outcomes) for j in self.jobs.values() if j.outcomes}
        assert logged == want_log, _diff("pgq.outcomes", logged, want_log)

        # pgq.queues: counts at the view's now(), pause state and effective settings.
        got_q = {r[0]: r[1:] for r in queues}
        want_q = {}
        for ep, q in self.queues.items():
            mine = [j for j in self.jobs.values() if j.entrypoint == ep and j.live]
            if mine or q.row:
                want_q[ep] = (
                    sum(1 for j in mine if self.due(j, now)),
                    sum(1 for j in mine if j.state == "queued" and j.run_at > now),
                    0,
                    sum(1 for j in mine if j.state == "running"),
                    sum(1 for j in mine if j.state == "dead"),
                    q.paused,
                    q.concurrency,
                    q.get("max_attempts"),
                    *(
                        timedelta(microseconds=q.get(n))
                        for n in ("lease", "timeout", "backoff_base", "backoff_max")
                    ),
                    q.get("max_deliveries"),
                )
        assert got_q == want_q, _diff("pgq.queues", got_q, want_q)

        # Durable steps: every step the model recorded, kept whatever happened to the job since.
        got_s = {(r[0], r[1]): (r[2], r[3]) for r in steps}
        want_s = {(j.id, name): s for j in self.jobs.values() for name, s in j.steps.items()}
        assert got_s == want_s, _diff("pgq._steps", got_s, want_s)

        # Workers: state, last heartbeat, jobs held; rows of long-gone workers are deleted.
        got_w = {r[0]: (r[1], self.virtual(r[2]), self.virtual(r[3]), r[4]) for r in workers}
        want_w = {
            w.id: (w.state, w.heartbeat_at, w.stopped_at, len(self.held_by(w.id)))
            for w in self.workers
            if w.state != "deleted"
        }
        assert got_w == want_w, _diff("pgq.workers", got_w, want_w)

    @invariant()
    def batches_match_model(self) -> None:
        if not self.batches:
            return
        with self.admin.transaction():
            counts = self.admin.execute(
                "SELECT id, total, succeeded, dead, canceled FROM pgq._batches WHERE id = ANY(%s)",
                (list(self.batches),),
            ).fetchall()
            callbacks = self.admin.execute(
                "SELECT (payload->'batch'->>'id')::bigint, payload->'batch'->>'event', count(*)"
                " FROM pgq._jobs WHERE entrypoint = %s GROUP BY 1, 2",
                (CALLBACKS,),
            ).fetchall()
        want, want_fired = {}, {}
        for batch_id, batch in self.batches.items():
            states = [self.jobs[i].state for i in batch.members]
            succeeded = states.count("succeeded")
            dead = states.count("dead") + states.count("discarded")
            canceled = states.count("canceled")
            if dead:
                batch.fired.add("death")
            if succeeded + dead + canceled == len(states):
                batch.fired.add("finish")
            if succeeded == len(states):
                batch.fired.add("success")
            want[batch_id] = (len(states), succeeded, dead, canceled)
            want_fired |= {(batch_id, event): 1 for event in batch.fired}
        got = {r[0]: r[1:] for r in counts}
        assert got == want, _diff("pgq._batches", got, want)
        fired = {(r[0], r[1]): r[2] for r in callbacks}
        assert fired == want_fired, _diff("batch callbacks", fired, want_fired)


def _diff(what: str, got: dict, want: dict) -> str:
    lines = [f"{what} differs from the model:"]
    for key in sorted(set(got) | set(want), key=str):
        if got.get(key, "-") != want.get(key, "-"):
            lines.append(f"  {key}: database {got.get(key, '(none)')}, model {want.get(key, '(none)')}")
    return "\n".join(lines)


@pytest.mark.timeout(900)  # when it fails, shrinking takes minutes (hypothesis stops it at 5)
def test_queue_behaves_like_the_model(dsn: str) -> None:
    with ExitStack() as stack:
        admin, *slots = (stack.enter_context(psycopg.connect(dsn, autocommit=True)) for _ in range(1 + SLOTS))
        for conn in (admin, *slots):
            # Intervals of days are calendar days in the session's time zone: no DST here.
            conn.execute("SET TimeZone = 'UTC'")
        machine = type("QueueModelOnDb", (QueueModel,), {"admin": admin, "slots": slots})
        run_state_machine_as_test(machine, settings=SETTINGS)
