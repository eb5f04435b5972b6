"""What the `pgq` commands share: the --dsn option, error handling, and plain-text output
(durations, times, aligned tables) that stays readable when piped."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Collection, Sequence
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import click
import psycopg
from rich import box
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from ..client import Client
from ..errors import PgqError

dsn_option = click.option(
    "--dsn",
    envvar="PGQ_DSN",
    default=None,
    help="libpq connection string (default: $PGQ_DSN, then PG* variables).",
)


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """One clear line and a non-zero exit on failure; the traceback only with --debug."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (PgqError, psycopg.Error, ValueError, TimeoutError, FileNotFoundError, RuntimeError) as exc:
            if click.get_current_context().find_root().params.get("debug"):
                raise
            click.echo(f"error: {one_line(exc)}", err=True)
            sys.exit(1)

    return wrapper


def one_line(exc: BaseException) -> str:
    """The error as one line: a database error's primary message and hint, without the
    LINE/caret context psycopg appends."""
    text = str(exc)
    if isinstance(exc, psycopg.Error) and exc.diag.message_primary:
        text = exc.diag.message_primary
        if exc.diag.message_hint:
            text = f"{text} (hint: {exc.diag.message_hint})"
    return " ".join(text.split())


def make_client(dsn: str | None) -> Client:
    return Client(dsn, min_size=1, max_size=1)


# --- values --------------------------------------------------------------------------------


def duration(td: timedelta | None) -> str:
    """A short human duration: 4.2s, 3m05s, 2h10m00s, 7d00h00m."""
    if td is None:
        return "-"
    secs = td.total_seconds()
    if secs < 0:
        return "-" + duration(-td)
    if secs < 60:
        return f"{secs:.0f}s" if secs == int(secs) or secs >= 10 else f"{secs:.1f}s"
    minutes, sec = divmod(int(secs), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours:02d}h{minutes:02d}m"
    if hours:
        return f"{hours}h{minutes:02d}m{sec:02d}s"
    return f"{minutes}m{sec:02d}s"


def latency(td: timedelta | None) -> str:
    """A duration with sub-second precision, for percentiles: 0.42ms, 37ms, 1.25s, 3m05s."""
    if td is None:
        return "-"
    secs = td.total_seconds()
    if secs < 0.01:
        return f"{secs * 1000:.2f}ms"
    if secs < 1:
        return f"{secs * 1000:.0f}ms"
    if secs < 60:
        return f"{secs:.2f}s"
    return duration(td)


def number(value: Decimal | float | None) -> str:
    """A decimal without trailing zeros: 12, 0.5, 0.333."""
    if value is None:
        return "-"
    text = f"{Decimal(value):.3f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def job_count(value: int, approximate: bool = False) -> int | str:
    """A job count of pgq.queues: exact as is; in a row with estimated counts, those above
    100 (an estimate is always above its exact share, at least 100) as ~150, ~12k, ~1.0M."""
    if not approximate or value <= 100:
        return value
    if value < 10_000:
        return f"~{value:,}"
    if value < 1_000_000:
        return f"~{value / 1000:.0f}k"
    return f"~{value / 1_000_000:.1f}M"


def per_second(value: Decimal | None) -> str | None:
    """A rate limit: 5/s; None for no limit."""
    return None if value is None else f"{number(value)}/s"


def relative(when: datetime | None) -> str:
    if when is None:
        return "-"
    delta = when - datetime.now(timezone.utc)
    if abs(delta) < timedelta(seconds=1):
        return "now"
    return f"in {duration(delta)}" if delta > timedelta(0) else f"{duration(-delta)} ago"


def utc(when: datetime | None) -> str:
    """A time in UTC to the minute, the resolution of cron: 2030-01-31 09:00Z."""
    if when is None:
        return "-"
    return when.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%MZ")


def short(text: str | None, width: int = 60) -> str | None:
    if text is None:
        return None
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def last_line(text: str | None) -> str | None:
    """The last non-blank line of an error: for a Python traceback, the exception itself."""
    if text is None:
        return None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def plural(n: int, noun: str = "job") -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, timedelta):
        return duration(value)
    return str(value)


