"""The audit of the chaos soak (soak.py): what the ledgers, pgq.outcomes and the soak's own
tables say about every job once the soak is over.

It proves: every committed enqueue ran to the end at least once or was canceled on request;
every job has exactly one terminal outcome ('succeeded', or 'canceled' for a job the
canceller asked to cancel); a 'failed' attempt is the timeout of a slow job's first
delivery or happened at a fault; every job that ran twice saw deliveries > 1 and was in
flight at a fault or after a recorded failure; every succeeded job of the transactional
entrypoint has exactly one effect row, from the delivery that succeeded (none when it did
not succeed); the concurrency-limited entrypoint never ran more than its limit at once
outside fault windows; nothing is left in pgq.jobs and no worker is left alive.
"""

from __future__ import annotations

import bisect
import itertools
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

ENTRYPOINTS = ["soak_sql", "soak_trigger", "soak_batch"]
TIMED = "soak_sql"  # timeout 1 s; slow jobs sleep past it on their first delivery
TRANSACTIONAL = "soak_trigger"  # writes its effect in the transaction that completes the job
LIMITED = "soak_batch"  # at most LIMIT running at once across all workers
LIMIT = 8
SLOW_EVERY = 25
FAULT_LEASES = 3  # a fault window: the fault, then this many leases

# Known bugs the soak finds, each told apart from anything else by its signature (see
# Soak._orphaned_claim and Soak._reregister_race), so that they cannot hide another problem.
ORPHANED_CLAIM = "orphaned claim"
REREGISTER_RACE = "re-registration race"
STALE_POOL = "stale pooled connection"
DUPLICATE_COMPLETE = "dropped completion"
CONNECTION_LOST = ("AdminShutdown", "OperationalError", "server closed the connection", "connection is lost")
KNOWN_BUGS = {
    ORPHANED_CLAIM: (
        "BUG (worker): a claim that committed but whose reply was lost (the server crashed right"
        " after the commit) leaves its jobs held by a live worker that does not know of them; its"
        " heartbeats extend their lease, so they are re-delivered only when that worker stops or"
        " after the entrypoint's timeout"
    ),
    REREGISTER_RACE: (
        "BUG (worker): when a reaped worker comes back, its claim loop and its heartbeat loop both"
        " register it again at once: two worker ids, and jobs claimed meanwhile are tagged with the"
        " other id, so their completion is fenced although they ran; they are run again once the"
        " lease of the id nobody heartbeats runs out"
    ),
    DUPLICATE_COMPLETE: (
        "BUG (pgq.complete): a completion batch that holds two deliveries of one job (a late"
        " completion of an earlier delivery that the reaper failed as timed out, and the current"
        " delivery this worker claimed again) completes neither: the delivery is matched at the"
        " id's first position (array_position), so the current delivery's completion is dropped,"
        " the worker logs it as no longer held, and the job runs again although it succeeded"
    ),
    STALE_POOL: (
        "BUG (worker): a transactional handler is given a pooled connection that a fault broke"
        " before its job was even claimed (the worker's sync pool does not check connections):"
        " its first statement fails, and the job is charged a failed attempt and a backoff; with"
        " the default max_attempts (5) a job can go dead from a restart it was not running during"
    ),
}


def is_slow(key: str) -> bool:
    """Whether the job of this key sleeps past its timeout on its first delivery (soak_sql)."""
    return zlib.crc32(key.encode()) % SLOW_EVERY == 0


@dataclass
class Run:
    """One handler run, from its ledger lines: start, then end (returned) or stop (raised)."""

    pid: int
    job_id: int
    deliveries: int
    entrypoint: str
    key: str
    t: float  # when it started
    end: float | None = None  # None: no end line (SIGKILLed)
    event: str = ""  # end, stop or ""


def read_ledger(ledger: Path) -> list[Run]:
    runs: dict[tuple[int, int, int], Run] = {}
    for path in ledger.glob("*.log"):
        pid = int(path.stem)
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) != 6:
                continue
            job_id, deliveries, entrypoint, event, t, key = parts
            ident = (pid, int(job_id), int(deliveries))
            if event == "start":
                runs[ident] = Run(pid, int(job_id), int(deliveries), entrypoint, key, float(t))
            elif ident in runs:
                runs[ident].end, runs[ident].event = float(t), event
    return sorted(runs.values(), key=lambda r: r.t)


