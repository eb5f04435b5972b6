"""The executor's timer (pgq.worker.executor.within) in a run whose task is not recorded
yet: under an eager task factory (Python 3.12's asyncio.eager_task_factory, on a loop of
the user's own) a run's first step runs inside create_task, before Claimer._start sets
run.task."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from pgq.worker.executor import Handler, Run, Timeout, within


def _unrecorded(fn) -> Run:
    run = Run(SimpleNamespace(id=1, deliveries=1), Handler(fn, True, False))  # type: ignore[arg-type]
    assert run.task is None
    return run


def test_a_handler_returns_through_the_timer_of_an_unrecorded_task() -> None:
    async def handler() -> int:
        await asyncio.sleep(0)
        return 7

    async def main() -> int:
        return await within(_unrecorded(handler), handler(), 5.0)

    assert asyncio.run(main()) == 7


def test_the_timer_of_an_unrecorded_task_still_times_out() -> None:
    async def handler() -> None:
        await asyncio.sleep(10)

    async def main() -> None:
        await within(_unrecorded(handler), handler(), 0.05)

    with pytest.raises(Timeout):
        asyncio.run(main())
