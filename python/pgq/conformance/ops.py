"""The handler contract of the conformance suite: what a worker under test does with each
payload. A worker implements it in a dozen lines (handlers.py for `pgq worker`,
examples/node/worker.js for Node.js); docs/protocol.md specifies it.

Every job of the suite has a JSON object payload with an `op`:
- {"op": "result", "value": V}: return V (the job's result; null when absent).
- {"op": "fail", "times": N, "value": V}: fail (an error) on the job's first N deliveries
  (`deliveries` <= N), then return V.
- {"op": "sleep", "seconds": S, "value": V}: wait S seconds, then return V. The wait must
  stop when the worker stops the handler (a cancel, a timeout).
- {"op": "snooze", "seconds": S, "times": N, "value": V}: snooze for S seconds on the first
  N deliveries, then return V.
"""

from __future__ import annotations

from typing import Any


def result(value: Any) -> dict[str, Any]:
    return {"op": "result", "value": value}


def fail(times: int, value: Any = None) -> dict[str, Any]:
    return {"op": "fail", "times": times, "value": value}


def sleep(seconds: float, value: Any = None) -> dict[str, Any]:
    return {"op": "sleep", "seconds": seconds, "value": value}


def snooze(seconds: float, times: int, value: Any = None) -> dict[str, Any]:
    return {"op": "snooze", "seconds": seconds, "times": times, "value": value}
