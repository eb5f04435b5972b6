"""Logging for `pgq worker`: the library configures none; the command sets level and format."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import select
import stat
import struct
import sys
import termios
import threading
import time

# Fields the worker attaches to its per-job lines (Worker._outcome) and to its summaries
# (Worker._summary_loop).
FIELDS = (
    *("job_id", "entrypoint", "attempt", "deliveries", "reason", "duration", "outcome"),
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
    summary's fields. The time is RFC 3339 with milliseconds and the local offset
    (2026-12-04T16:50:01.123+00:00): a log collector orders and places it without guessing
    the worker's time zone."""

    _encode = json.JSONEncoder(default=str).encode
    _rfc_second = -1
    _rfc_stamp = ""
    _rfc_offset = ""

    def _rfc3339(self, record: logging.LogRecord) -> str:
        # Once per second, as _Formatter: the offset may change only with the second.
        second = int(record.created)
        if second != self._rfc_second:
            local = self.converter(second)
            offset = local.tm_gmtoff or 0
            sign = "-" if offset < 0 else "+"
            hours, minutes = divmod(abs(offset) // 60, 60)
            self._rfc_second = second
            self._rfc_stamp = time.strftime("%Y-%m-%dT%H:%M:%S", local)
            self._rfc_offset = f"{sign}{hours:02d}:{minutes:02d}"
        return f"{self._rfc_stamp}.{int(record.msecs):03d}{self._rfc_offset}"

    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "time": self._rfc3339(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        doc.update({name: getattr(record, name) for name in FIELDS if hasattr(record, name)})
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return self._encode(doc)


# At exit logging.shutdown flushes, then closes: each waits at most this long for a stderr
# nobody reads, so that the log adds at most about a second to a worker's shutdown (bounded
# by its grace period plus about 3 s: a supervisor's stop timeout must not be the one that
# ends it).
_EXIT_WAIT = 0.5


class BufferedHandler(logging.Handler):
    """Lines go out in blocks, at most `interval` seconds late; warnings and errors at once.

    With --log-jobs the worker logs a line per job: a write system call per line would cost a
    no-op job a third of its CPU. A daemon thread flushes the block, in writes of whole
    lines of at most PIPE_BUF bytes (atomic on a pipe that several workers share). A crash
    (SIGKILL) loses at most the last `interval` of INFO lines; a warning wakes the thread
    at once.

    A log call never waits for stderr: a pipe nobody reads (a stalled container runtime, a
    full `| head`) would otherwise stop the event loop, and with it the heartbeats. Only the
    thread writes, and only what stderr can take without blocking; what waits is held up to
    `limit` bytes, and lines beyond that are dropped and counted. Once stderr takes data
    again, a warning says how many were dropped. On a pipe some room is kept for that
    warning, so that even a worker that exits while its pipe is full leaves it there."""

    def __init__(self, fd: int, interval: float = 0.2, limit: int = 1 << 20) -> None:
        super().__init__()
        self.fd = fd
        self.interval = interval
        self.limit = limit
        self._lines: list[bytes] = []
        self._size = 0
        self._dropped = 0
        # _held guards the lines held, for an instant (not the handler's lock, which
        # logging.shutdown holds while it flushes). _writing is held by whoever writes (the
        # thread, or flush() and close()), never by a log call.
        self._held = threading.Lock()
        self._writing = threading.Lock()
        self._closed = False
        self._wake = threading.Event()
        self._pipe = _pipe_size(fd)
        threading.Thread(target=self._flusher, name="pgq-log-flush", daemon=True).start()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = (self.format(record) + "\n").encode("utf-8", "backslashreplace")
        except Exception:
            self.handleError(record)
            return
        with self._held:
            if self._size + len(line) > self.limit:
                self._dropped += 1
                return
            self._lines.append(line)
            self._size += len(line)
        if record.levelno >= logging.WARNING or self._size >= 1 << 16:
            self._wake.set()

    def flush(self, timeout: float = _EXIT_WAIT) -> None:
        """Write what is held, waiting at most `timeout` seconds for stderr to take it."""
        deadline = time.monotonic() + timeout
        if not self._writing.acquire(timeout=timeout):
            return  # the thread is in a write that blocks (a stalled socket or terminal)
        try:
            self._drain_until(deadline)
        finally:
            self._writing.release()

    def _drain_until(self, deadline: float) -> bool:
        while not self._drain():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def _drain(self) -> bool:
        """Write what stderr can take now; whether nothing is left. Caller holds _writing."""
        with self._held:
            lines, self._lines, self._size = self._lines, [], 0
        while lines:
            chunk, n = lines[0], 1
            while n < len(lines) and len(chunk) + len(lines[n]) <= select.PIPE_BUF:
                chunk += lines[n]
                n += 1
            if not self._can_write(len(chunk), self._pipe // 2 - 2 * _PAGE):
                break
            if not self._write(chunk):
                lines = []  # stderr is gone: nothing to tell
                break
            del lines[:n]
        with self._held:
            self._lines[:0] = lines
            self._size += sum(map(len, lines))
            if lines or not self._dropped:
                return not lines
            dropped, self._dropped = self._dropped, 0
        notice = self._notice(dropped)
        if self._can_write(len(notice)) and self._write(notice):
            return True
        with self._held:
            self._dropped += dropped
        return False

    def _notice(self, dropped: int) -> bytes:
        record = logging.LogRecord(
            "pgq.logs",
            logging.WARNING,
            __file__,
            0,
            "%d log lines dropped: stderr did not take them in time",
            (dropped,),
            None,
        )
        try:
            return (self.format(record) + "\n").encode("utf-8", "backslashreplace")
        except Exception:
            return f"{dropped} log lines dropped: stderr did not take them in time\n".encode()

    def _can_write(self, size: int, budget: int | None = None) -> bool:
        """Whether `size` bytes can be written now without blocking, and, on a pipe, with
        no more than `budget` bytes in it (a larger line when it is empty).

        A pipe holds pages, and writes that do not fit in the last page's remainder start a
        new one: its bytes may fill as little as half its pages. Filling at most half the
        pipe's bytes (less two pages, partly read or written) so always leaves a free page
        for the warning of dropped lines. Another process writing to the same pipe may take
        the room first; then a write waits, in the thread only."""
        try:
            if not select.select([], [self.fd], [], 0)[1]:
                return False
        except (OSError, ValueError):
            return True  # let the write report it
        if not self._pipe or budget is None:
            return True
        try:
            queued = struct.unpack("i", fcntl.ioctl(self.fd, termios.FIONREAD, b"\0" * 4))[0]
        except OSError:
            return True
        return queued == 0 or queued + size <= budget

    def _write(self, data: bytes) -> bool:
        """Write `data` whole; False when stderr is gone."""
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.fd, view) :]
            except InterruptedError:
                continue
            except OSError:
                return False
        return True

    def _flusher(self) -> None:
        while not self._closed:
            self._wake.wait(self.interval)
            self._wake.clear()
            if (self._lines or self._dropped) and self._writing.acquire(timeout=self.interval):
                try:
                    if not self._closed:
                        self._drain()
                finally:
                    self._writing.release()

    def close(self) -> None:
        """Flush, giving up after a while: at exit (logging.shutdown), a pipe nobody reads
        must not hold the process. What is still held then is counted and said."""
        self._closed = True
        deadline = time.monotonic() + _EXIT_WAIT
        if self._writing.acquire(timeout=_EXIT_WAIT):
            try:
                if not self._drain_until(deadline):
                    with self._held:
                        self._dropped += len(self._lines)
                        self._lines, self._size = [], 0
                    self._drain()
            finally:
                self._writing.release()
        super().close()


_PAGE = 4096


def _pipe_size(fd: int) -> int:
    """The capacity of the pipe `fd` in bytes, or 0 when it is not a pipe."""
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return 0
        return fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
    except (AttributeError, OSError):  # not Linux
        return 0


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
