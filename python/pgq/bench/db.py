"""`pgq bench` plumbing: throwaway databases, pgbench, worker processes and the drain timer.

Everything here is bounded in time: every wait has a deadline, every process we start is
stopped (SIGTERM, then SIGKILL) by its own pid.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import click
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from .. import migrate

PGBENCH_DEFAULT = "/usr/lib/postgresql/15/bin/pgbench"


class BenchError(Exception):
    """A scenario could not run; the message says why."""


def repo_root() -> Path:
    """The source tree `pgq bench` runs from (bench/ holds the scripts it needs)."""
    return Path(__file__).resolve().parents[3]


def bench_dir() -> Path:
    path = repo_root() / "bench"
    if not (path / "raw_cycle.sql").is_file():
        raise BenchError(f"{path} is missing: run `pgq bench` from a source checkout of pgq")
    return path


def pgbench_path() -> str:
    if os.access(PGBENCH_DEFAULT, os.X_OK):
        return PGBENCH_DEFAULT
    found = shutil.which("pgbench")
    if not found:
        raise BenchError("pgbench not found (Debian package postgresql-15)")
    return found


def progress(length: int, label: str) -> Any:
    """A click progress bar on stderr (stdout stays for the results)."""
    return click.progressbar(length=length, label=label, file=sys.stderr, show_pos=True)


def note(text: str) -> None:
    click.echo(text, err=True)


# --- databases --------------------------------------------------------------------------


@dataclass
class Server:
    """The cluster under test, reached through its maintenance database."""

    admin_dsn: str
    out_dir: Path  # .bench: PgQueuer's virtualenv
    log_dir: Path  # worker and pgbench logs, latency ledgers
    prefix: str = "bench_"
    created: list[str] = field(default_factory=list)

    def dsn(self, dbname: str) -> str:
        return make_conninfo(self.admin_dsn, dbname=dbname)

    def admin(self, *statements: sql.Composable | str) -> None:
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)

    @contextlib.contextmanager
    def database(self, name: str, *, pgq: bool = True) -> Iterator[str]:
        """A fresh database `bench_<name>` (pgq installed unless pgq=False), dropped after."""
        dbname = self.prefix + name
        ident = sql.Identifier(dbname)
        self.admin(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident),
            sql.SQL("CREATE DATABASE {}").format(ident),
        )
        dsn = self.dsn(dbname)
        try:
            if pgq:
                migrate.install(dsn, cron=False)
            yield dsn
        finally:
            self.admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))

    def settings(self) -> dict[str, str]:
        names = ["server_version", "fsync", "synchronous_commit", "shared_buffers", "max_wal_size"]
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            return {
                n: conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(n))).fetchone()[0] for n in names
            }


def to_url(dsn: str) -> str:
    """A libpq DSN as a postgresql:// URL (asyncpg, which PgQueuer uses, takes only URLs)."""
    params = {k: str(v) for k, v in conninfo_to_dict(dsn).items() if v is not None}
    user = quote(params.pop("user", ""), safe="")
    password = params.pop("password", None)
    auth = f"{user}:{quote(password, safe='')}@" if password else (f"{user}@" if user else "")
    host = params.pop("host", "")
    port = params.pop("port", "")
    netloc = auth + (f"[{host}]" if ":" in host else quote(host, safe="")) + (f":{port}" if port else "")
    path = "/" + quote(params.pop("dbname", ""), safe="")
    return f"postgresql://{netloc}{path}" + (f"?{urlencode(params)}" if params else "")


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def execute(dsn: str, *statements: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
    """Run statements in autocommit mode; returns the last one's rows."""
    rows: list[tuple[Any, ...]] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in statements:
            cur = conn.execute(statement, params)
            rows = cur.fetchall() if cur.description else []
    return rows


def settle(dsn: str, table: str) -> None:
    """VACUUM ANALYZE the queue table and CHECKPOINT, so every run starts from the same state."""
    execute(dsn, f"VACUUM (ANALYZE) {table}", "CHECKPOINT")


# --- pgbench ----------------------------------------------------------------------------


def pgbench(
    dsn: str,
    script: Path,
    *,
    clients: int,
    seconds: int,
    defines: dict[str, Any] | None = None,
    log: Path | None = None,
) -> dict[str, float]:
    """Run a custom pgbench script (-n, -M prepared); returns tps and transactions."""
    threads = min(clients, os.cpu_count() or 1)
    argv = [pgbench_path(), "-n", "-M", "prepared", "-c", str(clients), "-j", str(threads)]
    argv += ["-T", str(max(1, seconds)), "-f", str(script)]
    for key, value in (defines or {}).items():
        argv += ["-D", f"{key}={value}"]
    argv.append(dsn)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 120, check=False)
    if log is not None:
        log.write_text(" ".join(argv) + "\n" + proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise BenchError(f"pgbench failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    tps = re.search(r"^tps = ([\d.]+)", proc.stdout, re.M)
    done = re.search(r"number of transactions actually processed: (\d+)", proc.stdout)
    if not tps or not done:
        raise BenchError(f"cannot read pgbench's output: {proc.stdout[-500:]}")
    return {"tps": float(tps.group(1)), "transactions": int(done.group(1))}


# --- processes --------------------------------------------------------------------------


class Processes:
    """Worker processes we started; stopped by pid with SIGTERM, then SIGKILL."""

    def __init__(self, log_dir: Path, name: str) -> None:
        self.log_dir = log_dir
        self.name = name
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []

    def start(self, argv: Sequence[str], env: dict[str, str] | None = None, count: int = 1) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for _ in range(count):
            path = self.log_dir / f"{self.name}-{len(self.procs)}.log"
            with path.open("wb") as out:
                proc = subprocess.Popen(
                    list(argv),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, **(env or {})},
                    cwd=repo_root(),
                )
            self.procs.append(proc)
            self.logs.append(path)

    def signal_all(self, sig: signal.Signals) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(sig)

    def all_printed(self, marker: str) -> bool:
        self.check_alive()
        return all(marker in path.read_text(errors="replace") for path in self.logs)

    def check_alive(self) -> None:
        for proc, path in zip(self.procs, self.logs, strict=True):
            if proc.poll() is not None:
                tail = path.read_text(errors="replace")[-1500:]
                raise BenchError(f"a worker exited early (code {proc.returncode}); {path}:\n{tail}")

    def stop(self, timeout: float = 30.0) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)

    def __enter__(self) -> Processes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_for(what: str, check: Callable[[], bool], timeout: float, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
