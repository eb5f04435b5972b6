"""A rolling upgrade with real worker processes: workers of a released version keep running
while `pgq upgrade` (this code) upgrades their database under them, beside workers of this
release, and every job settles exactly once.

For each frozen release (tests/fixtures/pgq-VERSION.sql), the database starts at that
release's schema and the old workers run that release's own Python code:
tests/fixtures/pgq-VERSION-python.tar.xz (its python/pgq, written by `make freeze VERSION=...
COMMIT=...`; CI clones may be shallow, so the code travels as a file), or this checkout for
the release being prepared (pgq.__version__). A fixture without code fails: it never skips.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import tarfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

import pgq
from pgq import scripts
from support.workers import ledger_lines, listeners, scalar, wait_until
from test_migrations import make_db  # noqa: F401
from test_upgrade import PSQL, restore

# tests/py, the directory that holds the package `support` (the old workers' PYTHONPATH).
TESTS_PY = Path(__file__).resolve().parents[1]
ROOT = TESTS_PY.parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
RELEASES = sorted(FIXTURES.glob("pgq-*.sql"))
# Generous: the machine may be shared and slow; a stuck queue waits for a lease (minutes).
DRAIN = float(os.environ.get("UPG_DRAIN", "120"))
# A worker's log after a clean run and stop never says these.
TROUBLE = ("Traceback", "Error", "error", "ERROR", "WARNING", "exception", "CRITICAL")


def release_code(version: str, into: Path) -> Path:
    """The directory to put on PYTHONPATH for the pgq of `version`."""
    archive = FIXTURES / f"pgq-{version}-python.tar.xz"
    if archive.exists():
        with tarfile.open(archive) as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(into, filter="data")
            else:  # Python before 3.10.12 / 3.11.4: the archive is our own
                tar.extractall(into)
        return into / "python"
    assert version == pgq.__version__, (
        f"tests/fixtures/pgq-{version}.sql has no code to run its workers: freeze it with"
        f" `make freeze VERSION={version} COMMIT=<the commit {version} was released from>`"
    )
    return ROOT / "python"


class Worker:
    """A `pgq worker support.upgrade_app:worker` process running the pgq found in `code`."""

    def __init__(self, dsn: str, code: Path, ledger: Path, label: str) -> None:
        self.label = label
        self.log_path = ledger / f"{label}.out"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(code), str(TESTS_PY)]),
            "LEDGER_DIR": str(ledger),
            "PYTHONUNBUFFERED": "1",
        }
        with open(self.log_path, "w") as out:
            # cwd: the ledger, so that no pgq of the checkout's directory is imported instead.
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pgq", "worker", "support.upgrade_app:worker", "--dsn", dsn],
                env=env,
                cwd=ledger,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.ledger = ledger

    def release(self) -> str:
        """The version and file of the pgq this process imported."""
        path = self.ledger / f"{self.proc.pid}.release"
        wait_until(path.exists, 60, f"{self.label} to start")
        return path.read_text().strip()

    def runs(self) -> list[tuple[int, int, float]]:
        path = self.ledger / f"{self.proc.pid}.log"
        if not path.exists():
            return []
        return [
            (int(p[0]), int(p[1]), float(p[4])) for p in (ln.split() for ln in path.read_text().splitlines())
        ]

    def log(self) -> str:
        return self.log_path.read_text()

    def stop(self) -> int:
        assert self.proc.poll() is None, f"{self.label} exited ({self.proc.returncode}):\n{self.log()}"
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def enqueue(dsn: str, n: int, **payload: object) -> list[int]:
    """n jobs of `roll` through pgq.enqueue_batch, whose call shape 0.1.0 has too."""
    with psycopg.connect(dsn, autocommit=True) as c:
        rows = c.execute(
            "SELECT pgq.enqueue_batch('roll', array_fill(%s::jsonb, ARRAY[%s]))", (Jsonb(payload), n)
        ).fetchall()
    return [r[0] for r in rows]


def drained(dsn: str, jobs: list[int], workers: list[Worker]) -> None:
    """Wait until every job of `jobs` succeeded; say which worker died if one did."""

    def done() -> bool:
        for w in workers:
            assert w.proc.poll() is None, f"{w.label} exited ({w.proc.returncode}):\n{w.log()}"
        return scalar(dsn, "SELECT count(*) FROM pgq._jobs WHERE id = ANY(%s)", (jobs,)) == 0

    try:
        wait_until(done, DRAIN, f"{len(jobs)} jobs to settle", interval=0.2)
    except AssertionError as exc:
        left = scalar(
            dsn,
            "SELECT jsonb_agg(to_jsonb(j) - 'payload' - 'headers')"
            " FROM (SELECT * FROM pgq.jobs WHERE id = ANY(%s) ORDER BY id LIMIT 5) AS j",
            (jobs,),
        )
        logs = "\n".join(f"{w.label}:\n{w.log()}" for w in workers)
        raise AssertionError(f"{exc}; left: {left}\n{logs}") from None


# Each frozen release upgraded by `pgq upgrade`; the extension's first release by ALTER
# EXTENSION pgq UPDATE (its files written by `pgq sql extension`).
UPGRADES = [pytest.param(p, "cli", id=p.stem) for p in RELEASES] + [
    pytest.param(
        FIXTURES / f"pgq-{scripts.BASE_RELEASE}.sql", "extension", id=f"extension-{scripts.BASE_RELEASE}"
    )
]


def _install_release(db: str, fixture: Path, how: str) -> None:
    if how == "cli":
        restore(db, fixture)
        scalar(db, "SELECT pgq._ensure_partitions()")
        return
    share = scalar(db, "SELECT setting FROM pg_catalog.pg_config WHERE name = 'SHAREDIR'")
    scripts.write_extension(Path(share) / "extension")
    version = fixture.stem.removeprefix("pgq-")
    with psycopg.connect(db, autocommit=True) as c:
        c.execute(f"CREATE EXTENSION pgq VERSION '{version}'")
        c.execute("SELECT pgq.prune()")  # the first sweep: the daily outcome partitions


def _upgrade(db: str, how: str) -> subprocess.CompletedProcess[str]:
    if how == "cli":
        command = [sys.executable, "-m", "pgq", "upgrade", "--dsn", db, "--no-cron"]
    else:
        command = [PSQL, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", db, "-c", "ALTER EXTENSION pgq UPDATE"]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize(("fixture", "how"), UPGRADES)
def test_workers_of_a_release_drain_through_the_upgrade(
    make_db,  # noqa: F811
    fixture: Path,
    how: str,
    tmp_path: Path,
) -> None:
    version = fixture.stem.removeprefix("pgq-")
    db = make_db()
    _install_release(db, fixture, how)
    old_code = release_code(version, tmp_path / "code")
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    workers: list[Worker] = []
    try:
        old = [Worker(db, old_code, ledger, f"old-{version}-{i}") for i in range(2)]
        workers += old
        for w in old:
            assert w.release() == f"{version} {old_code / 'pgq' / '__init__.py'}", w.log()
        wait_until(lambda: listeners(db) == 2, 60, "the old workers to listen")

        # A job held across the upgrade: running on an old worker when the upgrade commits.
        gate = tmp_path / "gate"
        held = enqueue(db, 1, gate=str(gate))
        wait_until(
            lambda: scalar(db, "SELECT status FROM pgq.jobs WHERE id = %s", (held[0],)) == "running",
            60,
            "the held job to start",
        )
        before = enqueue(db, 300)
        started = time.monotonic()
        upgraded = _upgrade(db, how)
        upgraded_at = time.time()
        print(
            f"{fixture.stem}: pgq upgrade took {time.monotonic() - started:.2f} s: {upgraded.stdout.strip()}"
        )
        assert upgraded.returncode == 0, upgraded.stderr
        assert scalar(db, "SELECT pgq.version()") == pgq.__version__
        assert scalar(db, "SELECT status FROM pgq.jobs WHERE id = %s", (held[0],)) == "running"
        gate.touch()  # the held job ends now, on the upgraded schema

        # The old workers alone, on the upgraded schema: they claim, complete and heartbeat.
        after = enqueue(db, 300)
        drained(db, held + before + after, workers)
        claimed_after = [r for w in old for r in w.runs() if r[0] in set(after)]
        assert len(claimed_after) == len(after), "the old workers ran every job enqueued after the upgrade"

        # A worker of this release beside them.
        new = Worker(db, ROOT / "python", ledger, f"new-{pgq.__version__}")
        workers.append(new)
        assert new.release().startswith(f"{pgq.__version__} "), new.log()
        wait_until(lambda: listeners(db) == 3, 60, "the new worker to listen")
        beside = enqueue(db, 300)
        drained(db, beside, workers)

        # The old workers are retired (a clean SIGTERM), the new one drains the rest.
        for w in old:
            assert w.stop() == 0, w.log()
        workers[:] = [new]  # drained() checks that the running ones are alive
        last = enqueue(db, 100)
        drained(db, last, workers)
        assert new.stop() == 0, new.log()
    finally:
        for w in workers:
            w.kill()

    jobs = held + before + after + beside + last
    runs = ledger_lines(ledger)
    ran = Counter(job for job, *_ in runs)
    assert sorted(ran) == sorted(jobs) and set(ran.values()) == {1}, "every job ran exactly once"
    assert {deliveries for _, deliveries, *_ in runs} == {1}, "no job was delivered twice"
    # Each release's workers get the attempt they were written for: a first run is attempt 0
    # for 0.1.0 and 0.2.0 (pgq.claim and its protocol => 2), attempt 1 from 0.3.0 on.
    first_run = "a0" if version_key(version) < (0, 3) else "a1"
    attempts = {
        (w.label, event)
        for w in [*old, new]
        for path in [ledger / f"{w.proc.pid}.log"]
        if path.exists()
        for _, _, _, event, _ in (ln.split() for ln in path.read_text().splitlines())
    }
    assert attempts == {*((w.label, first_run) for w in old if w.runs()), (new.label, "a1")}, attempts
    with psycopg.connect(db, autocommit=True) as c:
        outcomes = Counter(
            r[0]
            for r in c.execute(
                "SELECT job_id FROM pgq._outcomes WHERE outcome = 'succeeded' AND job_id = ANY(%s)", (jobs,)
            )
        )
        assert c.execute("SELECT count(*) FROM pgq._jobs").fetchone()[0] == 0
    assert sorted(outcomes) == sorted(jobs) and set(outcomes.values()) == {1}, "every job succeeded once"
    old_after = sum(1 for w in old for job, _, t in w.runs() if t > upgraded_at)
    print(
        f"{fixture.stem}: {len(jobs)} jobs; old workers ran {sum(len(w.runs()) for w in old)}"
        f" ({old_after} finished after the upgrade), the new one {len(new.runs())}"
    )
    for w in [*old, new]:
        log = w.log()
        assert not [t for t in TROUBLE if t in log], f"{w.label}'s log:\n{log}"


# --- the release being prepared is frozen --------------------------------------------------------


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def test_this_releases_schema_is_its_frozen_fixture(make_db) -> None:  # noqa: F811
    """While pgq.__version__ has a fixture, a fresh install is exactly that fixture: a
    schema change must come with a new version (and, at its release, a fixture of its own),
    or, while the version is unreleased, with the fixture regenerated."""
    from pgq import migrate
    from pgq.resources import migrations
    from test_migrations import schema_diff, schema_dump

    fixture = FIXTURES / f"pgq-{pgq.__version__}.sql"
    frozen = [p.stem.removeprefix("pgq-") for p in RELEASES]
    if not fixture.exists():
        # A version in the making: every frozen release is older than it.
        assert all(version_key(v) < version_key(pgq.__version__) for v in frozen), frozen
        return
    restored, fresh = make_db(), make_db()
    migrate.install(fresh, cron=False)
    restore(restored, fixture)
    scalar(restored, "SELECT pgq._ensure_partitions()")
    hint = (
        f"the schema differs from tests/fixtures/pgq-{pgq.__version__}.sql, frozen for pgq"
        f" {pgq.__version__}: bump the version and freeze the fixture (make freeze VERSION=<new>),"
        f" or, while {pgq.__version__} is unreleased, regenerate its fixture (make freeze"
        f" VERSION={pgq.__version__})"
    )
    with psycopg.connect(restored, autocommit=True) as c:
        applied = [r[0] for r in c.execute("SELECT version FROM pgq._migrations ORDER BY version")]
    assert applied == [m.version for m in migrations()], hint

    # The fixture is dumped --no-owner (a restore must not need pgq's roles to own it).
    def owned(dump: list[str]) -> list[str]:
        return [line for line in dump if not (line.startswith("ALTER ") and " OWNER TO " in line)]

    expected, got = owned(schema_dump(fresh)), owned(schema_dump(restored))
    assert got == expected, f"{hint}\n" + "\n".join(schema_diff(expected, got).splitlines()[:80])


# --- the upgrade's locks and the workers' ------------------------------------------------------

# A worker's transaction that holds a lock on one table and then needs another, as a claim
# or a completion does: (what it holds, what it then reads).
INTERLEAVINGS = {
    "jobs_then_queues": ("UPDATE pgq._jobs SET priority = priority WHERE false", "SELECT * FROM pgq.queues"),
    "workers_view_then_queues_view": ("SELECT count(*) FROM pgq.workers", "SELECT count(*) FROM pgq.queues"),
    "workers_then_jobs": (
        "UPDATE pgq._workers SET name = name WHERE false",
        "SELECT count(*) FROM pgq._jobs",
    ),
}


def lock_waiters(conn: psycopg.Connection, but: int) -> int:
    return conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> %s"
        " AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'",
        (but,),
    ).fetchone()[0]


@pytest.mark.parametrize("interleaving", sorted(INTERLEAVINGS))
@pytest.mark.parametrize("start", ["pgq-0.1.0", "current"])
def test_an_upgrade_never_deadlocks_with_a_worker(
    make_db,  # noqa: F811
    start: str,
    interleaving: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The upgrade waits while a worker's transaction holds a table; the worker then needs
    another table. Both must go through: the upgrade gives way and tries again, the worker
    never sees an error. (Taking its locks statement by statement, the upgrade held one table
    while it waited for the worker's, and the worker waited for it: "deadlock detected".)"""
    from concurrent.futures import ThreadPoolExecutor

    from pgq import migrate

    caplog.set_level(logging.INFO, logger="pgq.migrate")
    db = make_db()
    if start == "current":
        migrate.install(db, cron=False)  # an upgrade with no migration re-creates triggers and views
    else:
        restore(db, FIXTURES / f"{start}.sql")
        scalar(db, "SELECT pgq._ensure_partitions()")
    holds, then = INTERLEAVINGS[interleaving]
    with psycopg.connect(db) as worker, psycopg.connect(db, autocommit=True) as watch:
        worker.execute(holds)
        pid = worker.info.backend_pid
        with ThreadPoolExecutor(1) as pool:
            upgrade = pool.submit(migrate.upgrade, db, cron=False)
            wait_until(lambda: lock_waiters(watch, pid) > 0, 60, "the upgrade to wait for the worker")
            worker.execute(then).fetchall()
            worker.commit()
            done = upgrade.result(timeout=120)
    assert done[-1].startswith("pgq schema is at version"), done
    assert scalar(db, "SELECT pgq.version()") == pgq.__version__
    if interleaving == "workers_then_jobs":  # it held _jobs when the worker wanted it: it gave way
        assert "trying again" in caplog.text


