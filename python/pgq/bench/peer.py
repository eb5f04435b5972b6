"""`pgq bench`'s peer: PgQueuer, from PyPI, in its own virtualenv (.bench/pgqueuer-venv).

PgQueuer's console script is also named `pgq`, so it never goes into the project's venv.
It is driven by bench/pgqueuer_worker.py and bench/pgqueuer_client.py, run by that venv's
python; its schema is installed with its own CLI.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .db import (
    BenchError,
    Processes,
    Server,
    bench_dir,
    execute,
    last_line,
    note,
    progress,
    settle,
    to_url,
    wait_for,
)
from .drain import Probes, measure_drain, sampled_cpu
from .scenarios.latency import latency_summary

PACKAGES = ["pgqueuer", "asyncpg", "uvloop"]

PEER_PROBES = Probes(
    started=(
        "SELECT EXISTS (SELECT 1 FROM pgqueuer WHERE status = 'picked')"
        " OR EXISTS (SELECT 1 FROM pgqueuer_log WHERE status = 'successful')"
    ),
    busy=(
        "SELECT EXISTS (SELECT 1 FROM pgqueuer WHERE entrypoint = 'bench' AND status = 'queued')"
        " OR EXISTS (SELECT 1 FROM pgqueuer WHERE status = 'picked')"
    ),
    finished="SELECT count(*), NULL::timestamptz, max(created) FROM pgqueuer_log WHERE status = 'successful'",
    completed="SELECT n_tup_del FROM pg_stat_user_tables WHERE relname = 'pgqueuer'",
)


class PeerUnavailable(Exception):
    pass


class Peer:
    """The PgQueuer installation under .bench/pgqueuer-venv."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.venv = server.out_dir / "pgqueuer-venv"
        self.python = self.venv / "bin" / "python"
        self.version = ""

    def install(self) -> str:
        """Create the venv if needed and install the latest PgQueuer; returns its version."""
        log = self.server.log_dir / "pgqueuer-install.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        steps = []
        if not self.python.exists():
            steps.append([sys.executable, "-m", "venv", str(self.venv)])
        steps.append([str(self.python), "-m", "pip", "install", "-q", "--upgrade", *PACKAGES])
        note("peer: installing the latest PgQueuer into " + str(self.venv))
        with log.open("w") as out:
            for argv in steps:
                try:
                    rc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=600).returncode
                except (OSError, subprocess.TimeoutExpired) as exc:
                    rc, out_text = 1, str(exc)
                    out.write(out_text)
                if rc != 0 and not self._importable():
                    raise PeerUnavailable(f"cannot install PgQueuer ({' '.join(argv[:4])}...): see {log}")
        if not self._importable():
            raise PeerUnavailable(f"PgQueuer does not import after installing: see {log}")
        self.version = subprocess.run(
            [str(self.python), "-c", "import pgqueuer; print(pgqueuer.__version__)"],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.strip()
        return self.version

    def _importable(self) -> bool:
        if not self.python.exists():
            return False
        probe = "import pgqueuer, asyncpg, uvloop"
        return (
            subprocess.run([str(self.python), "-c", probe], capture_output=True, timeout=60).returncode == 0
        )

    # --- helpers ------------------------------------------------------------------------

    def script(self, name: str) -> str:
        return str(bench_dir() / name)

    def install_schema(self, dsn: str) -> None:
        cli = self.venv / "bin" / "pgq"  # PgQueuer's own CLI
        proc = subprocess.run(
            [str(cli), "--pg-dsn", dsn, "install"], capture_output=True, text=True, timeout=120
        )
        if proc.returncode != 0:
            raise BenchError(f"PgQueuer's install failed: {last_line(proc.stdout + proc.stderr)}")

    def client(self, *args: str, timeout: float) -> dict[str, Any]:
        proc = subprocess.run(
            [str(self.python), self.script("pgqueuer_client.py"), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if proc.returncode != 0:
            raise BenchError(f"pgqueuer_client.py {args[0]} failed: {last_line(proc.stderr)}")
        result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
        return result

    def fill(self, dsn: str, jobs: int, label: str) -> None:
        argv = [
            str(self.python),
            self.script("pgqueuer_client.py"),
            "fill",
            "--dsn",
            dsn,
            "--jobs",
            str(jobs),
        ]
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
            assert proc.stderr is not None
            with progress(jobs, label) as bar:
                shown = 0
                for line in proc.stderr:
                    if line.startswith("progress "):
                        done = int(line.split()[1])
                        bar.update(done - shown)
                        shown = done
            if proc.wait(timeout=600) != 0:
                raise BenchError("pgqueuer_client.py fill failed")

    def worker_argv(self, dsn: str, batch_size: int, managers: int, ledger: Path | None = None) -> list[str]:
        argv = [
            str(self.python),
            self.script("pgqueuer_worker.py"),
            "--dsn",
            dsn,
            "--uvloop",
            "--wait-for-go",
        ]
        argv += ["--batch-size", str(batch_size), "--managers", str(managers)]
        if ledger is not None:
            argv += ["--ledger", str(ledger)]
        return argv

    # --- scenarios ----------------------------------------------------------------------

    def drain(
        self, name: str, *, jobs: int, processes: int, managers: int, batch_size: int, timeout: float
    ) -> dict[str, Any]:
        """Drain `jobs` pre-enqueued jobs. The worker processes connect, then all start
        dequeuing on SIGUSR1; the clock starts at the first pick (seen by 10 ms polls)."""
        with self.server.database(name, pgq=False) as libpq_dsn:
            dsn = to_url(libpq_dsn)
            self.install_schema(dsn)
            self.fill(dsn, jobs, f"{name}: enqueuing")
            settle(dsn, "pgqueuer")
            with Processes(self.server.log_dir, name) as procs:
                procs.start(self.worker_argv(dsn, batch_size, managers), count=processes)
                wait_for("PgQueuer workers", lambda: procs.all_printed("ready"), timeout=60)
                result = measure_drain(
                    dsn,
                    jobs,
                    PEER_PROBES,
                    procs,
                    release=lambda: procs.signal_all(signal.SIGUSR1),
                    timeout=timeout,
                    label=f"{name}: draining",
                )
        return {**result, "processes": processes, "managers": managers, "batch_size": batch_size}

    def tune(self, *, trial_jobs: int, timeout: float) -> list[dict[str, Any]]:
        """Drain trial_jobs with a few (processes, managers per process, batch size); the
        fastest is the configuration the comparison uses."""
        trials = []
        settings = [(2, 1, 10), (2, 1, 100), (2, 2, 100), (2, 2, 200), (2, 2, 500), (4, 1, 100)]
        for processes, managers, batch in settings:
            r = self.drain(
                f"peer_tune_{processes}x{managers}x{batch}",
                jobs=trial_jobs,
                processes=processes,
                managers=managers,
                batch_size=batch,
                timeout=timeout,
            )
            trials.append(r)
            rate = r["jobs_per_s"]
            note(f"peer: {processes} processes x {managers} managers, batch {batch}: {rate:.0f} jobs/s")
        return trials

    @contextlib.contextmanager
    def enqueue_database(self) -> Iterator[str]:
        with self.server.database("peer_enqueue", pgq=False) as libpq_dsn:
            dsn = to_url(libpq_dsn)
            self.install_schema(dsn)
            yield dsn

    def enqueue_case(self, dsn: str, key: str, connections: int, per_call: int, *, seconds: int) -> float:
        """jobs/s through Queries.enqueue: one job per call, or lists of per_call."""
        execute(dsn, "TRUNCATE pgqueuer, pgqueuer_log", "CHECKPOINT")
        note(f"peer enqueue: {key}, {seconds} s")
        r = self.client(
            *("enqueue", "--dsn", dsn, "--connections", str(connections)),
            *("--per-call", str(per_call), "--seconds", str(seconds)),
            timeout=seconds + 120,
        )
        return round(float(r["jobs_per_s"]), 1)

    def latency(self, *, seconds: int, rate: float, batch_size: int) -> dict[str, Any]:
        ledger = self.server.log_dir / "peer-latency-ledger.txt"
        ledger.parent.mkdir(parents=True, exist_ok=True)
        ledger.write_text("")
        with self.server.database("peer_latency", pgq=False) as libpq_dsn:
            dsn = to_url(libpq_dsn)
            self.install_schema(dsn)
            with Processes(self.server.log_dir, "peer_latency") as procs:
                procs.start(self.worker_argv(dsn, batch_size, 1, ledger))
                wait_for("the PgQueuer worker", lambda: procs.all_printed("ready"), timeout=60)
                procs.signal_all(signal.SIGUSR1)
                # Ready when a first job has run; then let the worker go idle.
                probe = self.client("latency", "--dsn", dsn, "--rate", "1", "--seconds", "1", timeout=60)
                first = set(probe["committed"])
                wait_for("the PgQueuer worker", lambda: _ledger_has(ledger, first, procs), timeout=60)
                time.sleep(1.0)
                note(f"peer latency: {rate:.0f} jobs/s for {seconds} s")
                # The worker and every backend (the producer's too, sampled while it runs), as
                # for pgq.
                with sampled_cpu(libpq_dsn, lambda: [p.pid for p in procs.procs]) as cpu:
                    r = self.client(
                        *("latency", "--dsn", dsn, "--rate", str(rate), "--seconds", str(seconds)),
                        timeout=seconds + 120,
                    )
                    committed = {int(k): float(v) for k, v in r["committed"].items()}
                    wait_for(
                        "PgQueuer's handlers",
                        lambda: _ledger_has(ledger, {str(k) for k in committed}, procs),
                        timeout=30,
                        interval=0.1,
                    )
                    cpu_use = cpu.result(len(committed))
        started = {}
        for line in ledger.read_text().splitlines():
            job_id, when = line.split()
            started.setdefault(int(job_id), float(when))
        return {**latency_summary(committed, started, rate), "batch_size": batch_size, "cpu": cpu_use}


def _ledger_has(path: Path, ids: set[str], procs: Processes) -> bool:
    procs.check_alive()
    seen = {line.split()[0] for line in path.read_text().splitlines() if line.strip()}
    return ids <= seen
