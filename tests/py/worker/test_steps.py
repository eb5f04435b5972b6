"""Durable steps (Job.step, pgq.step_result, pgq.record_step) in real worker processes: a
worker SIGKILLed between two steps; on re-delivery the first step's side effect happened
exactly once and the second ran once, for sync, async and transactional handlers; the
stale delivery's record_step changes nothing. (Bad input, fencing and pgq.job's view:
tests/sql/steps.sql.)"""

from __future__ import annotations

from pathlib import Path

import psycopg

from support.workers import execute, ledger_lines, scalar, wait_until

ENTRYPOINTS = ("steps_sync", "steps_async", "steps_tx")


def events(ledger: Path, event: str) -> list[tuple[int, int]]:
    return [(job, delivery) for job, delivery, _, ev, _ in ledger_lines(ledger) if ev == event]


def test_a_worker_killed_between_two_steps_resumes_without_repeating_the_first(
    dsn: str, ledger: Path, spawn
) -> None:
    execute(dsn, "DROP TABLE IF EXISTS step_effects")
    execute(dsn, "CREATE TABLE step_effects (job_id bigint, step text, delivery integer)")
    for ep in ENTRYPOINTS:
        scalar(dsn, "SELECT pgq.configure(%s, lease => '1 second')", (ep,))
    jobs = {ep: scalar(dsn, "SELECT pgq.enqueue(%s)", (ep,)) for ep in ENTRYPOINTS}
    first = spawn(APP_DSN=dsn)
    wait_until(lambda: len(events(ledger, "between")) == 3, 60, "every handler to finish its first step")
    stale = scalar(dsn, "SELECT id FROM pgq._workers WHERE state = 'alive'")
    first.kill()  # SIGKILL: no release, no unregistration

    def reaped() -> bool:
        scalar(dsn, "SELECT pgq.reap()")
        return scalar(dsn, "SELECT count(*) FROM pgq._jobs WHERE status = 'queued'") == 3

    wait_until(reaped, 30, "the sweep to give the killed worker's jobs back")
    # The stale delivery can neither record nor read a step.
    for job in jobs.values():
        assert scalar(dsn, "SELECT pgq.record_step(%s, %s, 1, 'late', '1')", (stale, job)) is None
        assert scalar(dsn, "SELECT pgq.step_result(%s, %s, 1, 'charge')", (stale, job)) is None
    assert scalar(dsn, "SELECT count(*) FROM pgq._steps WHERE name = 'late'") == 0

    second = spawn(APP_DSN=dsn)
    wait_until(
        lambda: all(scalar(dsn, "SELECT pgq.job_status(%s)", (j,)) == "succeeded" for j in jobs.values()),
        60,
        "the re-delivered jobs to succeed",
    )
    assert second.terminate() == 0
    effects = execute(dsn, "SELECT job_id, step, delivery FROM step_effects ORDER BY job_id, step, delivery")
    for ep, job in jobs.items():
        mine = [(step, delivery) for j, step, delivery in effects if j == job]
        if ep == "steps_tx":
            # The killed transaction took the first step's row and its record with it: the
            # step ran again, and its effect exists once.
            assert mine == [("charge", 2), ("ship", 2)], ep
        else:
            assert mine == [("charge", 1), ("ship", 2)], ep
        story = scalar(dsn, "SELECT pgq.job(%s)", (job,))
        assert [(s["name"], s["delivery"]) for s in story["steps"]] == mine, ep
        charged = 2 if ep == "steps_tx" else 1
        assert story["result"] == {
            "charged": {"step": "charge", "delivery": charged},
            "shipped": {"step": "ship", "delivery": 2},
        }, ep
    assert sorted(events(ledger, "between")) == sorted([(j, d) for j in jobs.values() for d in (1, 2)])
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("DROP TABLE step_effects")


def test_progress_reports_reach_the_job_and_its_waiters(dsn: str, spawn) -> None:
    """job.progress from async and sync handlers: stored on the job (pgq.job, the last report
    stands after it finished) and seen by Client.wait(on_progress=...) in order, ending with
    the last. (Fencing and bad input: tests/sql/progress.sql.)"""
    import pgq

    with pgq.Client(dsn) as client:
        jobs = {ep: client.enqueue(ep) for ep in ("progress_async", "progress_sync")}
        worker = spawn()
        for ep, job in jobs.items():
            seen: list[dict] = []
            outcome = client.wait(job, timeout=60, on_progress=seen.append)
            assert outcome.status == "succeeded", ep
            assert seen, ep
            last = 1 if ep == "progress_async" else 3
            assert seen[-1] == {"value": last, "note": "3 of 3", "delivery": 1}, ep
            values = [r["value"] for r in seen]
            assert values == sorted(values), ep
            print(f"{ep}: {len(seen)} reports seen by wait")
            stored = client.job(job)["progress"]
            assert (stored["value"], stored["note"]) == (seen[-1]["value"], "3 of 3"), ep
        assert worker.terminate() == 0


def test_a_dependent_job_reads_its_dependencies_results(dsn: str, spawn) -> None:
    """job.dependency_results() in sync and async handlers, and Client.dependency_results."""
    import pgq

    with pgq.Client(dsn) as client:
        parts = [client.enqueue("fan_part", {"n": n}) for n in (1, 2, 3)]
        merges = [client.enqueue(ep, depends_on=parts) for ep in ("fan_merge", "fan_merge_async")]
        worker = spawn()
        assert client.wait(merges[0], timeout=60).result == {"sum": 6}
        assert client.wait(merges[1], timeout=60).result == {"ids": sorted(parts), "sum": 6}
        assert worker.terminate() == 0
        rows = client.dependency_results(merges[0])
        assert [(r.id, r.status, r.result) for r in rows] == [
            (p, "succeeded", {"n": n}) for p, n in zip(parts, (1, 2, 3), strict=True)
        ]
