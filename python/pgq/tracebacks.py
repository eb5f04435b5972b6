"""Python tracebacks as an operator reads them: the exception first, the user's frames
shown, pgq's and Python's own frames collapsed (as River UI and Sentry do).

The worker stores a failed handler's whole `traceback.format_exc()` as the job's error:
collapsing is a matter of display, so nothing that could matter (a bug inside pgq, a
frame of a library the handler called) is lost, and the errors that 0.1 and 0.2 workers
stored read the same way. The dashboard, `pgq job` and the worker's log all shape errors
here. Standard library only: the CLI and the worker import it.

An error that is not a traceback (`timeout: ran longer than ...`, a handler's own text)
passes through unchanged: `headline` is its first line, `segments` its lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HEADER = "Traceback (most recent call last):"
_FRAME = re.compile(r'^  File "(?P<path>[^"]*)", line (?P<line>\d+), in (?P<name>.*)$')
# A frame's source and caret lines are indented deeper than its `File` line.
_FRAME_BODY = re.compile(r"^    ")
# Python's own modules (any install layout), installed packages, frozen modules, and pgq.
_STDLIB = re.compile(
    r"(?:[/\\]lib[/\\]python\d+(?:\.\d+)?|[/\\]Python\d+[/\\]Lib)[/\\](?P<rest>.*)$", re.IGNORECASE
)
_PACKAGES = re.compile(r"[/\\](?:site|dist)-packages[/\\](?P<rest>.*)$")
_PGQ = re.compile(r"(?:^|[/\\])pgq[/\\](?:[\w.]+[/\\])*[\w.]+\.py$")
_FROZEN = re.compile(r"^<frozen (?P<module>[\w.]+)>$")


@dataclass(frozen=True)
class Frame:
    path: str
    line: int
    name: str
    text: tuple[str, ...]  # the `File ...` line and the source lines under it, as written
    library: str | None  # the package of a library frame ("pgq", "asyncio"), None: the user's


@dataclass(frozen=True)
class Segment:
    """A piece of an error to show: lines as they are, or a run of library frames to
    collapse (`frames` > 0) with `label` naming how many and whose."""

    lines: tuple[str, ...]
    frames: int = 0
    label: str = ""

    @property
    def collapsed(self) -> bool:
        return self.frames > 0


def library_of(path: str) -> str | None:
    """The package a frame's file belongs to when it is not the user's code: 'pgq', a
    module of Python's ('asyncio', 'concurrent.futures', 'threading'), an installed
    package ('psycopg'); None for the user's own file."""
    frozen = _FROZEN.match(path)
    if frozen:
        return frozen.group("module").split(".")[0]
    if _PGQ.search(path):
        return "pgq"
    packages = _PACKAGES.search(path)
    if packages:
        return re.split(r"[/\\]", packages.group("rest"))[0].removesuffix(".py")
    stdlib = _STDLIB.search(path)
    if stdlib:
        parts = re.split(r"[/\\]", stdlib.group("rest"))
        return ".".join(parts[:-1]) if len(parts) > 1 else parts[0].removesuffix(".py")
    return None


def _parse(text: str) -> list[str | Frame]:
    """The error's lines, with each frame (its `File` line and source lines) as one Frame."""
    lines = text.splitlines()
    out: list[str | Frame] = []
    i = 0
    while i < len(lines):
        m = _FRAME.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        j = i + 1
        while j < len(lines) and _FRAME_BODY.match(lines[j]) and not _FRAME.match(lines[j]):
            j += 1
        path = m.group("path")
        out.append(Frame(path, int(m.group("line")), m.group("name"), tuple(lines[i:j]), library_of(path)))
        i = j
    return out


def is_traceback(text: str | None) -> bool:
    return bool(text) and HEADER in text  # type: ignore[operator]


def headline(text: str | None) -> str:
    """The line to show first: for a traceback, the exception raised last (`ValueError: row
    5: ...`), not `Traceback (most recent call last):`; else the error's first line."""
    if not text:
        return ""
    if not is_traceback(text):
        return next((line.strip() for line in text.splitlines() if line.strip()), "")
    # The last block of a chain is the exception that ended the run; its first line after
    # the frames (not indented) is `Type: message`.
    last = text[text.rindex(HEADER) + len(HEADER) :]
    after_frames = False
    for item in _parse(last):
        if isinstance(item, Frame):
            after_frames = True
        elif after_frames and item.strip() and not item.startswith(" "):
            return item.strip()
    return next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")


def where(text: str | None) -> str | None:
    """The user's innermost frame as `file.py:12 in name` (the basename): where the
    handler's code raised. None when the error is no traceback or has no user frame."""
    if not is_traceback(text):
        return None
    frames = [f for f in _parse(text or "") if isinstance(f, Frame) and f.library is None]
    if not frames:
        return None
    f = frames[-1]
    name = re.split(r"[/\\]", f.path)[-1]
    return f"{name}:{f.line} in {f.name}"


def segments(text: str | None) -> list[Segment]:
    """The error as lines to show, each run of consecutive library frames as one collapsed
    segment. A traceback without any user frame (an error inside pgq itself) is shown
    whole: there is nothing else to look at."""
    if not text:
        return []
    items = _parse(text)
    if not any(isinstance(f, Frame) and f.library is None for f in items):
        return [Segment(tuple(text.splitlines()))]
    out: list[Segment] = []
    plain: list[str] = []
    hidden: list[Frame] = []

    def flush_hidden() -> None:
        if hidden:
            names = list(dict.fromkeys(f.library or "" for f in hidden))
            lines = tuple(line for f in hidden for line in f.text)
            noun = "frame" if len(hidden) == 1 else "frames"
            out.append(Segment(lines, len(hidden), f"{len(hidden)} {noun} of {', '.join(names)}"))
            hidden.clear()

    for item in items:
        if isinstance(item, Frame) and item.library is not None:
            if plain:
                out.append(Segment(tuple(plain)))
                plain = []
            hidden.append(item)
            continue
        flush_hidden()
        plain.extend(item.text if isinstance(item, Frame) else (item,))
    flush_hidden()
    if plain:
        out.append(Segment(tuple(plain)))
    return out


def shorten(text: str | None, full: bool = False) -> str:
    """The error as text with library frames collapsed to one line each (`full`: as
    stored), for a terminal or a log."""
    if not text or full:
        return text or ""
    lines: list[str] = []
    for s in segments(text):
        lines.extend([f"  [... {s.label} hidden]"] if s.collapsed else s.lines)
    return "\n".join(lines)


def summary(text: str | None) -> str:
    """One line for a log or a list: the headline, and where in the user's code it was
    raised when that is known."""
    line = headline(text)
    at = where(text)
    return f"{line} (at {at})" if at else line