# --- tables --------------------------------------------------------------------------------


def build_table(
    title: str,
    headers: Sequence[str],
    rows: Sequence[Sequence[object]],
    right: Collection[str] = (),
    squeeze: Collection[str] = (),
    drop: Sequence[str] = (),
) -> RenderableType:
    """An aligned table, or "TITLE: none". Integer columns and those named in `right` are
    right-aligned. Cells are plain text, never markup.

    The table fits the width it is drawn at (a terminal's, a Live display's; piped output
    is drawn 10000 wide): the columns in `drop` are left out, in that order, while it is too
    wide, then the last columns; the text columns in `squeeze` wrap. Numbers and headers
    are never cut.
    """
    if not rows:
        return Text(f"{title}: none")
    return _FittedTable(title, headers, rows, right, squeeze, drop)


# Between two columns: the right padding of one, the box's divider, the left padding of the
# next (box.SIMPLE_HEAD draws its divider as a blank). Not counting it once made rich cut
# the last column of `pgq status --watch` to one letter.
_GAP = 3


class _FittedTable:
    """A table that picks its columns when rich draws it, from the width it is given."""

    def __init__(
        self,
        title: str,
        headers: Sequence[str],
        rows: Sequence[Sequence[object]],
        right: Collection[str],
        squeeze: Collection[str],
        drop: Sequence[str],
    ) -> None:
        self.title, self.headers, self.rows = title, list(headers), rows
        self.right, self.squeeze, self.drop = right, squeeze, drop
        self.texts = [[cell(value) for value in row] for row in rows]
        widths = [max([len(h)] + [len(row[i]) for row in self.texts]) for i, h in enumerate(headers)]
        self.narrowest = [
            w if h not in squeeze else min(w, max(len(h), 12)) for h, w in zip(headers, widths, strict=True)
        ]

    def columns(self, limit: int | None) -> list[int]:
        """The indexes of the columns kept at this width (None: no limit)."""
        keep = list(range(len(self.headers)))

        def fits() -> bool:
            return limit is None or sum(self.narrowest[i] for i in keep) + _GAP * (len(keep) - 1) <= limit

        for name in self.drop:
            if fits():
                break
            if name in self.headers:
                keep.remove(self.headers.index(name))
        # Still too wide (a very narrow terminal): the last columns go too, whole, rather
        # than rich cutting them to a letter.
        while not fits() and len(keep) > 1:
            keep.pop()
        return keep

    def table(self, limit: int | None) -> Table:
        keep = self.columns(limit)
        table = Table(
            title=Text(self.title),
            title_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
        )
        for i in keep:
            header = self.headers[i]
            values = [row[i] for row in self.rows if row[i] is not None]
            numeric = header in self.right or (bool(values) and all(type(v) is int for v in values))
            fixed = header not in self.squeeze
            table.add_column(
                header,
                justify="right" if numeric else "left",
                min_width=self.narrowest[i],
                no_wrap=fixed,
                overflow="fold",
            )
        for row in self.texts:
            table.add_row(*(Text(row[i]) for i in keep))
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.table(options.max_width)


def show(renderable: RenderableType) -> None:
    """Print to a terminal as rich does; piped or captured, without wrapping at 80 columns
    and without trailing blanks."""
    console = Console()
    if console.is_terminal:
        console.print(renderable)
        return
    console = Console(width=10000, no_color=True)
    with console.capture() as captured:
        console.print(renderable)
    click.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))


def print_table(
    title: str,
    headers: Sequence[str],
    rows: Sequence[Sequence[object]],
    right: Collection[str] = (),
    squeeze: Collection[str] = (),
    drop: Sequence[str] = (),
) -> None:
    show(build_table(title, headers, rows, right, squeeze, drop))


# --- input ---------------------------------------------------------------------------------


def parse_payload(text: str | None) -> Any:
    """PAYLOAD_JSON: JSON text, '-' for stdin, or None (no payload)."""
    if text is None:
        return None
    if text == "-":
        text = sys.stdin.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"PAYLOAD_JSON is not valid JSON: {exc}") from None
