"""`pgq doctor`: inspect a live installation; one line per problem, each with its fix.

Every check is a function of a connection (autocommit) that returns the problems it found
as (problem, fix) pairs; `diagnose` runs them all. A check that cannot run (e.g. the role
may not read what it needs) is a problem too, so a clean report means "all checked".
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import psycopg

from . import cron as pgcron
from . import roles as pgroles
from ._version import __version__
from .preflight import extension_version, installed_version
from .resources import code_files, migrations


@dataclass(frozen=True)
class Problem:
    check: str
    problem: str
    fix: str

    def __str__(self) -> str:
        return f"{self.check}: {self.problem} -> {self.fix}"


@dataclass(frozen=True)
class Limits:
    """Thresholds of the checks that measure something."""

    max_xact_age: timedelta = timedelta(minutes=5)
    max_dead_tuples: int = 100_000
    dead_tuple_ratio: float = 2.0
    # A due job waiting longer than this: its entrypoint is reported, with the reason.
    max_queue_age: timedelta = timedelta(minutes=5)
    # An index of pgq._jobs larger by this than its live rows need is reported.
    max_index_excess: int = 64 * 1024 * 1024


Found = list[tuple[str, str]]


def _one(conn: psycopg.Connection, query: str, params: tuple = ()) -> object:
    row = conn.execute(query, params or None).fetchone()
    return row[0] if row else None


def check_version(conn: psycopg.Connection, limits: Limits) -> Found:
    version = installed_version(conn)
    if version is None:
        return [("pgq is not installed in this database", "run `pgq install`")]
    latest = migrations()[-1].version
    found: Found = []
    # An extension install is upgraded by ALTER EXTENSION, never by the CLI.
    ext = extension_version(conn)
    mend = (
        "install the new extension files (pgq sql extension DIR), then ALTER EXTENSION pgq UPDATE"
        if ext is not None
        else "run `pgq upgrade`"
    )
    if version < latest:
        found.append((f"schema version {version} is behind the code's {latest}", mend))
    elif version > latest:
        found.append(
            (f"schema version {version} is newer than the code's {latest}", "upgrade the pgq package")
        )
    installed = (
        _one(conn, "SELECT pgq.version()") if _one(conn, "SELECT to_regprocedure('pgq.version()')") else None
    )
    if installed != __version__:
        found.append(
            (
                f"the code installed is pgq {installed or 'before 0.2'}"
                f"{' (the extension pgq)' if ext is not None else ''}, this is {__version__}",
                mend,
            )
        )
    return found


_DEFINED = re.compile(
    r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:CONSTRAINT\s+)?(FUNCTION|VIEW|TRIGGER)\s+(?:pgq\.)?(\w+)", re.IGNORECASE
)


def check_stale_objects(conn: psycopg.Connection, limits: Limits) -> Found:
    """Functions (by name and number of overloads), views and triggers in schema pgq that
    the code does not define, such as an old overload that makes calls ambiguous."""
    defined: Counter[tuple[str, str]] = Counter()
    for path in code_files():
        for kind, name in _DEFINED.findall(path.read_text()):
            defined[(kind.upper(), name)] += 1
    present = conn.execute(
        "SELECT 'FUNCTION', proname, count(*) FROM pg_proc"
        " WHERE pronamespace = 'pgq'::regnamespace GROUP BY 2"
        " UNION ALL SELECT 'VIEW', relname, 1 FROM pg_class WHERE relnamespace = 'pgq'::regnamespace"
        "   AND relkind IN ('v', 'm')"
        " UNION ALL SELECT 'TRIGGER', t.tgname, 1 FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
        "   WHERE c.relnamespace = 'pgq'::regnamespace AND NOT t.tgisinternal"
    ).fetchall()
    stale = [
        f"{kind.lower()} pgq.{name}"
        + (f" ({n} overloads, the code defines {defined[(kind, name)]})" if n > 1 else "")
        for kind, name, n in present
        if n > defined[(kind, name)]
    ]
    if stale:
        return [
            (
                f"schema pgq has objects the code does not define: {', '.join(sorted(stale))}",
                "run `pgq upgrade`",
            )
        ]
    return []


def check_roles_and_grants(conn: psycopg.Connection, limits: Limits) -> Found:
    found: Found = []
    # The install's own roles (pgq install --roles), else the default ones.
    prefix = pgroles.installed_prefix(conn) or pgroles.DEFAULT_PREFIX
    owner = pgroles.name("owner", prefix)
    missing = [
        r for r in pgroles.names(prefix) if not _one(conn, "SELECT 1 FROM pg_roles WHERE rolname = %s", (r,))
    ]
    if missing:
        found.append((f"roles missing: {', '.join(missing)} (e.g. after a restore)", "run `pgq install`"))
    public = [
        r[0]
        for r in conn.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = 'pgq'::regnamespace"
            "   AND has_function_privilege('public', p.oid, 'EXECUTE')"
            " UNION ALL SELECT c.oid::regclass::text FROM pg_class c"
            "   WHERE c.relnamespace = 'pgq'::regnamespace AND c.relacl::text ~ '(^|[{,])="
            "'"
            " UNION ALL SELECT 'schema pgq' FROM pg_namespace n WHERE n.nspname = 'pgq'"
            "   AND has_schema_privilege('public', n.oid, 'USAGE')"
        )
    ]
    if public:
        found.append(
            (
                f"PUBLIC has privileges on {', '.join(sorted(public))}",
                "run `pgq install` (it resets the grants)",
            )
        )
    if not missing:
        foreign = [
            r[0]
            for r in conn.execute(
                "SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = 'pgq'::regnamespace"
                "   AND p.proowner <> %(owner)s::regrole"
                " UNION ALL SELECT c.oid::regclass::text FROM pg_class c"
                "   WHERE c.relnamespace = 'pgq'::regnamespace"
                "   AND c.relkind IN ('r', 'p', 'v') AND c.relowner <> %(owner)s::regrole",
                {"owner": owner},
            )
        ]
        if foreign:
            found.append((f"not owned by {owner}: {', '.join(sorted(foreign))}", "run `pgq install`"))
    return found


# How often pg_cron runs each sweep (pgq.cron.CRON_JOBS): one that has not run for twice
# that is reported.
SWEEP_EVERY = {
    "reap": timedelta(minutes=1),
    "run-schedules": timedelta(minutes=1),
    "prune": timedelta(hours=1),
}
_RESTART_CRON = (
    "see the server log for why (pg_cron's launcher logs its errors there); check"
    " shared_preload_libraries and cron.database_name, then restart PostgreSQL; meanwhile"
    " running a `pgq worker` sweeps (or SELECT pgq.reap(), pgq.run_schedules())"
)


def _last_runs(conn: psycopg.Connection) -> str:
    """When the queue database last saw its sweeps run (pgq.sweeps), for the report."""
    try:
        rows = conn.execute("SELECT sweep, last_run FROM pgq.sweeps ORDER BY sweep").fetchall()
    except psycopg.Error:
        return "pgq.sweeps is missing: run `pgq upgrade`"
    return "; ".join(f"{sweep} last ran {_when(last_run)}" for sweep, last_run in rows)


def _when(moment: object) -> str:
    return "never" if moment is None else f"{moment:%Y-%m-%d %H:%M:%S %Z}".strip()


def _scheduled_without_cron(conn: psycopg.Connection, dsn: str) -> Found:
    """pg_cron not loaded: fine when the sweeps were never scheduled (the workers sweep),
    a problem when cron.job holds them: nothing runs them, whatever `cron.job` says."""
    dbname = conn.info.dbname
    names = [pgcron.job_name(name, dbname) for name, _, _ in pgcron.CRON_JOBS]
    for database in dict.fromkeys((dbname, "postgres")):
        try:
            with pgcron._cron_conn(conn, dsn, database) as c:
                if c is None:
                    continue
                n = c.execute(
                    "SELECT count(*) FROM cron.job WHERE jobname = ANY(%s) AND active", (names,)
                ).fetchone()[0]
        except psycopg.Error:
            continue
        if n:
            return [
                (
                    f"pg_cron is not loaded (shared_preload_libraries), but {n} pgq sweeps are"
                    f" scheduled in cron.job of database {database!r}: none runs"
                    f" ({_last_runs(conn)})",
                    "add pg_cron to shared_preload_libraries and restart PostgreSQL; meanwhile"
                    " running a `pgq worker` sweeps",
                )
            ]
    return []


def check_sweeps(conn: psycopg.Connection, limits: Limits, dsn: str = "") -> Found:
    plan = pgcron.inspect(conn, dsn)
    if plan.database is None:
        if pgcron.cron_database(conn) is None:  # not loaded (a role that may read the settings)
            return _scheduled_without_cron(conn, dsn)
        return []  # no usable pg_cron: the workers sweep (install said so)
    dbname = conn.info.dbname
    found: Found = []
    with pgcron._cron_conn(conn, dsn, plan.database) as c:
        assert c is not None
        names = [pgcron.job_name(name, dbname) for name, _, _ in pgcron.CRON_JOBS]
        have = {
            r[0]
            for r in c.execute("SELECT jobname FROM cron.job WHERE jobname = ANY(%s) AND active", (names,))
        }
        if set(names) - have:
            missing = ", ".join(sorted(set(names) - have))
            found.append((f"pg_cron sweeps not scheduled: {missing}", "run `pgq upgrade`"))
        launchers = c.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_cron launcher'"
        ).fetchone()[0]
        if have and not launchers:
            found.append(
                (
                    f"pg_cron is loaded but its launcher is not running: no sweep runs ({_last_runs(conn)})",
                    _RESTART_CRON,
                )
            )
        found += _late_sweeps(conn, c, dbname, have)
        failed = c.execute(
            "SELECT j.jobname, count(*), max(d.return_message) FROM cron.job_run_details d"
            " JOIN cron.job j ON j.jobid = d.jobid WHERE j.jobname = ANY(%s) AND d.status = 'failed'"
            " AND d.start_time > now() - interval '1 hour' GROUP BY 1 ORDER BY 1",
            (names,),
        ).fetchall()
        for job, n, message in failed:
            found.append(
                (
                    f"pg_cron job {job} failed {n} times in the last hour: {' '.join(str(message).split())}",
                    "run its command by hand to see why; `pgq doctor` lists other causes",
                )
            )
        orphans = [
            r[0]
            for r in c.execute(
                "SELECT jobname FROM cron.job WHERE jobname LIKE 'pgq-%%'"
                " AND database NOT IN (SELECT datname FROM pg_database) ORDER BY 1"
            )
        ]
        if orphans:
            found.append(
                (
                    f"pg_cron jobs of databases that no longer exist: {', '.join(orphans)}",
                    f"in database {plan.database!r}: SELECT cron.unschedule(jobid) FROM cron.job"
                    " WHERE jobname = ... (each one named)",
                )
            )
    return found


def _late_sweeps(conn: psycopg.Connection, c: psycopg.Connection, dbname: str, have: set[str]) -> Found:
    """Scheduled sweeps that have not started for twice their interval: by pg_cron's own
    log (cron.job_run_details; its rows of a job are visible to whoever sees the job), or,
    with cron.log_run off, by what pgq.reap and pgq.prune record in the queue database
    (run-schedules then has no record of its own and is left out). One never run counts
    from the install or the last upgrade."""
    since = _one(conn, "SELECT max(applied_at) FROM pgq._migrations")
    logged = c.execute("SELECT current_setting('cron.log_run', true)").fetchone()[0] != "off"
    late: list[str] = []
    for name, _, _ in pgcron.CRON_JOBS:
        job = pgcron.job_name(name, dbname)
        if job not in have or (not logged and name not in ("reap", "prune")):
            continue
        if logged:
            last, now = c.execute(
                "SELECT max(d.start_time), now() FROM cron.job_run_details AS d"
                " JOIN cron.job AS j ON j.jobid = d.jobid WHERE j.jobname = %s",
                (job,),
            ).fetchone()
        else:
            last, now = conn.execute(
                "SELECT max(m.last_run), now() FROM pgq._maintenance AS m WHERE m.task = %s", (name,)
            ).fetchone()
        start = last or since
        if start is not None and now - start > 2 * SWEEP_EVERY[name]:
            every = "minute" if SWEEP_EVERY[name] == timedelta(minutes=1) else "hour"
            late.append(f"{job} (every {every}) last ran {_when(last)}")
    if not late:
        return []
    return [
        (
            f"pg_cron sweeps have not run for twice their interval: {', '.join(late)} ({_last_runs(conn)})",
            _RESTART_CRON,
        )
    ]


def check_workers(conn: psycopg.Connection, limits: Limits) -> Found:
    found: Found = []
    lost = conn.execute(
        "SELECT w.name, w.state, count(*) FROM pgq._jobs j JOIN pgq._workers w ON w.id = j.worker_id"
        " JOIN pgq.queues q ON q.entrypoint = j.entrypoint WHERE j.status = 'running'"
        " AND (w.state <> 'alive' OR w.heartbeat_at < now() - q.lease) GROUP BY 1, 2 ORDER BY 1"
    ).fetchall()
    for name, state, n in lost:
        state = "dead" if state == "alive" else state
        found.append(
            (
                f"worker {name} is {state} (no heartbeat within its lease) but holds {n} jobs",
                "the sweeps should re-queue them: SELECT pgq.reap(); check that pg_cron runs it",
            )
        )
    late = conn.execute(
        "SELECT j.entrypoint, count(*), max(now() - j.started_at) FROM pgq._jobs j"
        " JOIN pgq.queues q ON q.entrypoint = j.entrypoint WHERE j.status = 'running'"
        " AND j.started_at < now() - q.timeout GROUP BY 1 ORDER BY 1"
    ).fetchall()
    for entrypoint, n, age in late:
        found.append(
            (
                f"{n} {entrypoint} jobs running past their timeout (longest {age})",
                "see which worker holds them (pgq.jobs); cancel them or raise the timeout (pgq configure)",
            )
        )
    return found


def check_xmin_horizon(conn: psycopg.Connection, limits: Limits) -> Found:
    row = conn.execute(
        "SELECT pid, usename, now() - xact_start, age(backend_xmin), left(query, 200) FROM pg_stat_activity"
        " WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid() AND xact_start < now() - %s"
        " ORDER BY age(backend_xmin) DESC LIMIT 1",
        (limits.max_xact_age,),
    ).fetchone()
    if row is None:
        return []
    pid, user, age, xids, query = row
    return [
        (
            f"transaction of pid {pid} ({user}) open for {age} holds back the xmin horizon by {xids}"
            " transactions (vacuum cannot clean pgq's tables behind it, and sweeps slow down):"
            f" {' '.join(str(query).split())}",
            f"end it in its application, or SELECT pg_terminate_backend({pid})",
        )
    ]


def check_bloat(conn: psycopg.Connection, limits: Limits) -> Found:
    row = conn.execute(
        "SELECT n_live_tup, n_dead_tup, last_autovacuum FROM pg_stat_all_tables"
        " WHERE relid = 'pgq._jobs'::regclass"
    ).fetchone()
    if row is None:
        return []
    live, dead, last = row
    if dead > limits.max_dead_tuples and dead > limits.dead_tuple_ratio * (live + 1):
        return [
            (
                f"pgq._jobs has {dead} dead row versions for {live} live ones (last autovacuum {last})",
                "look for a long transaction (see above) or stalled autovacuum; VACUUM pgq._jobs",
            )
        ]
    return []


def check_backlog(conn: psycopg.Connection, limits: Limits) -> Found:
    """Entrypoints whose oldest due job has waited past limits.max_queue_age, each with
    why: paused (a forgotten `pgq pause`), no live worker serving it (registered with it
    and heartbeating within the lease), or workers that do not keep up. The counts are
    pgq.queues' (an estimate above its exact limit, shown with ~)."""
    rows = conn.execute(
        "SELECT q.entrypoint, q.queued, q.approximate, q.oldest_queued_age, q.paused,"
        "  (SELECT s.updated_at FROM pgq._queues AS s WHERE s.entrypoint = q.entrypoint),"
        "  (SELECT count(*) FROM pgq._workers AS w WHERE w.state = 'alive'"
        "     AND q.entrypoint = ANY (w.entrypoints) AND w.heartbeat_at > now() - q.lease)"
        " FROM pgq.queues AS q WHERE q.queued > 0 AND q.oldest_queued_age > %s ORDER BY 1",
        (limits.max_queue_age,),
    ).fetchall()
    found: Found = []
    for entrypoint, queued, approximate, age, paused, since, workers in rows:
        backlog = (
            f"{entrypoint}: {'~' if approximate else ''}{queued} jobs due, the oldest waiting"
            f" {_age(age)} (over {_age(limits.max_queue_age)})"
        )
        if paused:
            found.append(
                (
                    f"{backlog}: paused (settings last changed {_when(since)})",
                    f"`pgq resume {entrypoint}` if the pause is over (SELECT pgq.resume('{entrypoint}'))",
                )
            )
        elif not workers:
            found.append(
                (
                    f"{backlog}: no live worker serves it",
                    f"start a worker with a handler for {entrypoint} (pgq.workers lists the"
                    " entrypoints of each), or cancel its jobs if the name is wrong",
                )
            )
        else:
            found.append(
                (
                    f"{backlog}: its {workers} live workers do not keep up",
                    "add workers or concurrency, or check its concurrency and rate limits"
                    f" (`pgq configure {entrypoint}`)",
                )
            )
    return found


