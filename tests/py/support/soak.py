"""Chaos soak: a steady workload under random faults, then an audit of every job.

Producers enqueue at a steady rate in three ways (pgq.enqueue from plain SQL, a row trigger
with pgq.enqueue_trigger, pgq.enqueue_batch), each in a transaction that also records the
job's unique key in a table of the same database, so the set of committed enqueues is
known exactly afterwards. Three or more `pgq worker` processes (handlers in soak_app.py)
consume and write every run to ledger files outside the queue. The entrypoints differ:
soak_sql has a 1-second timeout that about 1 job in 25 overruns on its first delivery
(then retried after a short backoff), soak_trigger is a transactional handler that writes
an effect row in the transaction completing its job, soak_batch is limited to 8 running
jobs across all workers. A canceller calls pgq.cancel on about 1% of the committed jobs
while they are queued or running, changes about as many others while they are queued
(an UPDATE of their headers, under the workers' claims), and pauses and resumes
soak_batch every second or so (its limit must hold through claims racing a resume). At
random moments a fault is injected: SIGKILL of a worker (a new one is started),
pg_terminate_backend of the workers' connections, a PostgreSQL restart with `-m fast`, one
with `-m immediate`, and a read-only window (the database set to
default_transaction_read_only and the clients' connections cut, for 1.5 s).

A producer retries an enqueue that failed before its COMMIT was sent (it was rolled back,
a read-only error included); one whose COMMIT itself failed has an unknown outcome,
settled afterwards by its key. At the end (producers stopped, queue drained, workers
stopped with SIGTERM) soak_audit.py checks every job: see its docstring.

This lives in tests/py, not in the package: it restarts the cluster through scripts/db.sh,
a development script that is not shipped, and it reuses the test helpers.
Usage: `make soak MINUTES=10 [SOAK_ARGS='--kinds ...']`, or with tests/py on the path:
`PYTHONPATH=tests/py python -m support.soak --dsn URL --minutes 10`; the short form runs in
tests/py/faults/test_soak.py.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from support.cluster import db_sh, restart_problem, wait_for_server
from support.marks import BELOW_MARK
from support.soak_audit import (
    ENTRYPOINTS,
    KNOWN_BUGS,
    LIMIT,
    LIMITED,
    TIMED,
    TRANSACTIONAL,
    Audit,
    Run,
    SoakReport,
    log_time,
    read_ledger,
)

__all__ = ["DBA_SETTINGS", "KINDS", "KNOWN_BUGS", "SoakConfig", "SoakReport", "run_soak"]

# tests/py, the directory that holds the package `support` (a worker's PYTHONPATH).
TESTS_PY = Path(__file__).resolve().parents[1]
KINDS = ("kill", "terminate", "restart-fast", "restart-immediate", "read-only")
WEIGHTS = {"kill": 3, "terminate": 3, "restart-fast": 2, "restart-immediate": 2, "read-only": 2}
# Faults only on request (--kinds), too long for the short form: "outage" stops the server
# (-m fast) for OUTAGE_HOLD seconds, many leases, then starts it (the producers here give a
# key up after 60 s of failures).
LONG_KINDS = ("outage",)
WEIGHTS["outage"] = 1
OUTAGE_HOLD = 45.0
PRODUCERS = ("sql", "trigger", "batch")
READ_ONLY = "25006"  # read_only_sql_transaction
READ_ONLY_HOLD = 1.5  # seconds the database stays read-only
STUCK = (
    "SELECT j.id, j.payload->>'key', j.status, j.deliveries, w.name, w.state,"
    " extract(epoch FROM j.started_at)::float8, extract(epoch FROM j.enqueued_at)::float8"
    " FROM pgq.jobs AS j LEFT JOIN pgq.workers AS w ON w.id = j.worker_id"
    " WHERE j.entrypoint = ANY(%s) ORDER BY j.id"
)
WORKER_APP = "pgq-soak-worker"
PRODUCER_APP = "pgq-soak-producer"
CANCELLER_APP = "pgq-soak-canceller"


@dataclass
class SoakConfig:
    seconds: float = 34.0  # how long producers run; faults stop `quiet` seconds before the end
    workers: int = 3
    lease: float = 2.0
    rate: float = 40.0  # jobs per second per producer (sql, trigger, batch)
    batch: int = 10
    fault_gap: tuple[float, float] = (3.0, 5.0)
    kinds: tuple[str, ...] = KINDS  # the faults to inject, each at least once
    seed: int | None = None
    drain_timeout: float = 60.0
    concurrency: int = 16
    cancel_fraction: float = 0.01  # of committed jobs, asked to be canceled
    # Settings a DBA puts on the roles (ALTER ROLE ... SET name = value): when given, the
    # workers and producers log in as roles of their own (members of pgq_worker and
    # pgq_producer, named role_prefix_worker and role_prefix_producer), which have them.
    role_settings: dict[str, str] | None = None
    role_prefix: str = "pgq_soak"

    @property
    def quiet(self) -> float:
        # Long enough for a worker killed by the last fault to be reaped by the others.
        return max(3 * self.lease + 1, 5.0)


@dataclass
class Fault:
    kind: str
    t0: float  # wall clock when the fault began
    t1: float  # ... and when it was over (the server back up, the new worker started)
    detail: str = ""
    victim: int | None = None
    recovery: float | None = None


# --- worker processes ---------------------------------------------------------------------


class SoakWorker:
    """One `python -m pgq worker support.soak_app:worker` process; its output goes to a file."""

    def __init__(self, dsn: str, ledger: Path, concurrency: int, n: int) -> None:
        self.log_path = ledger / f"worker-{n}.out"
        env = {
            **os.environ,
            "PYTHONPATH": str(TESTS_PY),
            "LEDGER_DIR": str(ledger),
            "PYTHONUNBUFFERED": "1",
            "PGAPPNAME": WORKER_APP,
            "SOAK_CONCURRENCY": str(concurrency),
        }
        with open(self.log_path, "w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pgq", "worker", "support.soak_app:worker", "--dsn", dsn],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.killed = False  # by the soak, on purpose
        self.reported = False  # exited on its own, and reported

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self) -> None:
        self.killed = True
        self.proc.kill()
        self.proc.wait(timeout=10)

    def tail(self, n: int = 15) -> str:
        return "\n".join(self.log_path.read_text().splitlines()[-n:])


# --- producers ----------------------------------------------------------------------------


class Producer(threading.Thread):
    """Enqueues `rate` jobs per second of one kind until stopped.

    Each enqueue is one transaction that also inserts the job's key into soak_produced
    (soak_orders for the trigger, whose rows are the payloads). A connection error before
    COMMIT means it rolled back: retry the same keys; so does a read-only error (25006: the
    database is read-only for a while, as during a failover). An error during COMMIT leaves
    the outcome unknown: the keys go to `unknown`, settled from the tables afterwards.
    """

    def __init__(self, kind: str, dsn: str, rate: float, batch: int, stop: threading.Event) -> None:
        super().__init__(name=f"producer-{kind}", daemon=True)
        self.kind = kind
        self.dsn = dsn
        self.per_op = batch if kind == "batch" else 1
        self.interval = self.per_op / rate
        self.stop = stop
        self.committed: list[str] = []
        self.unknown: list[str] = []
        self.abandoned: list[str] = []
        self.errors: list[str] = []
        self.retries = 0
        self.read_only = 0
        self._conn: psycopg.Connection | None = None
        self._seq = 0

    def run(self) -> None:
        next_at = time.monotonic()
        while not self.stop.is_set():
            wait = next_at - time.monotonic()
            if wait > 0 and self.stop.wait(wait):
                break
            keys = [f"{self.kind}-{self._seq + i}" for i in range(self.per_op)]
            self._seq += self.per_op
            self._produce(keys)
            # A steady rate: after an outage, go on from now instead of bursting to catch up.
            next_at = max(next_at + self.interval, time.monotonic() - self.interval)
        self._drop()

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None

    def _enqueue(self, conn: psycopg.Connection, keys: list[str]) -> None:
        if self.kind == "sql":
            conn.execute("INSERT INTO soak_produced (key, kind) VALUES (%s, 'sql')", (keys[0],))
            conn.execute("SELECT pgq.enqueue('soak_sql', jsonb_build_object('key', %s::text))", (keys[0],))
        elif self.kind == "trigger":
            conn.execute("INSERT INTO soak_orders (key) VALUES (%s)", (keys[0],))
        else:
            conn.execute("INSERT INTO soak_produced (key, kind) SELECT unnest(%s::text[]), 'batch'", (keys,))
            conn.execute(
                "SELECT count(*) FROM pgq.enqueue_batch('soak_batch',"
                " ARRAY(SELECT jsonb_build_object('key', k) FROM unnest(%s::text[]) AS k))",
                (keys,),
            )

    def _produce(self, keys: list[str]) -> None:
        deadline = time.monotonic() + 60
        delay = 0.05
        while True:
            try:
                if self._conn is None:
                    self._conn = psycopg.connect(self.dsn, connect_timeout=3, application_name=PRODUCER_APP)
                self._enqueue(self._conn, keys)
            except psycopg.Error as exc:
                # Not committed: COMMIT was never sent. Retry the same keys.
                if exc.sqlstate == READ_ONLY:
                    self.read_only += 1
                elif not isinstance(exc, psycopg.OperationalError):
                    self.errors.append(f"{type(exc).__name__}: {str(exc).strip()}")
                self._drop()
                self.retries += 1
                if time.monotonic() > deadline:
                    self.abandoned += keys
                    return
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            try:
                self._conn.commit()
            except psycopg.OperationalError:
                self.unknown += keys  # the COMMIT may or may not have happened
                self._drop()
                return
            except psycopg.Error as exc:
                # The server answered the COMMIT with an error: rolled back. Retry.
                self.errors.append(f"commit: {type(exc).__name__}: {str(exc).strip()}")
                self._drop()
                continue
            self.committed += keys
            return


class Canceller(threading.Thread):
    """Asks pgq.cancel for about `fraction` of the committed jobs, soon after their commit
    (while they are queued or running): each sampled key is looked up in pgq.jobs, and
    what is found is recorded in `asked` (key -> job id) before pgq.cancel is called, so a
    cancel whose reply was lost still counts as asked. About as many other jobs are touched
    while queued (a new row version, headers changed, still due), as an operator's UPDATE
    would: claims meet rows changed after their snapshot (pgq.claim updates the rows it
    locked by ctid and leaves such a row for the next claim); `touched` counts them. Twice
    a second it also checks that no queued job is below its entrypoint's claim mark
    (pgq._raise_mark). And it pauses the limited entrypoint every second or so and resumes
    it 50-200 ms later, as an operator might: a claim racing a resume must keep the limit
    (`flips` counts the resumes). Every second or two it moves the transactional
    entrypoint's jobs into a partition of their own or back (pgq.isolate, pgq.unisolate),
    queued, held and dead alike, under the workers' claims and completions (`moves` counts
    the moves that committed; one that gave up waiting for its lock is no error)."""

    def __init__(
        self, dsn: str, producers: list[Producer], fraction: float, rng: random.Random, stop: threading.Event
    ) -> None:
        super().__init__(name="canceller", daemon=True)
        self.dsn = dsn
        self.producers = producers
        self.fraction = fraction
        self.rng = rng
        self.stop = stop
        self.asked: dict[str, int] = {}
        self.calls = 0
        self.missed = 0  # sampled, but no longer in pgq.jobs
        self.touched = 0
        self.flips = 0
        self.moves = 0
        self.move_windows: list[tuple[float, float]] = []  # (start, end) of each move call, unix time
        self.errors: list[str] = []
        self._seen = [0] * len(producers)

    def run(self) -> None:
        conn: psycopg.Connection | None = None
        next_mark_check = 0.0
        paused, next_flip = False, time.monotonic() + self.rng.uniform(0.3, 1.0)
        isolated, next_move = False, time.monotonic() + self.rng.uniform(0.8, 2.0)
        while not self.stop.wait(0.05):
            keys, touch = [], []
            for i, producer in enumerate(self.producers):
                fresh = producer.committed[self._seen[i] :]
                self._seen[i] += len(fresh)
                for k in fresh:
                    draw = self.rng.random()
                    if draw < self.fraction:
                        keys.append(k)
                    elif draw < 2 * self.fraction:
                        touch.append(k)
            check_marks = time.monotonic() >= next_mark_check
            flip = time.monotonic() >= next_flip
            move = time.monotonic() >= next_move
            if not keys and not touch and not check_marks and not flip and not move:
                continue
            try:
                if conn is None:
                    conn = psycopg.connect(
                        self.dsn, autocommit=True, connect_timeout=3, application_name=CANCELLER_APP
                    )
                if check_marks:
                    # The claim mark's invariant holds in every snapshot: a queued job below
                    # a mark in force would be passed over by every claim.
                    next_mark_check = time.monotonic() + 0.5
                    below = conn.execute(BELOW_MARK).fetchone()[0]
                    if below:
                        self.errors.append(f"queued jobs below the claim mark: {below}")
                if flip:
                    conn.execute(f"SELECT pgq.{'resume' if paused else 'pause'}(%s)", (LIMITED,))
                    self.flips += paused
                    paused = not paused
                    next_flip = time.monotonic() + self.rng.uniform(*((0.05, 0.2) if paused else (0.3, 1.0)))
                if move:
                    next_move = time.monotonic() + self.rng.uniform(0.8, 2.0)
                    t0 = time.time()
                    try:
                        call = "unisolate" if isolated else "isolate"
                        conn.execute(f"SELECT pgq.{call}(%s)", (TRANSACTIONAL,))
                        isolated = not isolated
                        self.moves += 1
                    except psycopg.errors.LockNotAvailable:
                        pass  # its tries for the lock ran out under load: the next one moves
                    finally:
                        self.move_windows.append((t0, time.time()))
                if touch:
                    self.touched += conn.execute(
                        "UPDATE pgq._jobs SET headers = coalesce(headers, '{}') || '{\"soak_touched\": true}'"
                        " WHERE entrypoint = ANY(%s) AND payload->>'key' = ANY(%s) AND status = 'queued'",
                        (ENTRYPOINTS, touch),
                    ).rowcount
                if not keys:
                    continue
                found = conn.execute(
                    "SELECT payload->>'key', id FROM pgq.jobs WHERE entrypoint = ANY(%s)"
                    " AND payload->>'key' = ANY(%s) AND status IN ('queued', 'running')",
                    (ENTRYPOINTS, keys),
                ).fetchall()
                self.missed += len(keys) - len(found)
                if found:
                    self.asked.update(found)
                    self.calls += 1
                    conn.execute("SELECT pgq.cancel(%s::bigint[])", ([job_id for _, job_id in found],))
            except psycopg.Error as exc:
                if exc.sqlstate != READ_ONLY and not isinstance(exc, psycopg.OperationalError):
                    self.errors.append(f"{type(exc).__name__}: {str(exc).strip()}")
                if conn is not None:
                    with contextlib.suppress(psycopg.Error):
                        conn.close()
                conn = None
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                conn.close()
        self._resume()

    def _resume(self) -> None:
        """Leave the limited entrypoint resumed (a pause may have committed whatever its
        reply said), through the faults of the last seconds."""
        deadline = time.monotonic() + 60
        while True:
            try:
                with psycopg.connect(
                    self.dsn, autocommit=True, connect_timeout=3, application_name=CANCELLER_APP
                ) as conn:
                    conn.execute("SELECT pgq.resume(%s)", (LIMITED,))
                    return
            except psycopg.Error as exc:
                if time.monotonic() > deadline:
                    self.errors.append(f"could not resume {LIMITED}: {exc}")
                    return
                time.sleep(0.2)


# --- the run ------------------------------------------------------------------------------

SETUP = """
CREATE TABLE soak_produced (key text PRIMARY KEY, kind text NOT NULL);
CREATE TABLE soak_orders (key text PRIMARY KEY, placed_at timestamptz NOT NULL DEFAULT now());
-- The effects of the transactional handler: no unique key, so that a double shows.
CREATE TABLE soak_effects (key text NOT NULL, job_id bigint NOT NULL, deliveries integer NOT NULL);
CREATE TRIGGER soak_orders_enqueue AFTER INSERT ON soak_orders
    FOR EACH ROW EXECUTE FUNCTION pgq.enqueue_trigger('soak_trigger');
