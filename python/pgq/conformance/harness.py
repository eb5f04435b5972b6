"""What the scenarios act with: the worker processes under test, the database, waiting.

Workers are started as `/bin/sh -c "exec CMD"` in a session of their own, so that a signal
to the process group reaches a wrapper's children too (npm, a virtualenv's script)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

T = TypeVar("T")


def url_dsn(dsn: str) -> str:
    """The DSN as a postgresql:// URL, the form every driver reads (node-postgres reads no
    key=value DSN): the worker under test gets this one in PGQ_DSN."""
    if dsn.startswith(("postgresql://", "postgres://")):
        return dsn
    params = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    user = quote(params.pop("user", ""), safe="")
    password = params.pop("password", None)
    auth = f"{user}:{quote(password, safe='')}@" if password else (f"{user}@" if user else "")
    host = params.pop("host", "")
    netloc = f"[{host}]" if ":" in host else quote(host, safe="")
    port = params.pop("port", None)
    dbname = quote(params.pop("dbname", ""), safe="")
    query = f"?{urlencode(params)}" if params else ""
    return f"postgresql://{auth}{netloc}{':' + port if port else ''}/{dbname}{query}"


class ScenarioFailed(Exception):
    """A scenario's expectation did not hold; the message says which."""


@dataclass
class WorkerProcess:
    label: str
    proc: subprocess.Popen[bytes]
    log: Path
    stopped: bool = False  # the suite sent SIGTERM or SIGKILL: an exit is expected

    def signal(self, sig: signal.Signals) -> None:
        if sig in (signal.SIGTERM, signal.SIGKILL):
            self.stopped = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def wait(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def tail(self, lines: int = 15) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(f"    {line}" for line in text[-lines:])


@dataclass
class Harness:
    dsn: str
    cmd: str
    run_id: str
    workdir: Path
    lease: float
    workers: list[WorkerProcess] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # Per scenario thread: the workers whose exit fails the scenario at once (its own, and
    # the shared one for a shared scenario).
    _local: threading.local = field(default_factory=threading.local)

    def watch(self, workers: list[WorkerProcess]) -> None:
        self._local.workers = list(workers)

    def entrypoint(self, scenario: str) -> str:
        return f"conformance_{self.run_id}_{scenario}"

    def connect(self) -> psycopg.Connection[dict[str, Any]]:
        return psycopg.connect(self.dsn, autocommit=True, row_factory=dict_row)

    def one(self, query: str, params: tuple[Any, ...] = ()) -> Any:
        with self.connect() as conn:
            row = conn.execute(query, params).fetchone()
        return None if row is None else next(iter(row.values()))

    def rows(self, query: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with self.connect() as conn:
            return conn.execute(query, params).fetchall()

    def configure(self, entrypoint: str, **settings: str | int) -> None:
        """pgq.configure with named arguments (values as SQL literals' text)."""
        named = ", ".join(f"{name} => %s" for name in settings)
        self.one(f"SELECT pgq.configure(%s, {named})", (entrypoint, *settings.values()))

    def enqueue(self, entrypoint: str, payload: dict[str, Any], run_at_in: float | None = None) -> int:
        if run_at_in is None:
            return int(self.one("SELECT pgq.enqueue(%s, %s)", (entrypoint, Jsonb(payload))))
        return int(
            self.one(
                "SELECT pgq.enqueue(%s, %s, run_at => now() + make_interval(secs => %s))",
                (entrypoint, Jsonb(payload), run_at_in),
            )
        )

    def job(self, job_id: int) -> dict[str, Any] | None:
        rows = self.rows("SELECT * FROM pgq.jobs WHERE id = %s", (job_id,))
        return rows[0] if rows else None

    def status(self, job_id: int) -> str | None:
        return self.one("SELECT pgq.job_status(%s)", (job_id,))

    def outcomes(self, job_id: int) -> list[dict[str, Any]]:
        return self.rows(
            "SELECT outcome, attempt, deliveries, worker_id, error, result, started_at, finished_at"
            " FROM pgq.outcomes WHERE job_id = %s ORDER BY finished_at, outcome",
            (job_id,),
        )

    def start_worker(self, label: str, entrypoints: list[str]) -> WorkerProcess:
        log = self.workdir / f"worker-{label}-{len(self.workers)}.log"
        env = {**os.environ, "PGQ_DSN": url_dsn(self.dsn), "PGQ_ENTRYPOINTS": ",".join(entrypoints)}
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                ["/bin/sh", "-c", f"exec {self.cmd}"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        worker = WorkerProcess(label, proc, log)
        with self._lock:
            self.workers.append(worker)
        if hasattr(self._local, "workers"):
            self._local.workers.append(worker)
        return worker

    def wait_for(self, what: str, timeout: float, check: Callable[[], T], every: float = 0.1) -> T:
        """Poll check() until it returns something true; ScenarioFailed after timeout s."""
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            for worker in getattr(self._local, "workers", []):
                code = worker.proc.poll()
                if code is not None and not worker.stopped:
                    raise ScenarioFailed(
                        f"{what}: worker {worker.label} exited ({code}) on its own; log: {worker.log}"
                    )
            if time.monotonic() > deadline:
                raise ScenarioFailed(f"{what}: not seen within {timeout:.0f} s")
            time.sleep(every)

    def running_on(self, job_id: int, timeout: float) -> Any:
        """The worker id holding the job once it runs."""

        def held() -> Any:
            job = self.job(job_id)
            return job["worker_id"] if job and job["status"] == "running" else None

        return self.wait_for(f"job {job_id} claimed", timeout, held)

    def settled(self, job_id: int, status: str, timeout: float) -> None:
        """Wait for the job's status; another final one fails at once."""

        def reached() -> bool:
            now = self.status(job_id)
            if now != status and now in ("succeeded", "canceled", "dead"):
                raise ScenarioFailed(f"job {job_id} is {now}, expected {status}")
            return now == status

        try:
            self.wait_for(f"job {job_id} {status}", timeout, reached)
        except ScenarioFailed as exc:
            if "not seen" not in str(exc):
                raise
            raise ScenarioFailed(f"{exc} (it is {self.status(job_id)})") from None

    def stop_all(self) -> None:
        for worker in self.workers:
            if worker.proc.poll() is None:
                worker.signal(signal.SIGCONT)
                worker.signal(signal.SIGKILL)
                worker.wait(10)
