"""The scenarios. Each has its own entrypoint; `prepare` configures it before any worker
starts (a worker reads its settings when it starts), `run` drives it and audits the result.

Shared scenarios run concurrently in one worker process that serves all their entrypoints;
the others (signals to the process) start workers of their own, also concurrently."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from . import audit, ops
from .harness import Harness, ScenarioFailed

# How long a scenario waits for what a correct worker does at once (claim, settle): generous,
# for loaded machines; a scenario's own timings are in its body.
PROMPT = 20.0


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    run: Callable[[Harness, str], str | None]  # returns a note (figures) or None
    prepare: Callable[[Harness, str], None] | None = None
    shared: bool = True  # served by the shared worker; else it starts its own


def _lease(h: Harness, ep: str, **more: str | int) -> None:
    h.configure(ep, lease=f"{h.lease} seconds", **more)


def result(h: Harness, ep: str) -> str | None:
    value = {"answer": 42, "text": "h\u00e9llo", "list": [1, None, True]}
    job = h.enqueue(ep, ops.result(value))
    h.settled(job, "succeeded", PROMPT)
    outcomes = h.outcomes(job)
    audit.expect_outcomes(job, outcomes, ["succeeded"])
    audit.expect_deliveries(job, outcomes[0], 1)
    audit.expect_result(job, outcomes[0], value)
    return None


def retry(h: Harness, ep: str) -> str | None:
    job = h.enqueue(ep, ops.fail(2, "third time"))
    h.settled(job, "succeeded", PROMPT)
    outcomes = h.outcomes(job)
    audit.expect_outcomes(job, outcomes, ["failed", "failed", "succeeded"])
    audit.expect_errors(job, outcomes)
    for delivery, outcome in enumerate(outcomes, 1):
        audit.expect_deliveries(job, outcome, delivery)
    audit.expect_result(job, outcomes[-1], "third time")
    return None


def dead(h: Harness, ep: str) -> str | None:
    job = h.enqueue(ep, ops.fail(100))
    h.settled(job, "dead", PROMPT)
    outcomes = h.outcomes(job)
    audit.expect_outcomes(job, outcomes, ["failed", "failed"])
    audit.expect_errors(job, outcomes)
    row = audit.expect_live(h.job(job), job, "dead")
    if not (row["last_error"] or "").strip():
        raise ScenarioFailed(f"job {job}: dead without last_error")
    return None


def long_job(h: Harness, ep: str) -> str | None:
    seconds = 3 * h.lease
    job = h.enqueue(ep, ops.sleep(seconds, "long"))

    h.running_on(job, PROMPT)

    def done() -> bool:
        row = h.job(job)
        if row is not None and (row["deliveries"] > 1 or row["status"] != "running"):
            raise ScenarioFailed(
                f"job {job} ({seconds:g} s, lease {h.lease:g} s) was taken back while it ran:"
                " the worker did not keep its lease (pgq.heartbeat every lease/5)"
            )
        return h.status(job) == "succeeded"

    h.wait_for(f"job {job} succeeded", seconds + PROMPT, done)
    outcomes = h.outcomes(job)
    audit.expect_outcomes(job, outcomes, ["succeeded"])
    if outcomes[0]["deliveries"] != 1:
        raise ScenarioFailed(
            f"job {job} ({seconds:g} s, lease {h.lease:g} s) was delivered {outcomes[0]['deliveries']} times:"
            " the worker did not keep its lease (pgq.heartbeat every lease/5)"
        )
    return None


def snooze(h: Harness, ep: str) -> str | None:
    job = h.enqueue(ep, ops.snooze(1, 1, "after a snooze"))
    h.settled(job, "succeeded", PROMPT)
    outcomes = h.outcomes(job)
    audit.expect_outcomes(job, outcomes, ["snoozed", "succeeded"])
    audit.expect_result(job, outcomes[-1], "after a snooze")
    if outcomes[0]["attempt"] != outcomes[1]["attempt"]:
        raise ScenarioFailed(f"job {job}: the snooze spent an attempt")
    gap = (outcomes[1]["started_at"] - outcomes[0]["finished_at"]).total_seconds()
    if gap < 0.9:
        raise ScenarioFailed(f"job {job}: ran again {gap:.2f} s after a snooze of 1 s")
    return None


def cancel(h: Harness, ep: str) -> str | None:
    # The attempt a cancel records when no run is involved: the canceled run must record
    # the same (its cancellation is not a failed attempt).
    control = h.enqueue(ep, ops.result(None), run_at_in=3600)
    job = h.enqueue(ep, ops.sleep(60))
    h.running_on(job, PROMPT)
    asked = time.monotonic()
    if h.one("SELECT pgq.cancel(%s::bigint[])", ([job, control],)) != 2:
        raise ScenarioFailed(f"pgq.cancel of jobs {job} and {control} did not count both")
    bound = 2 * h.lease + 3
    h.settled(job, "canceled", bound)
    took = time.monotonic() - asked
    outcomes = h.outcomes(job)
    audit.expect_outcomes(job, outcomes, ["canceled"])
    base = h.outcomes(control)[0]["attempt"]
    if outcomes[0]["attempt"] != base:
        raise ScenarioFailed(
            f"job {job}: canceled with attempt {outcomes[0]['attempt']} (a cancel records {base}):"
            " settle a cancel with pgq.confirm_cancel, not pgq.fail"
        )
    return f"canceled {took:.2f} s after pgq.cancel"


# The timeout scenario: each run is failed at TIMEOUT_S; the handler sleeps LATE_S, so a run
# that is not stopped ends LATE_S after its start. That late end must fall while the next
# delivery is held (run 2 holds from TIMEOUT_S + its claim's delay to 2 * TIMEOUT_S + that
# delay): so the delay may be up to LATE_S - TIMEOUT_S (1.5 s, above the usual 1 s poll
# interval), and LATE_S < 2 * TIMEOUT_S. The scenario checks that it was so, else the fencing
# of the late end went untested and it fails saying so.
TIMEOUT_S = 2.0
LATE_S = 3.5


def timeout(h: Harness, ep: str) -> str | None:
    # Two deliveries, each past the timeout: the worker must fail each at its timeout, and
    # the first run's late end (while the retry, due at once, runs) must not settle the
    # second delivery.
    job = h.enqueue(ep, ops.sleep(LATE_S, "too late"))
    h.running_on(job, PROMPT)
    begun = time.monotonic()
    h.settled(job, "dead", PROMPT)
    outcomes = h.outcomes(job)
    audit.expect_outcomes(job, outcomes, ["failed", "failed"])
    audit.expect_errors(job, outcomes)
    audit.expect_live(h.job(job), job, "dead")
    gap = (outcomes[1]["started_at"] - outcomes[0]["started_at"]).total_seconds()
    if gap >= LATE_S:
        raise ScenarioFailed(
            f"job {job}: its second delivery began {gap:.2f} s after the first, after the first run's"
            f" late end ({LATE_S:g} s): the fencing of a late end was not tested; claim when notified"
            " (a job retried at once is announced on channel pgq)"
        )
    # Past the late ends of both runs: neither may change the dead job.
    time.sleep(max(0.0, begun + gap + LATE_S + 0.5 - time.monotonic()))
    audit.expect_outcomes(job, h.outcomes(job), ["failed", "failed"])
    audit.expect_live(h.job(job), job, "dead")
    backstop = TIMEOUT_S + h.lease  # pgq.reap fails a run at timeout + lease
    runs = [(o["finished_at"] - o["started_at"]).total_seconds() for o in outcomes]
    if max(runs) >= backstop:
        raise ScenarioFailed(
            f"job {job}: runs failed after {', '.join(f'{r:.2f}' for r in runs)} s; the worker must fail a"
            f" run at its timeout ({TIMEOUT_S:g} s), not leave it to the sweep ({backstop:g} s)"
        )
    return f"failed after {', '.join(f'{r:.2f}' for r in runs)} s (timeout {TIMEOUT_S:g} s)"


def sigkill(h: Harness, ep: str) -> str | None:
    first = h.start_worker("sigkill-a", [ep])
    job = h.enqueue(ep, ops.sleep(2, "redelivered"))
    held_by = h.running_on(job, PROMPT)
    first.signal(signal.SIGKILL)
    first.wait(10)
    killed = time.monotonic()
    h.start_worker("sigkill-b", [ep])
    h.settled(job, "succeeded", 2 * h.lease + PROMPT)
    outcomes = h.outcomes(job)
    audit.expect_outcomes(job, outcomes, ["succeeded"])
    audit.expect_deliveries(job, outcomes[0], 2)
    if outcomes[0]["worker_id"] == held_by:
        raise ScenarioFailed(f"job {job}: completed by the killed worker")
    return f"re-delivered and done {time.monotonic() - killed:.2f} s after SIGKILL (lease {h.lease:g} s)"


def sigstop(h: Harness, ep: str) -> str | None:
    stopped = h.start_worker("sigstop-a", [ep])
    job = h.enqueue(ep, ops.sleep(2, "second delivery"))
    first = h.running_on(job, PROMPT)
    stopped.signal(signal.SIGSTOP)
    try:
        # Past the lease: pgq.reap declares the worker dead and re-queues its job.
        h.wait_for(
            f"worker {first} declared dead",
            3 * h.lease + PROMPT,
            lambda: h.one("SELECT state <> 'alive' FROM pgq.workers WHERE id = %s", (first,)),
        )
        other = h.start_worker("sigstop-b", [ep])
        second = h.running_on(job, PROMPT)
        if second == first:
            raise ScenarioFailed(f"job {job}: the stopped worker still holds it")
    finally:
        stopped.signal(signal.SIGCONT)  # its run is overdue: it ends now, and must be fenced
    h.settled(job, "succeeded", PROMPT)
    outcomes = h.outcomes(job)
    audit.expect_outcomes(job, outcomes, ["succeeded"])
    audit.expect_deliveries(job, outcomes[0], 2)
    if outcomes[0]["worker_id"] != second:
        raise ScenarioFailed(f"job {job}: settled by worker {outcomes[0]['worker_id']}, not {second}")
    # The resumed worker was declared dead (PQ003): it must register again and go on.
    other.signal(signal.SIGTERM)
    if other.wait(PROMPT) is None:
        raise ScenarioFailed("the second worker did not exit after SIGTERM")
    after = h.enqueue(ep, ops.result("after SIGCONT"))
    h.settled(after, "succeeded", 2 * h.lease + PROMPT)
    by = h.outcomes(after)[0]["worker_id"]
    if by in (first, second):
        raise ScenarioFailed(f"job {after}: done by worker {by}, expected a new registration")
    if stopped.proc.poll() is not None:
        code = stopped.proc.returncode
        raise ScenarioFailed(f"the resumed worker exited ({code}) instead of registering again")
    return None


def sigterm(h: Harness, ep: str) -> str | None:
    proc = h.start_worker("sigterm", [ep])
    job = h.enqueue(ep, ops.sleep(1.5, "finished in its grace"))
    held_by = h.running_on(job, PROMPT)
    proc.signal(signal.SIGTERM)
    asked = time.monotonic()
    code = proc.wait(PROMPT)
    took = time.monotonic() - asked
    if code is None:
        raise ScenarioFailed(f"the worker did not exit within {PROMPT:.0f} s of SIGTERM")
    if code != 0:
        raise ScenarioFailed(f"the worker exited {code} after SIGTERM, expected 0")
    outcomes = h.outcomes(job)
    audit.expect_outcomes(job, outcomes, ["succeeded"])
    audit.expect_deliveries(job, outcomes[0], 1)
    state = h.one("SELECT state FROM pgq.workers WHERE id = %s", (held_by,))
    if state == "alive":
        raise ScenarioFailed(f"worker {held_by} exited without pgq.unregister_worker")
    return f"exited {took:.2f} s after SIGTERM"


_RETRY = {"max_attempts": 5, "backoff_base": "100 milliseconds", "backoff_max": "200 milliseconds"}


def _prep(**more: str | int) -> Callable[[Harness, str], None]:
    """Configure the scenario's entrypoint: the suite's lease and these settings."""
    return lambda h, ep: _lease(h, ep, **more)


SCENARIOS: list[Scenario] = [
    Scenario("result", "success with a result", result, _prep()),
    Scenario("retry", "failure and retry", retry, _prep(**_RETRY)),
    Scenario("dead", "dead after max attempts", dead, _prep(**{**_RETRY, "max_attempts": 2})),
    Scenario("long_job", "a job longer than the lease", long_job, _prep()),
    Scenario("snooze", "snooze", snooze, _prep()),
    Scenario("cancel", "cancel while running", cancel, _prep()),
    Scenario(
        "timeout",
        "timeout (the late end of a timed-out run fenced)",
        timeout,
        _prep(
            max_attempts=2,
            backoff_base="0 seconds",
            backoff_max="0 seconds",
            timeout=f"{TIMEOUT_S:g} seconds",
        ),
    ),
    Scenario("sigkill", "SIGKILL and re-delivery to a second copy", sigkill, _prep(), shared=False),
    Scenario("sigstop", "SIGSTOP past the lease, SIGCONT: fenced", sigstop, _prep(), shared=False),
    Scenario("sigterm", "SIGTERM with a grace", sigterm, _prep(), shared=False),
]


def by_name(names: list[str]) -> list[Scenario]:
    known = {s.name: s for s in SCENARIOS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return [known[n] for n in names] if names else list(SCENARIOS)


def describe() -> list[tuple[str, str]]:
    return [(s.name, s.title) for s in SCENARIOS]