# --- call shapes of every frozen release ----------------------------------------------------------

PUBLIC_FUNCTIONS = """
SELECT p.proname, pg_get_function_identity_arguments(p.oid), p.pronargs, p.pronargdefaults,
       pg_get_function_result(p.oid)
FROM pg_proc AS p WHERE p.pronamespace = 'pgq'::regnamespace AND p.proname !~ '^_'
"""
VIEW_COLUMNS = """
SELECT c.relname, array_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod) ORDER BY a.attnum)
FROM pg_class AS c JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.relnamespace = 'pgq'::regnamespace AND c.relkind = 'v' AND c.relname !~ '^_'
GROUP BY c.relname
"""


@pytest.mark.parametrize("fixture", RELEASES, ids=lambda p: p.stem)
def test_every_call_of_a_release_returns_what_it_returned(make_db, fixture: Path) -> None:  # noqa: F811
    """Each public function of a frozen release, called as that release called it (its
    arguments, named or positional), resolves to exactly one function today, which returns
    the same result type; each public view still has the release's columns, first and in
    order (views only gain columns, at the end)."""
    from pgq import migrate

    old, now = make_db(), make_db()
    migrate.install(now, cron=False)
    restore(old, fixture)
    with psycopg.connect(old) as o, psycopg.connect(now) as n:
        then_functions, now_functions = (
            o.execute(PUBLIC_FUNCTIONS).fetchall(),
            n.execute(PUBLIC_FUNCTIONS).fetchall(),
        )
        then_views, now_views = (
            dict(o.execute(VIEW_COLUMNS).fetchall()),
            dict(n.execute(VIEW_COLUMNS).fetchall()),
        )
    assert then_functions and then_views
    changed = []
    for name, args, _, _, result in then_functions:
        shape = args.split(", ") if args else []
        # Today's functions the same call resolves to: the same leading arguments, the
        # rest with defaults.
        resolves = [
            r
            for r in now_functions
            if r[0] == name
            and (r[1].split(", ") if r[1] else [])[: len(shape)] == shape
            and r[2] - len(shape) <= r[3]
        ]
        if len(resolves) != 1 or resolves[0][4] != result:
            changed.append(f"pgq.{name}({args}) returned {result}, now {[r[4] for r in resolves]}")
    for view, columns in then_views.items():
        if now_views.get(view, [])[: len(columns)] != columns:
            changed.append(f"pgq.{view} had {columns}, now {now_views.get(view)}")
    assert not changed, "\n".join(changed)