"""
SET_READ_ONLY = (
    "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET default_transaction_read_only = on',"
    " current_database()); END $$"
)
RESET_READ_ONLY = (
    "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I RESET default_transaction_read_only',"
    " current_database()); END $$"
)


def _query(
    dsn: str, query: str, params: tuple[Any, ...] | None = None, timeout: float = 60
) -> list[tuple[Any, ...]]:
    """Run one statement in autocommit, retrying on connection errors for up to timeout s.
    The soak's own session is never read-only (it must end a read-only window)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(
                dsn, autocommit=True, connect_timeout=3, options="-c default_transaction_read_only=off"
            ) as conn:
                cur = conn.execute(query, params)
                return cur.fetchall() if cur.description else []
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def plan_faults(cfg: SoakConfig, rng: random.Random) -> list[tuple[float, str]]:
    """(seconds after the start, kind): every kind once in random order, then random kinds,
    at random gaps, none in the first 3 s or the quiet end."""
    first, last = 3.0, cfg.seconds - cfg.quiet
    pending = list(cfg.kinds)
    rng.shuffle(pending)
    plan: list[tuple[float, str]] = []
    t = first
    while True:
        t += rng.uniform(*cfg.fault_gap)
        if t > last:
            break
        # A long fault must end before the quiet end; the next fault comes after it.
        kinds = [k for k in cfg.kinds if k not in LONG_KINDS or t + OUTAGE_HOLD <= last]
        if pending:
            kind = pending.pop(0)
        elif kinds:
            kind = rng.choices(kinds, weights=[WEIGHTS[k] for k in kinds])[0]
        else:
            break
        plan.append((t, kind))
        if kind in LONG_KINDS:
            t += OUTAGE_HOLD
    if pending:
        raise ValueError(f"{cfg.seconds} s is too short to inject every kind of fault")
    return plan