def _age(td: timedelta) -> str:
    """An age to the second: 1h02m03s, 4m00s, 12s."""
    secs = int(td.total_seconds())
    hours, rest = divmod(secs, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


# Room an index entry of pgq._jobs takes at most, generously (header, key columns, line
# pointer, half-empty pages after splits): what the live rows need is rows times this.
_INDEX_BYTES_PER_ROW = 200
_INDEX_MIN_BYTES = 64 * 1024


def check_index_bloat(conn: psycopg.Connection, limits: Limits) -> Found:
    """Indexes of pgq._jobs far larger than its live rows need. A B-tree keeps its size
    after a backlog drains (VACUUM only marks its empty pages reusable), and the claim
    scans its empty pages: a drained 5M backlog left a 424 MB claim index for zero rows.
    Measured without extensions: pg_relation_size of each index against the live rows
    (the larger of pg_class.reltuples and the statistics' n_live_tup, so that a stale
    estimate errs towards quiet)."""
    rows = conn.execute(
        "SELECT i.indexrelid::regclass::text, pg_relation_size(i.indexrelid),"
        "  greatest(c.reltuples, s.n_live_tup, 0)::bigint"
        " FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indrelid"
        " JOIN pg_stat_all_tables AS s ON s.relid = i.indrelid"
        " WHERE i.indrelid = 'pgq._jobs'::regclass ORDER BY 2 DESC, 1"
    ).fetchall()
    found: Found = []
    for index, size, live in rows:
        need = _INDEX_MIN_BYTES + live * _INDEX_BYTES_PER_ROW
        if size - need > limits.max_index_excess:
            found.append(
                (
                    f"index {index} takes {_bytes(size)} for about {live} live rows of pgq._jobs"
                    f" (they need at most {_bytes(need)}): left from a backlog that drained;"
                    " claims and sweeps read its empty pages",
                    f"REINDEX INDEX CONCURRENTLY {index}",
                )
            )
    return found


def _bytes(n: int) -> str:
    """A size as PostgreSQL's pg_size_pretty would print it, roughly: 424.0 MB."""
    size = float(n)
    for unit in ("B", "kB", "MB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def check_partitions(conn: psycopg.Connection, limits: Limits) -> Found:
    name = _one(conn, "SELECT 'pgq._outcomes_' || to_char((now() AT TIME ZONE 'UTC')::date + 1, 'YYYYMMDD')")
    if _one(conn, "SELECT to_regclass(%s)", (name,)) is None:
        return [
            (
                f"tomorrow's outcome partition {name} is missing (prune has not run)",
                "SELECT pgq.prune(); check that pg_cron or a worker runs the sweeps",
            )
        ]
    return []


CHECKS: dict[str, Callable[..., Found]] = {
    "version": check_version,
    "stale objects": check_stale_objects,
    "roles and grants": check_roles_and_grants,
    "sweeps": check_sweeps,
    "workers": check_workers,
    "xmin horizon": check_xmin_horizon,
    "bloat": check_bloat,
    "index bloat": check_index_bloat,
    "backlog": check_backlog,
    "partitions": check_partitions,
}


def diagnose(dsn: str, limits: Limits | None = None) -> list[Problem]:
    limits = limits or Limits()
    problems: list[Problem] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name, check in CHECKS.items():
            try:
                found = check(conn, limits, dsn) if check is check_sweeps else check(conn, limits)
            except psycopg.Error as exc:
                found = [
                    (
                        f"could not run: {' '.join(str(exc).split())}",
                        "run `pgq doctor` as pgq's owner or a superuser",
                    )
                ]
            problems += [Problem(name, problem, fix) for problem, fix in found]
            if name == "version" and found and installed_version(conn) is None:
                break
    return problems