# --- columns a later release adds ------------------------------------------------------------

# The worker's claim (pgq.claim_v3) and the views as a later release might return them: a
# column added first and one added last. The copy of the real claim keeps its body.
LATER_VIEWS = ("jobs", "outcomes", "queues", "schedules", "workers")


def add_columns_everywhere(c: psycopg.Connection) -> None:
    source = c.execute(
        "SELECT pg_get_functiondef('pgq.claim_v3(uuid, text[], integer)'::regprocedure)"
    ).fetchone()[0]
    c.execute(
        source.replace("FUNCTION pgq.claim_v3(", "FUNCTION pgq.claim_v3_now(").replace(
            "claim_v3.", "claim_v3_now."
        )
    )
    c.execute("DROP FUNCTION pgq.claim_v3(uuid, text[], integer) CASCADE")
    c.execute(
        """
        CREATE FUNCTION pgq.claim_v3(worker_id uuid, entrypoints text[], batch_size integer DEFAULT 1)
        RETURNS TABLE (
            first_new text, id bigint, entrypoint text, payload jsonb, headers jsonb, priority integer,
            attempt integer, deliveries integer, enqueued_at timestamptz, run_at timestamptz,
            max_attempts integer, timeout interval, concurrency_key text, reason text, last_new jsonb
        )
        LANGUAGE sql VOLATILE
        AS $$ SELECT 'new', c.*, '{"new": true}'::jsonb FROM pgq.claim_v3_now($1, $2, $3) AS c $$
        """
    )
    for view in LATER_VIEWS:
        c.execute(f"ALTER VIEW pgq.{view} RENAME TO {view}_now")
        c.execute(
            f"CREATE VIEW pgq.{view} AS"
            f" SELECT 1 AS first_new, v.*, now() AS last_new FROM pgq.{view}_now AS v"
        )