class Soak:
    def __init__(self, dsn: str, ledger: Path, cfg: SoakConfig, say: Callable[[str], None] = print) -> None:
        self.dsn = dsn
        self.ledger = ledger
        self.cfg = cfg
        self.say = say
        self.seed = cfg.seed if cfg.seed is not None else random.randrange(1 << 30)
        self.rng = random.Random(self.seed)
        self.workers: list[SoakWorker] = []
        self.faults: list[Fault] = []
        self.exits: list[str] = []  # workers that exited without being killed
        self.stop_codes: list[int | None] = []
        self.undrained: list[tuple[Any, ...]] = []
        self.kinds = KINDS + tuple(kind for kind in cfg.kinds if kind not in KINDS)
        self._n = 0
        # Where the workers and producers log in (their own roles with role_settings).
        self.worker_dsn = dsn
        self.producer_dsn = dsn

    # workers

    def _spawn(self) -> SoakWorker:
        self._n += 1
        worker = SoakWorker(self.worker_dsn, self.ledger, self.cfg.concurrency, self._n)
        self.workers.append(worker)
        return worker

    def _live(self) -> list[SoakWorker]:
        return [w for w in self.workers if w.proc.poll() is None]

    def _supervise(self) -> None:
        for worker in list(self.workers):
            if worker.killed or worker.reported or worker.proc.poll() is None:
                continue
            worker.reported = True
            self.exits.append(
                f"worker pid {worker.pid} exited with {worker.proc.returncode}:\n{worker.tail()}"
            )
            self.say(f"  ! worker {worker.pid} exited unexpectedly ({worker.proc.returncode}); replacing it")
            self._spawn()

    # faults

    def _inject(self, kind: str, t_start: float) -> Fault:
        t0 = time.time()
        detail, victim = "", None
        if kind == "kill":
            target = self.rng.choice(self._live())
            victim = target.pid
            target.kill()
            self._spawn()
            detail = f"SIGKILL worker {victim}"
        elif kind == "terminate":
            detail = f"pg_terminate_backend x{self._terminate(WORKER_APP)}"
        elif kind == "read-only":
            _query(self.dsn, SET_READ_ONLY)
            try:
                n = self._terminate(WORKER_APP, PRODUCER_APP)
                time.sleep(READ_ONLY_HOLD)
            finally:
                _query(self.dsn, RESET_READ_ONLY)
            m = self._terminate(WORKER_APP, PRODUCER_APP)
            detail = f"read-only for {READ_ONLY_HOLD:g} s, pg_terminate_backend x{n} then x{m}"
        elif kind == "outage":
            db_sh("stop")
            time.sleep(OUTAGE_HOLD)
            db_sh("start")
            detail = f"pg_ctl stop -m fast, {OUTAGE_HOLD:g} s, start"
        else:
            db_sh("restart" if kind == "restart-fast" else "crash")
            detail = "pg_ctl stop -m " + ("fast" if kind == "restart-fast" else "immediate") + ", start"
        fault = Fault(kind, t0, time.time(), detail, victim)
        self.say(f"  {t0 - t_start:6.1f} s  {kind:<17} {detail} ({fault.t1 - t0:.2f} s)")
        return fault

    def _terminate(self, *apps: str) -> int:
        """pg_terminate_backend of the connections of these applications: how many."""
        return _query(
            self.dsn,
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = ANY(%s) AND datname = current_database()",
            (list(apps),),
        )[0][0]

    def query(self, query: str, params: tuple[Any, ...] | None = None) -> list[tuple[Any, ...]]:
        return _query(self.dsn, query, params)

    def run(self) -> SoakReport:
        cfg = self.cfg
        _query(self.dsn, SETUP)
        for ep in ENTRYPOINTS:
            _query(self.dsn, "SELECT pgq.configure(%s, lease => make_interval(secs => %s))", (ep, cfg.lease))
        # A timeout that slow jobs overrun, retried soon; failures at faults retried soon too.
        for ep in (TIMED, TRANSACTIONAL):
            _query(
                self.dsn,
                "SELECT pgq.configure(%s, max_attempts => 10, backoff_base => '0.2 seconds'"
                + (", timeout => '1 second'" if ep == TIMED else "")
                + ")",
                (ep,),
            )
        _query(self.dsn, "SELECT pgq.configure(%s, concurrency => %s)", (LIMITED, LIMIT))
        if cfg.role_settings is not None:
            self._roles(cfg.role_settings)
        plan = plan_faults(cfg, self.rng)
        self.say(
            f"soak: {cfg.seconds:.0f} s, {cfg.workers} workers, {len(PRODUCERS)}x{cfg.rate:.0f} jobs/s,"
            f" lease {cfg.lease:g} s, {len(plan)} faults planned, seed {self.seed}, ledger {self.ledger}"
        )
        try:
            return self._run(plan)
        finally:
            with contextlib.suppress(psycopg.Error):
                _query(self.dsn, RESET_READ_ONLY)
            for worker in self.workers:
                if worker.proc.poll() is None:
                    worker.proc.kill()
                    worker.proc.wait(timeout=10)

    def _roles(self, settings: dict[str, str]) -> None:
        """The workers' and producers' own login roles, with the DBA's settings on them and
        the grants the soak's tables need. Roles are cluster-wide: one a run left behind
        is reused, its settings replaced."""
        grants = {
            "worker": ("pgq_worker", "GRANT INSERT ON soak_effects TO {}"),
            "producer": ("pgq_producer", "GRANT INSERT ON soak_produced, soak_orders TO {}"),
        }
        for kind, (group, grant) in grants.items():
            name = f"{self.cfg.role_prefix}_{kind}"
            role = sql.Identifier(name)
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone():
                    conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(role))
                conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(group), role))
                conn.execute(sql.SQL(grant).format(role))
                conn.execute(sql.SQL("ALTER ROLE {} RESET ALL").format(role))
                for setting, value in settings.items():
                    statement = sql.SQL("ALTER ROLE {} SET {} = {}")
                    conn.execute(statement.format(role, sql.Identifier(setting), sql.Literal(value)))
            if kind == "worker":
                self.worker_dsn = make_conninfo(self.dsn, user=name)
            else:
                self.producer_dsn = make_conninfo(self.dsn, user=name)
        self.say(f"soak: workers and producers log in as roles with {settings}")

    def _run(self, plan: list[tuple[float, str]]) -> SoakReport:

        cfg = self.cfg
        for _ in range(cfg.workers):
            self._spawn()
        deadline = time.monotonic() + 30
        while len(_query(self.dsn, "SELECT 1 FROM pgq.workers WHERE state = 'alive'")) < cfg.workers:
            if time.monotonic() > deadline:
                raise RuntimeError("workers did not register within 30 s")
            time.sleep(0.1)

        stop = threading.Event()
        producers = [Producer(kind, self.producer_dsn, cfg.rate, cfg.batch, stop) for kind in PRODUCERS]
        t_start, m_start = time.time(), time.monotonic()
        canceller = Canceller(self.dsn, producers, cfg.cancel_fraction, random.Random(self.seed + 1), stop)
        for producer in producers:
            producer.start()
        canceller.start()
        pending = list(plan)
        while time.monotonic() - m_start < cfg.seconds:
            self._supervise()
            if pending and time.monotonic() - m_start >= pending[0][0]:
                self.faults.append(self._inject(pending.pop(0)[1], t_start))
            time.sleep(0.05)
        stop.set()
        for producer in producers:
            producer.join(timeout=90)
        canceller.join(timeout=90)
        self.say(f"  operator: {LIMITED} paused and resumed {canceller.flips} times")
        self.say(f"  operator: {TRANSACTIONAL} moved between partitions {canceller.moves} times")
        t_stop = time.time()

        # Drain: every job finished, then a graceful stop.
        drained = False
        deadline = time.monotonic() + cfg.drain_timeout
        while time.monotonic() < deadline:
            self._supervise()
            # Kept as evidence when the drain fails: SIGTERM changes it (releases held jobs).
            self.undrained = _query(self.dsn, STUCK, (ENTRYPOINTS,))
            if not self.undrained:
                drained = True
                break
            runs = read_ledger(self.ledger)
            if all(self._orphaned_claim(row, runs) for row in self.undrained):
                break  # waiting longer changes nothing
            time.sleep(0.2)
        t_drained = time.time()
        for worker in self._live():
            worker.proc.send_signal(signal.SIGTERM)
        for worker in self.workers:
            if worker.killed or worker.reported:
                continue
            try:
                self.stop_codes.append(worker.proc.wait(timeout=30))
            except subprocess.TimeoutExpired:
                self.stop_codes.append(None)
                worker.proc.kill()
        return Audit(self, producers, canceller, t_start, t_stop, t_drained, drained).run()

    # the audit

    def _orphaned_claim(self, row: tuple[Any, ...], runs: list[Run]) -> str | None:
        """The log line that shows a job left over from a claim whose reply was lost (its
        holder is alive, has held it for 5 s, never ran it, and its claim failed with a
        lost connection at the moment of that claim), None when the job does not fit."""
        job_id, _, status, _, holder, state, started, _ = row
        if status != "running" or state != "alive" or time.time() - started < 5:
            return None
        pid = int(holder.rsplit(":", 1)[-1])
        worker = next((w for w in self.workers if w.pid == pid), None)
        if worker is None or any(r.job_id == job_id and r.pid == pid for r in runs):
            return None
        for line in worker.log_path.read_text().splitlines():
            if "claim failed" in line and abs(log_time(line) - started) < 2:
                return line
        return None

    def _reregister_race(self, run: Run) -> str | None:
        """Evidence that the completion of this run was fenced by the re-registration race:
        its worker registered twice within half a second just before, then logged the job as
        no longer held. None when the run does not fit."""
        worker = next((w for w in self.workers if w.pid == run.pid), None)
        if worker is None:
            return None
        lines = worker.log_path.read_text().splitlines()
        registered = [log_time(line) for line in lines if " registered as " in line]
        double = [b for a, b in itertools.pairwise(registered) if b - a < 0.5 and run.t - 5 < b < run.t + 1]
        fenced = [
            line
            for line in lines
            if "were no longer held by this" in line
            and str(run.job_id) in line.split("[", 1)[-1].split("]", 1)[0].split(", ")
            and run.t <= log_time(line) + 0.01
        ]
        if not double or not fenced:
            return None
        when = datetime.fromtimestamp(double[0])
        return f"{run.pid} registered twice at {when:%H:%M:%S.%f}; its log: {fenced[0]!r}"

    def _describe_stuck(self, row: tuple[Any, ...], runs: list[Run], t_start: float) -> str:
        job_id, key, status, deliveries, holder, state, started, enqueued = row
        text = (
            f"job {job_id} ({key}) {status}, deliveries {deliveries}, enqueued at {enqueued - t_start:.2f} s"
        )
        if holder:
            pid = int(holder.rsplit(":", 1)[-1])
            ran = any(r.job_id == job_id and r.pid == pid for r in runs)
            text += (
                f", held by {state} worker {holder} since {started - t_start:.2f} s;"
                f" that worker {'ran' if ran else 'never ran'} it"
            )
            worker = next((w for w in self.workers if w.pid == pid), None)
            if worker is not None:
                near = [
                    line
                    for line in worker.log_path.read_text().splitlines()
                    if "claim failed" in line and abs(log_time(line) - started) < 2
                ]
                if near:
                    text += f"; its log then: {near[0]!r}"
        faults = [
            f"{f.kind} at {f.t0 - t_start:.2f} s"
            for f in self.faults
            if abs(f.t0 - (started or enqueued)) < 2
        ]
        if faults:
            text += f"; fault: {', '.join(faults)}"
        return text


