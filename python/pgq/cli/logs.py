"""Logging for `pgq worker`: the library configures none; the command sets level and format."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from typing import TextIO

# Fields the worker attaches to its per-job lines (pgq.worker._log_outcome).
JOB_FIELDS = ("job_id", "entrypoint", "attempt", "deliveries", "duration", "outcome")


class _Formatter(logging.Formatter):
    """Formats the time once per second, not once per line (a line per job at INFO)."""

    _second = -1
    _stamp = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        second = int(record.created)
        if second != self._second:
            self._second, self._stamp = (
                second,
                time.strftime(datefmt or self.default_time_format, self.converter(second)),
            )
        return f"{self._stamp},{int(record.msecs):03d}" if datefmt is None else self._stamp


class TextFormatter(_Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")


class JsonFormatter(_Formatter):
    """One JSON object per line: time, level, logger, message, and the job's fields."""

    _encode = json.JSONEncoder(default=str).encode

    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        doc.update({name: getattr(record, name) for name in JOB_FIELDS if hasattr(record, name)})
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return self._encode(doc)


class BufferedHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Lines go out in blocks, at most `interval` seconds late; warnings and errors at once.

    At INFO the worker logs a line per job: a write system call per line would cost a
    no-op job a third of its CPU. A daemon thread flushes the block; a crash (SIGKILL) loses
    at most the last `interval` of INFO lines, never a warning."""

    def __init__(self, stream: TextIO, interval: float = 0.2) -> None:
        super().__init__(stream)
        self.interval = interval
        self._pending = False
        threading.Thread(target=self._flusher, name="pgq-log-flush", daemon=True).start()

    def flush(self) -> None:
        pass  # StreamHandler.emit calls this per record: the flusher thread flushes instead

    def emit(self, record: logging.LogRecord) -> None:
        super().emit(record)
        self._pending = True
        if record.levelno >= logging.WARNING:
            self.flush_now()

    def flush_now(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            self._pending = False
            self.stream.flush()

    def _flusher(self) -> None:
        event = threading.Event()
        while not event.wait(self.interval):
            if self._pending:
                self.flush_now()

    def close(self) -> None:
        self.flush_now()
        super().close()


def configure(level: str, fmt: str) -> None:
    """Send every log record to stderr at `level`, as text or JSON lines."""
    # Neither format shows them, and each costs every record (the caller's file and line
    # most: a walk up the stack).
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging._srcfile = None
    # stderr is line-buffered: a block buffer of its own, flushed by the handler.
    stream = open(  # noqa: SIM115 - for the process's life
        sys.stderr.fileno(),
        "w",
        buffering=1 << 16,
        closefd=False,
        encoding="utf-8",
        errors="backslashreplace",
    )
    handler = BufferedHandler(stream)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("pgq").setLevel(level.upper())
