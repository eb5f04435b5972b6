"""What the database must show after a scenario: the outcome log of a job (pgq.outcomes)
and its live row (pgq.jobs). Each check raises ScenarioFailed saying what it found."""

from __future__ import annotations

from typing import Any

from .harness import ScenarioFailed


def kinds(outcomes: list[dict[str, Any]]) -> list[str]:
    return [o["outcome"] for o in outcomes]


def expect_outcomes(job_id: int, outcomes: list[dict[str, Any]], expected: list[str]) -> None:
    """The job's outcome rows, in order, are exactly `expected`."""
    found = kinds(outcomes)
    if found != expected:
        raise ScenarioFailed(f"job {job_id}: outcomes {found}, expected {expected}")


def expect_result(job_id: int, outcome: dict[str, Any], value: Any) -> None:
    if outcome["result"] != value:
        raise ScenarioFailed(f"job {job_id}: result {outcome['result']!r}, expected {value!r}")


def expect_deliveries(job_id: int, outcome: dict[str, Any], deliveries: int) -> None:
    if outcome["deliveries"] != deliveries:
        raise ScenarioFailed(
            f"job {job_id}: its {outcome['outcome']} outcome is of delivery {outcome['deliveries']},"
            f" expected {deliveries}"
        )


def expect_errors(job_id: int, outcomes: list[dict[str, Any]]) -> None:
    """Every failed run says why."""
    for o in outcomes:
        if o["outcome"] == "failed" and not (o["error"] or "").strip():
            raise ScenarioFailed(f"job {job_id}: a failed run of delivery {o['deliveries']} has no error")


def expect_live(job: dict[str, Any] | None, job_id: int, status: str) -> dict[str, Any]:
    if job is None or job["status"] != status:
        raise ScenarioFailed(f"job {job_id}: {None if job is None else job['status']}, expected {status}")
    return job
