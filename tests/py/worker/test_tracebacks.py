"""Errors an operator can read: the exception first, the user's frames shown, pgq's and
Python's frames collapsed, in the dashboard, `pgq job` and the worker's log; the stored
error stays whole (pgq.tracebacks)."""

from __future__ import annotations

import re
from collections.abc import Callable

import psycopg
from click.testing import CliRunner

from pgq import tracebacks
from pgq.cli.main import main
from pgq.web.app import Config
from support.dashboard_server import request, serve
from support.workers import WorkerProcess, scalar, wait_until

CHAINED = """\
Traceback (most recent call last):
  File "/srv/app/.venv/lib/python3.12/site-packages/pgq/worker.py", line 737, in _in_thread
    return run.handler.fn(job)
           ^^^^^^^^^^^^^^^^^^^
  File "/srv/app/tasks.py", line 9, in load
    rows = fetch(job.payload["url"])
  File "/srv/app/.venv/lib/python3.12/site-packages/httpx/_api.py", line 3, in get
    raise ConnectError("refused")
httpx.ConnectError: refused

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/usr/lib/python3.12/concurrent/futures/thread.py", line 58, in run
    result = self.fn(*self.args, **self.kwargs)
  File "<frozen runpy>", line 88, in _run_code
  File "/srv/app/tasks.py", line 12, in load
    raise RuntimeError("cannot load\\nsecond line of the message")
RuntimeError: cannot load
second line of the message
"""


def test_shapes_of_errors() -> None:
    assert tracebacks.headline(CHAINED) == "RuntimeError: cannot load"
    assert tracebacks.where(CHAINED) == "tasks.py:12 in load"
    short = tracebacks.shorten(CHAINED)
    assert "[... 1 frame of pgq hidden]" in short and "[... 1 frame of httpx hidden]" in short
    assert "[... 2 frames of concurrent.futures, runpy hidden]" in short
    assert 'File "/srv/app/tasks.py", line 9, in load' in short and "direct cause" in short
    assert "site-packages" not in short and short.endswith("second line of the message")
    assert tracebacks.shorten(CHAINED, full=True) == CHAINED
    # Not a traceback: as it is. A traceback of pgq's frames only: whole.
    assert tracebacks.headline("\n timeout: ran longer than 0:00:05\n") == "timeout: ran longer than 0:00:05"
    assert tracebacks.segments("a\nb") == [tracebacks.Segment(("a", "b"))]
    inside = 'Traceback (most recent call last):\n  File "/x/pgq/worker.py", line 1, in f\nKeyError: 1'
    assert tracebacks.shorten(inside) == inside and tracebacks.where(inside) is None
    assert tracebacks.headline(None) == "" and tracebacks.segments(None) == []


def test_a_handlers_traceback_in_the_log_the_cli_and_the_dashboard(
    dsn: str, conn: psycopg.Connection, spawn: Callable[..., WorkerProcess]
) -> None:
    job = conn.execute(
        'SELECT pgq.enqueue(\'bad_row\', \'{"rows": [{"n": 5, "price": "n/a"}]}\', max_attempts => 1)'
    ).fetchone()[0]
    worker = spawn()
    wait_until(lambda: scalar(dsn, "SELECT pgq.job_status(%s)", (job,)) == "dead", 60, "the job to die")
    assert worker.terminate() == 0
    headline = "ValueError: row 5: column 'price' is not a number"
    # Stored whole: the worker's and Python's frames are kept.
    stored = scalar(dsn, "SELECT last_error FROM pgq.jobs WHERE id = %s", (job,))
    assert "executor.py" in stored and "concurrent/futures" in stored and stored.strip().endswith(headline)
    # The log: the exception and where the handler's code raised it.
    assert re.search(
        rf"job {job} \(bad_row\) failed \(dead\).*: {re.escape(headline)}"
        r" \(at worker_app\.py:\d+ in _price\)",
        worker.log(),
    )

    # pgq job: the user's frames, the library's collapsed; --full as stored.
    out = CliRunner().invoke(main, ["job", "--dsn", dsn, str(job)]).output
    assert re.search(r"\[\.\.\. \d frames of pgq, asyncio, concurrent\.futures hidden\]", out), out
    assert "in bad_row" in out and "in _price" in out and "executor.py" not in out
    full = CliRunner().invoke(main, ["job", "--dsn", dsn, str(job), "--full"]).output
    assert "executor.py" in full and "in _price" in full

    with serve(Config(dsn=dsn)) as served:
        # The dead-jobs list: the exception line, not `Traceback (most recent call last):`.
        status, body, _ = request(served.url + "/jobs?status=dead")
        row = re.search(rf"<tr data-id=\"{job}\">.*?</tr>", body, re.S).group(0)
        assert status == 200 and headline.replace("'", "&#39;") in row and "Traceback" not in row
        # The job's page: the exception first, the user's frames, the library's in a <details>.
        status, body, _ = request(f"{served.url}/jobs/{job}")
        assert status == 200
        history = body[body.index('id="history"') :]
        assert history.index(headline.replace("'", "&#39;")) < history.index("Traceback")
        assert re.search(
            r"<details[^>]*><summary>\d frames of pgq, asyncio, concurrent\.futures</summary>", history
        )
        assert "in _price" in history