def run_soak(dsn: str, ledger: Path, cfg: SoakConfig, say: Callable[[str], None] = print) -> SoakReport:
    """Run the soak against dsn (a database with pgq installed; its cluster gets restarted)."""
    report = Soak(dsn, ledger, cfg, say).run()
    for line in report.lines:
        say(line)
    for problem in report.problems:
        say(f"PROBLEM: {problem}")
    for bug, evidence in report.known.items():
        say(KNOWN_BUGS[bug])
        for line in evidence[:10]:
            say(f"  {bug}: {line}")
    say(report.summary)
    return report


# What a DBA or a managed service sets on application roles: statements over 2 s are
# cancelled (every pgq call a worker or producer makes takes milliseconds; a sweep bounds
# itself inside it), lock waits over 1 s fail (under the statement timeout, so they surface
# as lock_not_available, not as a cancel), a transaction left idle for 5 s is ended
# (transactional handlers here run well under that), and a session idle for 10 s is closed
# (the pools' connections and the LISTEN connection meet it between bursts and drains).
DBA_SETTINGS = {
    "statement_timeout": "2s",
    "lock_timeout": "1s",
    "idle_in_transaction_session_timeout": "5s",
    "idle_session_timeout": "10s",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="pgq chaos soak (restarts the PostgreSQL cluster!)")
    parser.add_argument(
        "--dsn", default=os.environ.get("PGQ_TEST_DSN", "postgresql://postgres@127.0.0.1:54329/postgres")
    )
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--rate", type=float, default=40.0, help="jobs per second per producer")
    parser.add_argument("--lease", type=float, default=2.0)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--kinds", default=",".join(KINDS), help="faults to inject (comma-separated)")
    parser.add_argument("--gap", type=float, nargs=2, metavar=("MIN", "MAX"), help="seconds between faults")
    parser.add_argument("--database", default="pgq_soak")
    parser.add_argument(
        "--dba-settings", action="store_true", help="workers and producers log in as roles with DBA_SETTINGS"
    )
    args = parser.parse_args(argv)

    problem = restart_problem(args.dsn)
    if problem:
        print(f"soak: not restarting: {problem}", file=sys.stderr)
        return 2
    from pgq import migrate

    with psycopg.connect(args.dsn, autocommit=True) as conn:
        name = sql.Identifier(args.database)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(name))
    dsn = make_conninfo(args.dsn, dbname=args.database)
    migrate.install(dsn, cron=False)
    cfg = SoakConfig(
        seconds=args.minutes * 60,
        workers=args.workers,
        rate=args.rate,
        lease=args.lease,
        seed=args.seed,
        # The long form: a fault every 5 to 20 s; shorter runs keep the short form's pace.
        fault_gap=tuple(args.gap) if args.gap else (5.0, 20.0) if args.minutes >= 2 else SoakConfig.fault_gap,
        kinds=tuple(args.kinds.split(",")),
        role_settings=DBA_SETTINGS if args.dba_settings else None,
    )
    if not set(cfg.kinds) <= set(KINDS + LONG_KINDS):
        parser.error(f"--kinds: choose from {', '.join(KINDS + LONG_KINDS)}")
    ledger = Path(tempfile.mkdtemp(prefix="pgq-soak-"))
    started = time.monotonic()
    report = run_soak(dsn, ledger, cfg)
    wait_for_server(args.dsn)
    print(f"soak: finished in {time.monotonic() - started:.0f} s; database {args.database} and {ledger} kept")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