@dataclass
class SoakReport:
    summary: str = ""
    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    known: dict[str, list[str]] = field(default_factory=dict)  # KNOWN_BUGS seen -> evidence
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.known


def log_time(line: str) -> float:
    """The unix time of a worker log line ("2026-01-01 12:00:00,123 LEVEL ..."), or 0."""
    try:
        return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    except ValueError:
        return 0.0


def sample(items: Any, n: int = 10) -> str:
    items = sorted(items)
    more = f" ... ({len(items)} in all)" if len(items) > n else ""
    return ", ".join(map(str, items[:n])) + more


def _last_line(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[-1][:120] if lines else ""


@dataclass
class Outcome:
    job_id: int
    entrypoint: str
    outcome: str
    deliveries: int
    error: str | None
    started: float | None
    finished: float


class Audit:
    """The audit of one soak run (a soak.Soak after its drain and shutdown)."""

    def __init__(
        self,
        soak: Any,
        producers: list[Any],
        canceller: Any,
        t_start: float,
        t_stop: float,
        t_drained: float,
        drained: bool,
    ) -> None:
        self.soak = soak
        self.query = soak.query
        self.producers = producers
        self.canceller = canceller
        self.t_start, self.t_stop, self.t_drained, self.drained = t_start, t_stop, t_drained, drained
        self.lease = soak.cfg.lease
        self.faults = soak.faults
        self.report = SoakReport()
        self.problems = self.report.problems
        self.say = self.report.lines.append

    def at_move(self, t: float) -> bool:
        """Whether `t` is during a move between partitions (pgq.isolate, pgq.unisolate) or
        within the roles' lock_timeout and a second after it."""
        return any(a <= t <= b + 2.0 for a, b in self.canceller.move_windows)

    def at_fault(self, t0: float, t1: float) -> bool:
        """Whether [t0, t1] meets a fault window (the fault, then FAULT_LEASES leases)."""
        return any(f.t0 <= t1 and t0 <= f.t1 + FAULT_LEASES * self.lease for f in self.faults)

    def explained(self, prev: Run, nxt: Run) -> str | None:
        """Why a job ran again, None when nothing explains it: a fault that began before the
        re-run and ended after the earlier run started (for a SIGKILL: the earlier run was in
        the killed worker); the recorded failure of the earlier run (a timeout, an error at a
        fault); or the earlier run's worker presumed dead (reaped) in a fault window, when the
        outage outlasted its lease (its claim may have committed just before the reap)."""
        if prev.event == "stop" and (prev.job_id, prev.deliveries) in self.failed_deliveries:
            return "failure"
        if any(
            f.t0 <= nxt.t and prev.t <= f.t1 and (f.kind != "kill" or f.victim == prev.pid)
            for f in self.faults
        ):
            return "fault"
        for dead in self.deaths.get(prev.pid, []):
            if prev.t <= dead + 1.0 and dead <= nxt.t and self.at_fault(dead, dead):
                return "reaped"
        return None

    def _duplicate_complete(self, prev: Run, runs: list[Run]) -> str | None:
        """Evidence that this run's completion was dropped because it went out in one
        pgq.complete call with an earlier delivery of the same job (pgq.complete pairs an id
        with its delivery by the id's first position): the same worker ran an earlier
        delivery, both ended, then it logged the job as no longer held. None otherwise."""
        earlier = [r for r in runs if r.pid == prev.pid and r.deliveries < prev.deliveries and r.end]
        worker = next((w for w in self.soak.workers if w.pid == prev.pid), None)
        if prev.event != "end" or prev.end is None or not earlier or worker is None:
            return None
        for line in worker.log_path.read_text().splitlines():
            if (
                "were no longer held by this delivery" in line
                and str(prev.job_id) in line.split("[", 1)[-1].split("]", 1)[0].split(", ")
                and log_time(line) + 0.01 >= prev.end
            ):
                ended = ", ".join(f"{r.deliveries} at {r.end - self.t_start:.2f} s" for r in earlier)
                return (
                    f"{prev.pid} ended deliveries {ended} and {prev.deliveries} at"
                    f" {prev.end - self.t_start:.2f} s of job {prev.job_id}, then logged {line!r}"
                )
        return None

    def run(self) -> SoakReport:
        self._producers()
        self.runs = read_ledger(self.soak.ledger)
        self._outcomes()
        self._delivery()
        self._failures()
        self._terminal()
        self._effects()
        self._reruns()
        self._concurrency()
        self._leftovers()
        self._recovery()
        self._summary()
        return self.report

    # committed enqueues

    def _producers(self) -> None:
        producers = self.producers
        known = {k for p in producers for k in p.committed}
        self.unknown = unknown = {k for p in producers for k in p.unknown}
        abandoned = {k for p in producers for k in p.abandoned}
        errors = [e for p in producers for e in p.errors]
        self.in_db = in_db = {
            r[0] for r in self.query("SELECT key FROM soak_produced UNION ALL SELECT key FROM soak_orders")
        }
        self.committed = known | (unknown & in_db)
        self.say(
            f"producers: {len(known)} enqueues committed, {len(unknown)} with an unknown outcome"
            f" ({len(unknown & in_db)} of them committed), {sum(p.retries for p in producers)} retries"
            f" ({sum(p.read_only for p in producers)} read-only), {len(abandoned)} abandoned"
        )
        if known - in_db:
            self.problems.append(f"committed enqueues missing after the faults: {sample(known - in_db)}")
        if in_db - known - unknown:
            self.problems.append(
                f"enqueues in the database that no producer committed: {sample(in_db - known - unknown)}"
            )
        if abandoned:
            self.problems.append(f"producers gave up on {len(abandoned)} enqueues after 60 s of retries")
        if errors:
            self.problems.append(f"producer errors other than lost connections: {sample(set(errors), 5)}")

    def _outcomes(self) -> None:
        rows = self.query(
            "SELECT job_id, entrypoint, outcome, deliveries, error,"
            " extract(epoch FROM started_at)::float8, extract(epoch FROM finished_at)::float8"
            " FROM pgq.outcomes WHERE entrypoint = ANY(%s)",
            (ENTRYPOINTS,),
        )
        self.outcomes = [Outcome(*row) for row in rows]
        self.terminal: dict[int, list[Outcome]] = defaultdict(list)
        self.failed: list[Outcome] = []
        for o in self.outcomes:
            (self.failed if o.outcome == "failed" else self.terminal[o.job_id]).append(o)
        self.failed_deliveries = {(o.job_id, o.deliveries) for o in self.failed}
        # Workers presumed dead: pid -> when (SIGKILLed ones too).
        self.deaths: dict[int, list[float]] = defaultdict(list)
        for name, stopped in self.query(
            "SELECT name, extract(epoch FROM stopped_at)::float8 FROM pgq.workers WHERE state = 'dead'"
        ):
            self.deaths[int(name.rsplit(":", 1)[-1])].append(stopped)
        # Who asked to cancel what: key -> job id.
        self.asked: dict[str, int] = dict(self.canceller.asked)
        self.asked_ids = set(self.asked.values())
        self.key_of: dict[int, str] = {job_id: key for key, job_id in self.asked.items()}
        for run in self.runs:
            self.key_of[run.job_id] = run.key
        self.canceled_ids = {j for j, o in self.terminal.items() if [x.outcome for x in o] == ["canceled"]}
        self.canceled_keys = {self.key_of[j] for j in self.canceled_ids if j in self.key_of}

    # every committed enqueue ran, or was canceled on request

    def _delivery(self) -> None:
        report, runs = self.report, self.runs
        self.ended = ended = {r.key for r in runs if r.event == "end"}
        job_ids: dict[str, set[int]] = defaultdict(set)
        for run in runs:
            job_ids[run.key].add(run.job_id)
        committed = self.committed
        self.lost = lost = committed - ended - self.canceled_keys
        self.say(
            f"ran to the end at least once: {len(committed & ended)} of {len(committed)} committed"
            f" enqueues; {len(self.canceled_keys - ended)} others canceled on request"
        )
        self.orphans = {row[0]: row for row in self.soak.undrained if self.soak._orphaned_claim(row, runs)}
        for row in self.orphans.values():
            report.known.setdefault(ORPHANED_CLAIM, []).append(
                self.soak._describe_stuck(row, runs, self.t_start)
            )
        self.orphan_keys = {row[1] for row in self.orphans.values()}
        unaccounted = lost - self.orphan_keys
        if unaccounted:
            jobs = self.query(
                "SELECT id, status, deliveries, payload->>'key' FROM pgq.jobs"
                " WHERE payload->>'key' = ANY(%s)",
                (sorted(unaccounted),),
            )
            self.problems.append(
                f"LOST: {len(unaccounted)} committed enqueues never ran to the end and were not"
                f" canceled: {sample(unaccounted)}; in pgq.jobs: {jobs[:10]}"
            )
        phantom = {r.key for r in runs} - committed
        if phantom:
            self.problems.append(f"jobs ran whose enqueue did not commit: {sample(phantom)}")
        dup_jobs = {k: ids for k, ids in job_ids.items() if len(ids) > 1}
        if dup_jobs:
            self.problems.append(f"keys enqueued as more than one job: {sample(dup_jobs.items(), 5)}")

    # failed attempts: timeouts of slow first deliveries, or at faults

    def _failures(self) -> None:
        self.timeouts: set[int] = set()
        at_fault: list[Outcome] = []
        self.failed_at_move: list[Outcome] = []
        unexplained: list[str] = []
        for o in self.failed:
            key = self.key_of.get(o.job_id, "")
            timeout = (o.error or "").startswith("timeout")
            if o.entrypoint == TIMED and o.deliveries == 1 and timeout and is_slow(key):
                self.timeouts.add(o.job_id)
            elif self.at_fault(o.started or o.finished, o.finished):
                at_fault.append(o)
            elif "lock timeout" in (o.error or "") and self.at_move(o.finished):
                # The roles' lock_timeout ran out behind a move's lock of the job table.
                self.failed_at_move.append(o)
            else:
                unexplained.append(
                    f"job {o.job_id} ({key}, {o.entrypoint}) delivery {o.deliveries}, claimed at"
                    f" {(o.started or 0) - self.t_start:.2f} s, failed at {o.finished - self.t_start:.2f} s:"
                    f" {_last_line(o.error)!r}"
                )
        self.failed_at_fault = at_fault
        slow_jobs = {r.job_id for r in self.runs if r.entrypoint == TIMED and is_slow(r.key)}
        overran = [
            f"job {r.job_id} ({r.key}) in {r.pid}, {r.end - r.t:.2f} s"
            for r in self.runs
            if r.entrypoint == TIMED and r.deliveries == 1 and is_slow(r.key) and r.event == "end" and r.end
        ]
        errors = Counter(f"{o.entrypoint}: {_last_line(o.error)[:80]}" for o in at_fault)
        self.say(
            f"failed attempts: {len(self.failed)}; {len(self.timeouts)} timeouts of the first delivery"
            f" of {len(slow_jobs)} slow jobs, {len(at_fault)} at faults"
            + (f" ({'; '.join(f'{n}x {e}' for e, n in errors.most_common(4))})" if at_fault else "")
            + f", {len(self.failed_at_move)} behind a move's lock"
        )
        for o in at_fault:
            stale = self._stale_connection(o)
            if stale:
                self.report.known.setdefault(STALE_POOL, []).append(stale)
        if unexplained:
            self.problems.append(
                f"failed attempts neither a slow job's timeout nor at a fault: {sample(unexplained, 5)}"
            )
        if overran:
            self.problems.append(
                f"slow first deliveries that ran past their timeout to the end: {sample(overran, 5)}"
            )

    def _stale_connection(self, o: Outcome) -> str | None:
        """Evidence that a transactional run failed on a connection broken before its job was
        claimed: the job was claimed after the last fault was over, and the handler's first
        statement failed with a lost connection. None when the failure does not fit."""
        if o.entrypoint != TRANSACTIONAL or o.started is None:
            return None
        if not any(sign in (o.error or "") for sign in CONNECTION_LOST):
            return None
        if any(f.t0 <= o.finished and o.started <= f.t1 for f in self.faults):
            return None  # a fault cut the run itself
        before = [f for f in self.faults if f.t1 < o.started and f.kind != "kill"]
        if not before:
            return None
        last = max(before, key=lambda f: f.t1)
        return (
            f"job {o.job_id} ({self.key_of.get(o.job_id)}) delivery {o.deliveries} claimed at"
            f" {o.started - self.t_start:.2f} s, {o.started - last.t1:.2f} s after {last.kind} was over"
            f" ({last.t0 - self.t_start:.2f}-{last.t1 - self.t_start:.2f} s), failed at"
            f" {o.finished - self.t_start:.2f} s: {_last_line(o.error)!r}"
        )

    # exactly one terminal outcome: succeeded, or canceled on request

    def _terminal(self) -> None:
        terminal = self.terminal
        self.doubles = doubles = {j: [o.outcome for o in os] for j, os in terminal.items() if len(os) > 1}
        self.succeeded = {
            j: os[0] for j, os in terminal.items() if len(os) == 1 and os[0].outcome == "succeeded"
        }
        others = {
            j: os[0].outcome
            for j, os in terminal.items()
            if len(os) == 1
            and os[0].outcome != "succeeded"
            and not (os[0].outcome == "canceled" and j in self.asked_ids)
        }
        ran_ids = {r.job_id for r in self.runs if r.event == "end"}
        missing = ran_ids - set(terminal)
        unran = set(self.succeeded) - ran_ids
        too_late = {j for j in self.asked_ids if j in self.succeeded}
        self.say(
            f"outcomes: {len(self.succeeded)} jobs succeeded once, {len(self.canceled_ids)} canceled,"
            f" {len(doubles)} with more than one terminal outcome; cancels: {self.canceller.calls} calls"
            f" asked for {len(self.asked)} jobs, {len(self.canceled_ids & self.asked_ids)} canceled,"
            f" {len(too_late)} succeeded first ({self.canceller.missed} sampled jobs were already gone)"
        )
        if doubles:
            self.problems.append(f"DOUBLE terminal outcomes: {sample(doubles.items(), 5)}")
        if others:
            self.problems.append(
                "terminal outcomes other than succeeded (or canceled on request):"
                f" {sample(others.items(), 5)}"
            )
        if missing:
            self.problems.append(f"jobs that ran but have no terminal outcome: {sample(missing)}")
        if unran:
            self.problems.append(
                f"jobs that succeeded without a completed run in the ledger: {sample(unran)}"
            )
        if self.timeouts - set(self.succeeded):
            self.problems.append(
                f"slow jobs that timed out and never succeeded: {sample(self.timeouts - set(self.succeeded))}"
            )
        if self.canceller.errors:
            self.problems.append(
                f"canceller errors other than lost connections: {sample(set(self.canceller.errors), 5)}"
            )

    # the transactional entrypoint's effects: exactly once, from the delivery that succeeded

    def _effects(self) -> None:
        rows = self.query("SELECT key, job_id, deliveries FROM soak_effects")
        by_job: dict[int, list[tuple[str, int]]] = defaultdict(list)
        for key, job_id, deliveries in rows:
            by_job[job_id].append((key, deliveries))
        wanted = {j: o for j, o in self.succeeded.items() if o.entrypoint == TRANSACTIONAL}
        bad = []
        for job_id, o in wanted.items():
            effects = by_job.get(job_id, [])
            if [d for _, d in effects] != [o.deliveries]:
                bad.append(f"job {job_id} succeeded on delivery {o.deliveries}, effects {effects}")
            elif effects[0][0] != self.key_of.get(job_id, effects[0][0]):
                bad.append(f"job {job_id} ({self.key_of.get(job_id)}): effect of key {effects[0][0]}")
        stray = {j: e for j, e in by_job.items() if j not in wanted}
        canceled = sum(
            1
            for j, os in self.terminal.items()
            if os[0].entrypoint == TRANSACTIONAL and j in self.canceled_ids
        )
        self.effects_ok = len(wanted) - len(bad)
        self.say(
            f"effects ({TRANSACTIONAL}): {len(rows)} rows; {self.effects_ok} of {len(wanted)} succeeded jobs"
            f" with exactly one, from the delivery that succeeded; {canceled} canceled jobs,"
            f" {len(stray)} rows of jobs that did not succeed"
        )
        if bad:
            self.problems.append(f"transactional effects not exactly once: {sample(bad, 5)}")
        if stray:
            self.problems.append(
                f"effects of jobs that did not succeed: {sample(stray.items(), 5)}"
                f" (outcomes {[[o.outcome for o in self.terminal.get(j, [])] for j in list(stray)[:5]]})"
            )

    # re-runs

    def _reruns(self) -> None:
        by_key: dict[str, list[Run]] = defaultdict(list)
        for run in self.runs:
            by_key[run.key].append(run)
        self.reruns = reruns = {k: rs for k, rs in by_key.items() if len(rs) > 1}
        bad_deliveries, self.unexplained = [], []
        why: Counter[str] = Counter()
        for key, rs in reruns.items():
            for prev, nxt in itertools.pairwise(rs):
                if not nxt.deliveries > max(1, prev.deliveries):
                    bad_deliveries.append((key, [(r.job_id, r.deliveries) for r in rs]))
                reason = self.explained(prev, nxt)
                why[reason or "unexplained"] += 1
                if reason:
                    continue
                text = (
                    f"{key} (job {prev.job_id}): run at {prev.t - self.t_start:.2f} s in {prev.pid}"
                    f" ({prev.event or 'no end'}), again at {nxt.t - self.t_start:.2f} s"
                    f" (delivery {nxt.deliveries})"
                )
                race = self.soak._reregister_race(prev)
                dup = self._duplicate_complete(prev, rs)
                if race:
                    self.report.known.setdefault(REREGISTER_RACE, []).append(f"{text}; {race}")
                elif dup:
                    self.report.known.setdefault(DUPLICATE_COMPLETE, []).append(f"{text}; {dup}")
                else:
                    self.unexplained.append(text)
        self.extra = sum(len(r) - 1 for r in reruns.values())
        self.say(
            f"re-runs: {len(reruns)} jobs ran more than once, {self.extra} extra runs (after a fault"
            f" {why['fault']}, a failed attempt {why['failure']}, a worker reaped at a fault"
            f" {why['reaped']}); {len(self.unexplained)} explained by none of these"
            f" ({len(self.report.known.get(REREGISTER_RACE, []))} by the re-registration race,"
            f" {len(self.report.known.get(DUPLICATE_COMPLETE, []))} by a dropped completion)"
        )
        if bad_deliveries:
            self.problems.append(
                f"re-runs that did not see a higher deliveries count: {sample(bad_deliveries, 5)}"
            )
        if self.unexplained:
            self.problems.append(f"re-runs not in flight at any fault: {sample(self.unexplained, 5)}")

    # the concurrency limit, across all worker processes

    def _concurrency(self) -> None:
        kills = {f.victim: f.t0 for f in self.faults if f.kind == "kill"}
        events: list[tuple[float, int]] = []
        unended = 0
        for run in self.runs:
            if run.entrypoint != LIMITED:
                continue
            end = run.end if run.end is not None else kills.get(run.pid)
            if end is None:
                unended += 1
                end = self.t_drained
            events += [(run.t, 1), (end, -1)]
        windows = [(f.t0, f.t1 + FAULT_LEASES * self.lease) for f in self.faults]
        # Also look at each window's end: runs that began inside may still be in flight.
        events += [(b, 0) for _, b in windows]
        events.sort(key=lambda e: (e[0], e[1]))  # ends before starts at the same instant
        level = peak = quiet = 0
        over: list[str] = []
        for t, delta in events:
            level += delta
            peak = max(peak, level)
            if delta >= 0 and not any(a <= t < b for a, b in windows):
                quiet = max(quiet, level)
                if level > LIMIT:
                    over.append(f"{level} at {t - self.t_start:.2f} s")
        self.peak, self.quiet_peak = peak, quiet
        self.say(
            f"concurrency ({LIMITED}, limit {LIMIT}): at most {quiet} runs at once outside fault windows,"
            f" {peak} in all; {unended} runs without an end outside a killed worker"
        )
        if over:
            self.problems.append(f"{LIMITED} ran more than {LIMIT} at once outside faults: {sample(over, 5)}")
        if unended:
            self.problems.append(f"{unended} {LIMITED} runs have no end, and their worker was not killed")

    # after shutdown

    def _leftovers(self) -> None:
        soak = self.soak
        left = self.query(
            "SELECT id, status, deliveries, worker_id FROM pgq.jobs WHERE entrypoint = ANY(%s)",
            (ENTRYPOINTS,),
        )
        alive = self.query("SELECT id, name, heartbeat_age FROM pgq.workers WHERE state = 'alive'")
        self.say(
            f"after shutdown: {len(left)} jobs in pgq.jobs, {len(alive)} workers alive;"
            f" drained {'in' if self.drained else 'NOT in'} {self.t_drained - self.t_stop:.1f} s;"
            f" SIGTERM exit codes {soak.stop_codes}"
        )
        rest = [r for r in left if r[0] not in self.orphans]
        if rest:
            self.problems.append(f"jobs left in pgq.jobs: {sample(rest, 5)}")
        if not self.drained:
            for row in [r for r in soak.undrained if r[0] not in self.orphans][:10]:
                self.problems.append("not drained: " + soak._describe_stuck(row, self.runs, self.t_start))
        if alive:
            self.problems.append(f"workers still 'alive' after shutdown: {alive}")
        if any(code != 0 for code in soak.stop_codes):
            self.problems.append(f"workers did not exit 0 on SIGTERM: {soak.stop_codes}")
        if soak.exits:
            self.problems.append("workers exited without being killed:\n" + "\n".join(soak.exits))
        tracebacks = [w.log_path.name for w in soak.workers if "Traceback" in w.log_path.read_text()]
        if tracebacks:
            self.say(f"note: tracebacks in worker logs {tracebacks} (in {soak.ledger})")

    def _recovery(self) -> None:
        # From a fault until the completion rate is back above half its level in the 5 s
        # before it (the first completion that starts a 1-second window at that rate), or
        # until the first completion when there was no level to compare with.
        done = sorted(o.finished for o in self.outcomes if o.outcome == "succeeded")
        for fault in self.faults:
            before = min(5.0, fault.t0 - self.t_start)
            level = (
                bisect.bisect_left(done, fault.t0) - bisect.bisect_left(done, fault.t0 - before)
            ) / before
            i = bisect.bisect_left(done, fault.t0)
            while i < len(done):
                window = bisect.bisect_left(done, done[i] + 1.0) - i
                if level < 2 or window >= level / 2:
                    fault.recovery = done[i] - fault.t0
                    break
                i += 1
            if fault.recovery is None:
                self.problems.append(f"no recovery after {fault.kind} at {fault.t0 - self.t_start:.1f} s")

    def _summary(self) -> None:
        report, kinds = self.report, self.soak.kinds
        by_kind = Counter(f.kind for f in self.faults)
        recovery = ", ".join(
            f"{kind} "
            + " ".join(
                f"{f.recovery:.2f}" if f.recovery is not None else "never"
                for f in self.faults
                if f.kind == kind
            )
            for kind in kinds
            if by_kind[kind]
        )
        per_producer = ", ".join(
            f"{p.kind} {len(set(p.committed) | (set(p.unknown) & self.in_db))}" for p in self.producers
        )
        lost, orphaned = self.lost - self.orphan_keys, self.lost & self.orphan_keys
        asked_canceled = len(self.canceled_ids & self.asked_ids)
        report.summary = (
            f"soak: {len(self.committed)} jobs ({per_producer}; {len(self.unknown)} commit-unknown)"
            f" in {self.t_stop - self.t_start:.0f} s, {len(self.soak.workers)} worker processes;"
            f" faults {len(self.faults)}: "
            + ", ".join(f"{kind} {by_kind[kind]}" for kind in kinds)
            + f"; re-runs {self.extra} ({len(self.unexplained)} unexplained);"
            f" timeouts {len(self.timeouts)}, failed at faults {len(self.failed_at_fault)};"
            f" cancels asked {len(self.asked)} (canceled {asked_canceled});"
            f" touched while queued {self.canceller.touched};"
            f" moved between partitions {self.canceller.moves};"
            f" effects exactly once {self.effects_ok};"
            f" {LIMITED} peak {self.quiet_peak}/{LIMIT} outside faults;"
            f" lost {len(lost)}"
            + (f" (orphaned claims {len(orphaned)})" if orphaned else "")
            + f"; double outcomes {len(self.doubles)}; recovery s: {recovery}"
            + (" -> OK" if report.ok else " -> FAILED" if report.problems else " -> FAILED (known bugs)")
        )
        report.stats = {
            "jobs": len(self.committed),
            "lost": len(lost),
            "orphaned": len(orphaned),
            "doubles": len(self.doubles),
            "reruns": self.extra,
            "timeouts": len(self.timeouts),
            "failed_at_faults": len(self.failed_at_fault),
            "cancels_asked": len(self.asked),
            "touched": self.canceller.touched,
            "moves": self.canceller.moves,
            "canceled": asked_canceled,
            "effects": self.effects_ok,
            "limited_peak": self.quiet_peak,
            "faults": dict(by_kind),
            "recovery": {f"{f.kind}@{f.t0 - self.t_start:.1f}": f.recovery for f in self.faults},
        }
