"""Jinja2 filters: durations, counts and times as short text."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from jinja2 import Environment

from .. import tracebacks

NONE = "\N{EN DASH}"


def duration(value: timedelta | float | None) -> str:
    if value is None:
        return NONE
    s = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if s < 1:
        return f"{s * 1000:.0f} ms" if s >= 0.001 else f"{s * 1e6:.0f} µs"
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{s / 60:.0f} min"
    if s < 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


def count(value: Any) -> str:
    """An int, or a Count from queries (estimated ones are marked ≈)."""
    if value is None:
        return NONE
    n = getattr(value, "value", value)
    if not getattr(value, "estimated", False):
        return f"{n:,}"
    floor = getattr(value, "floor", 0)
    # The planner's guess is below what was counted: say only what is known.
    return f"> {floor:,}" if n <= floor else f"≈{n:,}"


def ago(value: datetime | None) -> str:
    if value is None:
        return NONE
    delta = datetime.now(timezone.utc) - value
    if delta.total_seconds() < 0:
        return "in " + duration(-delta)
    return duration(delta) + " ago"


def stamp(value: datetime | None) -> str:
    if value is None:
        return NONE
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def setting_text(value: Any) -> str:
    """A setting as the edit form shows it and pgq.configure reads it back ('30 seconds',
    '7 days'); '' for no value (no limit)."""
    if value is None:
        return ""
    if not isinstance(value, timedelta):
        return str(value)
    s = value.total_seconds()
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if s >= size and s % size == 0:
            return f"{s / size:.0f} {unit}"
    return f"{s:g} seconds"


def register_filters(env: Environment) -> None:
    env.filters.update(
        duration=duration,
        count=count,
        ago=ago,
        stamp=stamp,
        headline=tracebacks.headline,
        segments=tracebacks.segments,
        is_traceback=tracebacks.is_traceback,
        setting=setting_text,
    )
