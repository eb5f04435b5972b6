"""The worker protocol's settling calls, administration and periodic jobs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, TypeAlias

from ..rows import Rerun
from .call import Call, check_aware, id_list, json_param, named_args

IntervalArg: TypeAlias = "timedelta | str | None"


# --- worker protocol -------------------------------------------------------------------------


def complete(
    worker_id: Any, job_ids: Iterable[int], results: Sequence[Any] | None, deliveries: Sequence[int] | None
) -> Call:
    args, params = named_args(
        {"worker_id": ("uuid", worker_id), "job_ids": ("bigint[]", id_list("job_ids", job_ids))},
        {
            "results": ("jsonb[]", None if results is None else [json_param(r) for r in results]),
            "deliveries": ("integer[]", None if deliveries is None else list(deliveries)),
        },
    )
    return Call(
        f"SELECT id FROM pgq.complete({args}) AS id",
        params,
        shape="column",
        convert=lambda ids: [int(i) for i in ids],
    )


def fail(worker_id: Any, job_id: int, error: str, retry_in: timedelta | None, delivery: int | None) -> Call:
    args, params = named_args(
        {"worker_id": ("uuid", worker_id), "job_id": ("bigint", job_id), "error": ("text", error)},
        {"retry_in": ("interval", retry_in), "delivery": ("integer", delivery)},
    )
    return Call(f"SELECT pgq.fail({args})", params)


def snooze(worker_id: Any, job_id: int, delay: timedelta, delivery: int | None) -> Call:
    args, params = named_args(
        {"worker_id": ("uuid", worker_id), "job_id": ("bigint", job_id), "delay": ("interval", delay)},
        {"delivery": ("integer", delivery)},
    )
    return Call(f"SELECT pgq.snooze({args})", params)


def confirm_cancel(worker_id: Any, job_id: int, delivery: int | None) -> Call:
    args, params = named_args(
        {"worker_id": ("uuid", worker_id), "job_id": ("bigint", job_id)},
        {"delivery": ("integer", delivery)},
    )
    return Call(f"SELECT pgq.confirm_cancel({args})", params)


# --- administration --------------------------------------------------------------------------


def cancel(job_ids: int | Iterable[int]) -> Call:
    return Call("SELECT pgq.cancel(job_ids => %s::bigint[])", (id_list("job_ids", job_ids),), convert=int)


def retry(job_ids: int | Iterable[int]) -> Call:
    return Call("SELECT pgq.retry(job_ids => %s::bigint[])", (id_list("job_ids", job_ids),), convert=int)


def forget_steps(job_ids: int | Iterable[int]) -> Call:
    return Call(
        "SELECT pgq.forget_steps(job_ids => %s::bigint[])", (id_list("job_ids", job_ids),), convert=int
    )


def rerun(job_ids: int | Iterable[int]) -> Call:
    return Call(
        "SELECT * FROM pgq.rerun(job_ids => %s::bigint[])",
        (id_list("job_ids", job_ids),),
        shape="rows",
        row_class=Rerun,
    )


def pause(entrypoint: str, create_new: bool | None = None) -> Call:
    args, params = named_args({"entrypoint": ("text", entrypoint)}, {"create_new": ("boolean", create_new)})
    return Call(f"SELECT pgq.pause({args})", params, shape="none")


def resume(entrypoint: str) -> Call:
    return Call("SELECT pgq.resume(entrypoint => %s::text)", (entrypoint,), shape="none")


def isolate(entrypoint: str) -> Call:
    return Call("SELECT pgq.isolate(entrypoint => %s::text)", (entrypoint,), convert=int)


def unisolate(entrypoint: str) -> Call:
    return Call("SELECT pgq.unisolate(entrypoint => %s::text)", (entrypoint,), convert=int)


def configure(
    entrypoint: str,
    *,
    max_attempts: int | None,
    backoff_base: IntervalArg,
    backoff_max: IntervalArg,
    lease: IntervalArg,
    timeout: IntervalArg,
    concurrency: int | None,
    rate: Decimal | float | None,
    retention: IntervalArg,
    max_deliveries: int | None,
    key_concurrency: int | None = None,
    max_snoozes: int | None = None,
    create_new: bool | None = None,
) -> Call:
    intervals = {
        "backoff_base": backoff_base,
        "backoff_max": backoff_max,
        "lease": lease,
        "timeout": timeout,
        "retention": retention,
    }
    args, params = named_args(
        {
            "entrypoint": ("text", entrypoint),
            "max_attempts": ("integer", max_attempts),
            **{name: ("interval", value) for name, value in intervals.items()},
            "concurrency": ("integer", concurrency),
            "rate": ("numeric", rate),
        },
        {
            "max_deliveries": ("integer", max_deliveries),
            "key_concurrency": ("integer", key_concurrency),
            "max_snoozes": ("integer", max_snoozes),
            "create_new": ("boolean", create_new),
        },
    )
    checks = tuple((name, value) for name, value in intervals.items() if isinstance(value, str))
    return Call(f"SELECT pgq.configure({args})", params, shape="none", intervals=checks)


def reap() -> Call:
    return Call("SELECT pgq.reap()", convert=int)


def prune() -> Call:
    return Call("SELECT pgq.prune()", convert=int)


# --- periodic jobs ---------------------------------------------------------------------------


def schedule(name: str, cron: str, entrypoint: str, payload: Any) -> Call:
    query = (
        "SELECT pgq.schedule(name => %(name)s::text, cron => %(cron)s::text,"
        " entrypoint => %(entrypoint)s::text, payload => %(payload)s::jsonb)"
    )
    return Call(query, {"name": name, "cron": cron, "entrypoint": entrypoint, "payload": json_param(payload)})


def unschedule(name: str) -> Call:
    return Call("SELECT pgq.unschedule(name => %s::text)", (name,), convert=bool)


def run_schedules(now: datetime | None) -> Call:
    if now is not None:
        check_aware("now", now)
    return Call("SELECT pgq.run_schedules(now => %s::timestamptz)", (now,), convert=int)