def test_this_releases_worker_and_client_read_only_the_columns_they_know(
    make_db,  # noqa: F811
    tmp_path: Path,
) -> None:
    from pgq import migrate

    db = make_db()
    migrate.install(db, cron=False)
    with psycopg.connect(db, autocommit=True) as c:
        add_columns_everywhere(c)
        c.execute("SELECT pgq.schedule('later', '0 0 1 1 *', 'roll')")
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    worker = Worker(db, ROOT / "python", ledger, "current")
    try:
        jobs = enqueue(db, 20)
        drained(db, jobs, [worker])
        with pgq.Client(db) as client:
            assert sorted(r.job_id for r in client.outcomes(entrypoint="roll", outcome="succeeded")) == jobs
            assert [w.entrypoints for w in client.workers()] == [["roll"]]
            assert [s.name for s in client.schedules()] == ["later"]
            gate = tmp_path / "gate"
            held = enqueue(db, 1, gate=str(gate))
            wait_until(lambda: client.jobs(status="running"), 60, "the gated job to run")
            assert [j.id for j in client.jobs(status="running")] == held
            assert [(q.entrypoint, q.running) for q in client.queues()] == [("roll", 1)]
            gate.touch()
            drained(db, held, [worker])
            jobs += held
        assert worker.stop() == 0, worker.log()
    finally:
        worker.kill()
    assert sorted(job for job, *_ in ledger_lines(ledger)) == jobs
    assert not [t for t in TROUBLE if t in worker.log()], worker.log()


