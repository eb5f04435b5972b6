"""A worker whose stderr cannot take its log: logging never stops the worker.

A container runtime that stalls, a `| head` or any pipe nobody reads fills up; a blocking
write there used to hold the log handler's lock and, with it, the event loop. Lines that
cannot be written are dropped and counted, and the log says how many once it can."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest

from pgq.cli.logs import BufferedHandler, JsonFormatter, TextFormatter
from support.workers import APP_SPEC, TESTS_PY, outcome_count, scalar, wait_until


def test_worker_whose_stderr_nobody_reads_completes_every_job_and_stops(dsn: str, tmp_path: Path) -> None:
    scalar(dsn, "SELECT pgq.configure('noop', lease => '3 seconds')")
    scalar(dsn, "SELECT count(*) FROM pgq.enqueue_batch('noop', array_fill('{}'::jsonb, ARRAY[3000]))")
    env = {**os.environ, "PYTHONPATH": str(TESTS_PY), "LEDGER_DIR": str(tmp_path)}
    cmd = [sys.executable, "-m", "pgq", "worker", APP_SPEC, "--dsn", dsn, "--log-jobs"]
    # stderr is a pipe this test does not read until the worker has exited.
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        started = time.monotonic()
        ages: list[float] = []

        def done() -> bool:
            age = scalar(
                dsn,
                "SELECT coalesce(max(extract(epoch FROM heartbeat_age)), 0)::float8"
                " FROM pgq.workers WHERE state = 'alive'",
            )
            ages.append(age)
            return outcome_count(dsn, entrypoint="noop") == 3000

        wait_until(done, 180, "3000 jobs of a worker whose stderr is full", interval=0.5)
        print(f"3000 jobs in {time.monotonic() - started:.1f} s; oldest heartbeat seen {max(ages):.1f} s")
        # The loop keeps beating while idle, its log still stalled.
        before = scalar(dsn, "SELECT max(heartbeat_at) FROM pgq.workers WHERE state = 'alive'")
        wait_until(
            lambda: scalar(dsn, "SELECT max(heartbeat_at) FROM pgq.workers WHERE state = 'alive'") > before,
            30,
            "a heartbeat after the jobs",
        )
        assert (
            scalar(dsn, "SELECT count(*) FROM pgq.outcomes WHERE entrypoint = 'noop' AND deliveries > 1") == 0
        )
        proc.send_signal(signal.SIGTERM)
        stopping = time.monotonic()
        assert proc.wait(timeout=60) == 0
        print(f"exited {time.monotonic() - stopping:.2f} s after SIGTERM")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log = proc.stderr.read().decode()  # type: ignore[union-attr]
    proc.stderr.close()  # type: ignore[union-attr]
    notices = [line for line in log.splitlines() if "log lines dropped" in line]
    assert notices, log[-2000:]
    print(notices[-1])


# The handler on its own, against each kind of stderr that can stop taking data.


def _pipe() -> tuple[int, Callable[[], bytes], Callable[[], None]]:
    r, w = os.pipe()
    fcntl.fcntl(r, fcntl.F_SETFL, os.O_NONBLOCK)

    def read() -> bytes:
        out = b""
        while True:
            try:
                data = os.read(r, 1 << 16)
            except BlockingIOError:
                return out
            if not data:
                return out
            out += data

    return w, read, lambda: (os.close(r), os.close(w))  # type: ignore[func-returns-value]


def _socket() -> tuple[int, Callable[[], bytes], Callable[[], None]]:
    a, b = socket.socketpair()
    b.setblocking(False)

    def read() -> bytes:
        out = b""
        while True:
            try:
                data = b.recv(1 << 16)
            except BlockingIOError:
                return out
            if not data:
                return out
            out += data

    return a.fileno(), read, lambda: (a.close(), b.close())  # type: ignore[func-returns-value]


def _record(i: int, level: int = logging.INFO) -> logging.LogRecord:
    return logging.LogRecord(
        "pgq.worker.jobs", level, __file__, 0, "job %d succeeded " + "x" * 80, (i,), None
    )


@pytest.mark.parametrize("kind", [_pipe, _socket], ids=["pipe", "socket"])
@pytest.mark.parametrize("formatter", [TextFormatter, JsonFormatter], ids=["text", "json"])
def test_handler_never_blocks_on_a_full_stderr_and_says_what_it_dropped(kind, formatter) -> None:
    fd, read, close = kind()
    handler = BufferedHandler(fd, interval=0.01, limit=1 << 16)
    handler.setFormatter(formatter())
    try:
        # Far more than the pipe, the socket's buffers and the handler's own can hold.
        done = threading.Event()

        def log() -> None:
            for i in range(20_000):
                handler.handle(_record(i, logging.WARNING if i % 1000 == 0 else logging.INFO))
            done.set()

        threading.Thread(target=log, daemon=True).start()
        assert done.wait(60), "a log call blocked on the full stderr"
        time.sleep(0.2)  # the flusher has tried again and again
        handler.flush()  # returns although nothing can be written
        # Now a reader takes everything: what was held goes out, then the warning.
        got = bytearray()
        reading = threading.Event()

        def reader() -> None:
            while not reading.is_set():
                got.extend(read())
                time.sleep(0.005)

        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        wait_until(lambda: b"log lines dropped" in got, 30, "the warning")
        handler.flush(timeout=30)
        handler.handle(_record(99_999))
        handler.flush(timeout=30)
        wait_until(lambda: b"job 99999 succeeded" in got, 30, "a line once stderr takes data again")
        reading.set()
        thread.join()
        lines = got.decode().splitlines()
        notices = [line for line in lines if "log lines dropped" in line]
        assert notices and "job 99999 succeeded" in lines[-1], lines[-3:]
        if formatter is JsonFormatter:
            assert all(json.loads(line)["level"] == "WARNING" for line in notices)
        dropped = sum(int(re.search(r"(\d+) log lines dropped", line)[1]) for line in notices)
        written = sum(1 for line in lines if "succeeded" in line) - 1
        print(f"{kind.__name__} {formatter.__name__}: written {written}, dropped {dropped}")
        # Every line is either written whole or counted.
        assert written + dropped == 20_000 and dropped > 0
    finally:
        handler.close()
        close()


def test_handler_close_gives_up_on_a_stderr_nobody_reads() -> None:
    """logging.shutdown at exit flushes: with a stalled pipe it must not hold the process."""
    fd, read, close = _pipe()
    handler = BufferedHandler(fd, interval=0.01)
    handler.setFormatter(TextFormatter())
    try:
        for i in range(5000):
            handler.handle(_record(i))
        started = time.monotonic()
        handler.close()
        print(f"close took {time.monotonic() - started:.2f} s")
        assert time.monotonic() - started < 20
        assert b"log lines dropped" in read()
    finally:
        close()


def test_json_lines_carry_rfc3339_times_with_milliseconds_and_the_offset() -> None:
    """`--log-format json`: a time a log collector can order and place without guessing,
    e.g. 2026-12-04T16:50:01.123+00:00, in the process's time zone (fractional offsets too)."""
    code = (
        "import json, logging, os, time\n"
        "from pgq.cli.logs import JsonFormatter\n"
        "for tz in ('UTC', 'Asia/Kathmandu', 'America/St_Johns'):\n"
        "    os.environ['TZ'] = tz\n"
        "    time.tzset()\n"
        "    f = JsonFormatter()\n"
        "    for created in (time.time(), 1796402401.0071, 1796402401.9996):\n"
        "        r = logging.LogRecord('pgq.worker', logging.INFO, 'x', 0, 'hello', None, None)\n"
        "        r.created, r.msecs = created, int((created - int(created)) * 1000)\n"
        "        print(tz, created, json.loads(f.format(r))['time'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    offsets = set()
    for line in out.splitlines():
        tz, created, stamp = line.split()
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d", stamp), line
        parsed = datetime.fromisoformat(stamp)
        # The instant, to the millisecond (truncated, as logging's msecs).
        assert float(created) * 1000 - 2 <= parsed.timestamp() * 1000 <= float(created) * 1000 + 1, line
        offsets.add((tz, stamp[-6:]))
        print(line)
    assert offsets == {("UTC", "+00:00"), ("Asia/Kathmandu", "+05:45"), ("America/St_Johns", "-03:30")}
