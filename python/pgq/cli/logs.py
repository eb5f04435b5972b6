"""Logging for `pgq worker`: the library configures none; the command sets level and format."""

from __future__ import annotations

import json
import logging
import os
import select
import sys
import threading
import time

# Fields the worker attaches to its per-job lines (Worker._outcome) and to its summaries
# (Worker._summary_loop).
FIELDS = (
    *("job_id", "entrypoint", "attempt", "deliveries", "duration", "outcome"),
    *("succeeded", "failed", "running", "seconds"),
)


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
    """One JSON object per line: time, level, logger, message, and the job's or the
    summary's fields."""

    _encode = json.JSONEncoder(default=str).encode

    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        doc.update({name: getattr(record, name) for name in FIELDS if hasattr(record, name)})
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return self._encode(doc)


class BufferedHandler(logging.Handler):
    """Lines go out in blocks, at most `interval` seconds late; warnings and errors at once.

    With --log-jobs the worker logs a line per job: a write system call per line would cost a
    no-op job a third of its CPU. A daemon thread flushes the block, in writes of whole
    lines of at most PIPE_BUF bytes (atomic on a pipe that several workers share). A crash
    (SIGKILL) loses at most the last `interval` of INFO lines, never a warning."""

    def __init__(self, fd: int, interval: float = 0.2) -> None:
        super().__init__()
        self.fd = fd
        self.interval = interval
        self._lines: list[bytes] = []
        self._size = 0
        threading.Thread(target=self._flusher, name="pgq-log-flush", daemon=True).start()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = (self.format(record) + "\n").encode("utf-8", "backslashreplace")
        except Exception:
            self.handleError(record)
            return
        with self.lock:  # type: ignore[union-attr]
            self._lines.append(line)
            self._size += len(line)
        if record.levelno >= logging.WARNING or self._size >= 1 << 16:
            self.flush()

    def flush(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            lines, self._lines, self._size = self._lines, [], 0
            chunk = b""
            for line in lines:
                if chunk and len(chunk) + len(line) > select.PIPE_BUF:
                    self._write(chunk)
                    chunk = b""
                chunk += line
            if chunk:
                self._write(chunk)

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.fd, view) :]
            except InterruptedError:
                continue
            except OSError:
                return  # stderr is gone: nothing to tell

    def _flusher(self) -> None:
        wait = threading.Event().wait
        while not wait(self.interval):
            if self._lines:
                self.flush()

    def close(self) -> None:
        self.flush()
        super().close()


def configure(level: str, fmt: str, jobs: bool = False) -> None:
    """Send every log record to stderr at `level`, as text or JSON lines. A line per
    settled job only with `jobs` (or at debug); else a job's line only when it failed."""
    # Neither format shows the caller's file and line, and finding them walks the stack for
    # every record (handlers of the application's own then show no file or line either).
    logging._srcfile = None
    try:
        sys.stderr.flush()
        handler: logging.Handler = BufferedHandler(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):  # no file descriptor (embedded, captured)
        handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("pgq").setLevel(level.upper())
    # A line per job costs a no-op job some 40% of its CPU in the worker, and a busy
    # worker's log would hold little else; the worker sums up what it did instead.
    if not jobs and level.lower() != "debug":
        per_job = max(logging.getLevelName(level.upper()), logging.WARNING)
        logging.getLogger("pgq.worker.jobs").setLevel(per_job)
    else:
        logging.getLogger("pgq.worker.jobs").setLevel(logging.NOTSET)  # as pgq's