# --- a call of the old release under way while the upgrade commits -----------------------------


def test_old_calls_waiting_for_the_upgrade_run_on_the_new_schema(
    make_db,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """0.1.0's claim, heartbeat, complete and fail, called while the upgrade holds its locks
    (held there by the test, after its migrations), wait for it; then each runs its 0.1.0
    body against the new tables and must succeed. They failed on a column the upgrade
    dropped (complete: _jobs.has_dependents, which stopped a 0.1.0 worker's completions for
    good) and on an internal function whose arguments changed (heartbeat: pgq._sweep())."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from pgq import migrate
    from test_upgrade import OLD_CLAIM, OLD_COMPLETE, OLD_FAIL, OLD_HEARTBEAT, OLD_REGISTER

    db = make_db()
    restore(db, FIXTURES / "pgq-0.1.0.sql")
    scalar(db, "SELECT pgq._ensure_partitions()")
    sessions = [psycopg.connect(db, autocommit=True) for _ in range(4)]
    try:
        w = sessions[0]
        worker = w.execute(OLD_REGISTER, ("old", ["old"])).fetchone()[0]
        first, second, third = (scalar(db, "SELECT pgq.enqueue('old', '{}')") for _ in range(3))
        held = [r[0] for r in w.execute(OLD_CLAIM, (worker, ["old"], 2)).fetchall()]
        assert held == [first, second]
        # Each call once in its session before, so its plans are cached as a worker's are.
        w.execute(OLD_HEARTBEAT, (worker,)).fetchall()

        holding, go_on = threading.Event(), threading.Event()
        apply_code = migrate._apply_code

        def held_apply_code(conn: psycopg.Connection, *args: Any) -> None:
            holding.set()
            assert go_on.wait(60)
            apply_code(conn, *args)

        monkeypatch.setattr(migrate, "_apply_code", held_apply_code)
        calls = {
            "heartbeat": (sessions[0], OLD_HEARTBEAT, (worker,)),
            "complete": (sessions[1], OLD_COMPLETE, (worker, [first])),
            "fail": (sessions[2], OLD_FAIL, (worker, second, "boom")),
            "claim": (sessions[3], OLD_CLAIM, (worker, ["old"], 1)),
        }
        with ThreadPoolExecutor(1 + len(calls)) as pool, psycopg.connect(db, autocommit=True) as watch:
            upgrade = pool.submit(migrate.upgrade, db, cron=False)
            assert holding.wait(60)
            results = {
                name: pool.submit(lambda c=c, q=q, p=p: c.execute(q, p).fetchall())
                for name, (c, q, p) in calls.items()
            }
            wait_until(
                lambda: (
                    watch.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                        " AND wait_event_type = 'Lock'"
                    ).fetchone()[0]
                    == len(calls)
                ),
                60,
                "the old calls to wait for the upgrade",
            )
            go_on.set()
            upgrade.result(timeout=120)
            got = {name: r.result(timeout=60) for name, r in results.items()}
        assert got["complete"] == [(first,)]
        assert got["fail"] == [("queued",)]
        assert [r[0] for r in got["claim"]] == [third]
        assert got["heartbeat"] == []
    finally:
        for s in sessions:
            s.close()
