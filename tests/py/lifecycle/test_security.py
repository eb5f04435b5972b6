"""Security: search_path attacks, and the privileges of pgq's roles.

DESIGN.md: functions that need table access run SECURITY DEFINER with
`SET search_path = pg_catalog, pg_temp` and schema-qualify every name; nothing is granted to
PUBLIC; pgq_producer enqueues, pgq_worker claims and settles, pgq_admin does everything;
internal tables are reachable only through the functions. The exception is the trigger
function pgq.enqueue_trigger: SECURITY INVOKER (turning a row into JSON may run casts that
the table's owner wrote), so the roles that write to such a table need pgq_producer.

The attack: an unprivileged login role with CREATE on schema public and a schema of its own
plants look-alikes there (functions, operators, tables) that record every call, then calls
every public function with `SET search_path = <own schema>, public, pg_catalog`. None of the
look-alikes may ever run, and every result must be right.

The privileges matrix is read from the catalog (has_*_privilege) for every function, view
and internal table of schema pgq, and checked by calls under SET ROLE (42501 where denied).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

# --- the intended matrix (sql/grants.sql, DESIGN.md) ----------------------------------------

PRODUCER = "producer"
WORKER = "worker"
ADMIN = "admin"
NOBODY = "nobody"
KINDS = (PRODUCER, WORKER, ADMIN, NOBODY)

# Public function -> the kinds of role that may execute it.
FUNCTIONS: dict[str, set[str]] = {
    "enqueue": {PRODUCER, ADMIN},
    "enqueue_batch": {PRODUCER, ADMIN},
    "enqueue_job": {PRODUCER, ADMIN},
    "enqueue_trigger": {PRODUCER, ADMIN},
    "job_status": {PRODUCER, WORKER, ADMIN},
    "job": {PRODUCER, WORKER, ADMIN},
    "watch": {PRODUCER, WORKER, ADMIN},
    "explain": {PRODUCER, WORKER, ADMIN},
    "dependency_results": {PRODUCER, WORKER, ADMIN},
    "batch": {PRODUCER, ADMIN},
    "batch_results": {PRODUCER, WORKER, ADMIN},
    "register_worker": {WORKER, ADMIN},
    "unregister_worker": {WORKER, ADMIN},
    "claim": {WORKER, ADMIN},
    "claim_v3": {WORKER, ADMIN},
    "heartbeat": {WORKER, ADMIN},
    "complete": {WORKER, ADMIN},
    "fail": {WORKER, ADMIN},
    "snooze": {WORKER, ADMIN},
    "confirm_cancel": {WORKER, ADMIN},
    "step_result": {WORKER, ADMIN},
    "record_step": {WORKER, ADMIN},
    "progress": {WORKER, ADMIN},
    "reap": {WORKER, ADMIN},
    "sweep": {WORKER, ADMIN},
    "release": {WORKER, ADMIN},
    "settings": {WORKER, ADMIN},
    "cancel": {ADMIN},
    "retry": {ADMIN},
    "forget_steps": {ADMIN},
    "rerun": {ADMIN},
    "pause": {ADMIN},
    "resume": {ADMIN},
    "isolate": {ADMIN},
    "unisolate": {ADMIN},
    "configure": {ADMIN},
    "schedule": {ADMIN},
    "unschedule": {ADMIN},
    "run_schedules": {ADMIN},
    "run_now": {ADMIN},
    "trigger_schedule": {ADMIN},
    "prune": {ADMIN},
    "stats": {WORKER, ADMIN},
    "version": {PRODUCER, WORKER, ADMIN},
}
# Public functions that run as their caller, not as pgq's owner (the rest are SECURITY DEFINER).
INVOKER_FUNCTIONS = {"enqueue_trigger", "version"}
# Internal functions: none, except what the views call (grants.sql says why).
INTERNAL_FUNCTIONS: dict[str, set[str]] = {
    "_queue_counts": {WORKER, ADMIN},
}
# View -> the kinds of role that may SELECT from it (and nothing else).
VIEWS: dict[str, set[str]] = {
    "queues": {WORKER, ADMIN},
    "workers": {WORKER, ADMIN},
    "jobs": {ADMIN},
    "outcomes": {ADMIN},
    "schedules": {ADMIN},
    "sweeps": {WORKER, ADMIN},
    "outcome_totals": {WORKER, ADMIN},
    # The default settings, read by pgq's functions and views (as their owner): nobody.
    "_default_settings": set(),
}
TABLE_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")
SEQUENCE_PRIVILEGES = ("USAGE", "SELECT", "UPDATE")
GROUP = {PRODUCER: "pgq_producer", WORKER: "pgq_worker", ADMIN: "pgq_admin"}


def suffix() -> str:
    return uuid.uuid4().hex[:10]


def drop_role(conn: psycopg.Connection, role: str) -> None:
    """Drop a test role and whatever it owns or was granted in this database."""
    ident = sql.Identifier(role)
    conn.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(ident))
    conn.execute(sql.SQL("REASSIGN OWNED BY {} TO CURRENT_USER").format(ident))
    conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(ident))


@pytest.fixture(scope="module")
def roles(dsn: str) -> Iterator[dict[str, str]]:
    """A login role per kind: a member of pgq_producer, pgq_worker, pgq_admin, or of none."""
    names = {kind: f"hx_{kind}_{suffix()}" for kind in KINDS}
    with psycopg.connect(dsn, autocommit=True) as c:
        for kind, name in names.items():
            c.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
            if kind in GROUP:
                c.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(GROUP[kind]), sql.Identifier(name)))
    try:
        yield names
    finally:
        with psycopg.connect(dsn, autocommit=True) as c:
            for name in names.values():
                drop_role(c, name)


def as_role(conn: psycopg.Connection, role: str, statement: str, params: tuple[Any, ...] = ()) -> str:
    """Run a statement under SET ROLE in a transaction that is rolled back: 'ok' or the SQLSTATE."""
    try:
        with conn.transaction(force_rollback=True):
            conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role)))
            cur = conn.execute(statement, params or None)
            if cur.description:
                cur.fetchall()
    except psycopg.Error as exc:
        return exc.sqlstate or type(exc).__name__
    return "ok"


# --- catalog ----------------------------------------------------------------------------------


def test_public_functions_are_the_documented_api(conn: psycopg.Connection) -> None:
    names = {
        r[0]
        for r in conn.execute(
            "SELECT proname FROM pg_proc WHERE pronamespace = 'pgq'::regnamespace AND proname !~ '^_'"
        )
    }
    assert names == set(FUNCTIONS), "a public function is missing from (or extra to) the privileges matrix"


def test_security_definer_functions_pin_search_path(conn: psycopg.Connection) -> None:
    rows = conn.execute(
        "SELECT p.oid::regprocedure::text, p.prosecdef, l.lanname, p.proconfig, p.proname"
        " FROM pg_proc AS p JOIN pg_language AS l ON l.oid = p.prolang"
        " WHERE p.pronamespace = 'pgq'::regnamespace"
    ).fetchall()
    definers = [r for r in rows if r[1]]
    # Every public function runs as the owner but the trigger, which runs as the writer; of
    # the internal ones, only the commit-time triggers (the check of new waiting jobs, the
    # count of batch members: they fire at COMMIT as the committing role, outside any pgq
    # function) and the counts of pgq.queues (its readers may not read pgq._jobs).
    assert {r[4] for r in definers} == set(FUNCTIONS) - INVOKER_FUNCTIONS | {
        "_trg_batch_settle",
        "_trg_check_waiting",
        "_queue_counts",
    }
    assert {r[4] for r in rows if not r[1] and not r[4].startswith("_")} == INVOKER_FUNCTIONS
    bad = [r[0] for r in definers if r[3] is None or "search_path=pg_catalog, pg_temp" not in r[3]]
    assert bad == [], f"SECURITY DEFINER without SET search_path = pg_catalog, pg_temp: {bad}"
    # STYLE.md: plpgsql functions pin it too, definer or not.
    bad = [
        r[0]
        for r in rows
        if r[2] == "plpgsql" and (r[3] is None or "search_path=pg_catalog, pg_temp" not in r[3])
    ]
    assert bad == [], f"plpgsql functions without a pinned search_path: {bad}"
    # Only public functions run as the owner, the commit-time trigger functions (executable
    # by no role: a trigger needs no EXECUTE when it fires) and the counts of pgq.queues
    # (executable by its readers only, INTERNAL_FUNCTIONS).
    helpers = sorted(r[0] for r in rows if r[1] and r[0].startswith("pgq._"))
    assert helpers == ["pgq._queue_counts(integer)", "pgq._trg_batch_settle()", "pgq._trg_check_waiting()"], (
        f"internal SECURITY DEFINER functions: {helpers}"
    )


def test_pgq_objects_are_owned_by_the_installer_or_a_superuser(conn: psycopg.Connection) -> None:
    bad = conn.execute(
        "SELECT o.what, r.rolname FROM ("
        "  SELECT p.oid::regprocedure::text AS what, p.proowner AS owner FROM pg_proc AS p"
        "  WHERE p.pronamespace = 'pgq'::regnamespace"
        "  UNION ALL SELECT c.oid::regclass::text, c.relowner FROM pg_class AS c"
        "  WHERE c.relnamespace = 'pgq'::regnamespace"
        "  UNION ALL SELECT t.oid::regtype::text, t.typowner FROM pg_type AS t"
        "  WHERE t.typnamespace = 'pgq'::regnamespace"
        ") AS o"
        " JOIN pg_roles AS r ON r.oid = o.owner"
        " CROSS JOIN (SELECT nspowner FROM pg_namespace WHERE nspname = 'pgq') AS n"
        " WHERE o.owner <> n.nspowner AND NOT r.rolsuper"
    ).fetchall()
    assert bad == [], f"owned by a role other than the installer: {bad}"


def test_no_privilege_in_schema_pgq_for_public(conn: psycopg.Connection) -> None:
    grants = conn.execute(
        "SELECT 'schema', a.privilege_type FROM pg_namespace AS n, aclexplode(n.nspacl) AS a"
        " WHERE n.nspname = 'pgq' AND a.grantee = 0"
        " UNION ALL SELECT p.oid::regprocedure::text, a.privilege_type"
        " FROM pg_proc AS p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) AS a"
        " WHERE p.pronamespace = 'pgq'::regnamespace AND a.grantee = 0"
        " UNION ALL SELECT c.oid::regclass::text, a.privilege_type"
        " FROM pg_class AS c, aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) AS a"
        " WHERE c.relnamespace = 'pgq'::regnamespace AND a.grantee = 0"
    ).fetchall()
    assert grants == []


def test_privileges_matrix_from_the_catalog(conn: psycopg.Connection, roles: dict[str, str]) -> None:
    wrong: list[str] = []
    for kind, role in roles.items():
        usage, create = conn.execute(
            "SELECT has_schema_privilege(%s, 'pgq', 'USAGE'), has_schema_privilege(%s, 'pgq', 'CREATE')",
            (role, role),
        ).fetchone()
        if usage != (kind != NOBODY) or create:
            wrong.append(f"{kind}: schema pgq USAGE={usage} CREATE={create}")

        for signature, name, execute, grant_option in conn.execute(
            "SELECT p.oid::regprocedure::text, p.proname, has_function_privilege(%s, p.oid, 'EXECUTE'),"
            " has_function_privilege(%s, p.oid, 'EXECUTE WITH GRANT OPTION')"
            " FROM pg_proc AS p WHERE p.pronamespace = 'pgq'::regnamespace",
            (role, role),
        ):
            allowed = kind in FUNCTIONS.get(name, INTERNAL_FUNCTIONS.get(name, set()))
            if execute != allowed or grant_option:
                wrong.append(f"{kind}: EXECUTE {signature} = {execute} (grant option {grant_option})")

        for relname, relkind, privilege, has in conn.execute(
            "SELECT c.relname, c.relkind, p.privilege, CASE WHEN c.relkind = 'S'"
            " THEN has_sequence_privilege(%s, c.oid, p.privilege)"
            " ELSE has_table_privilege(%s, c.oid, p.privilege) END"
            " FROM pg_class AS c"
            " CROSS JOIN LATERAL unnest(CASE WHEN c.relkind = 'S' THEN %s::text[] ELSE %s::text[] END)"
            " AS p (privilege)"
            " WHERE c.relnamespace = 'pgq'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')",
            (role, role, list(SEQUENCE_PRIVILEGES), list(TABLE_PRIVILEGES)),
        ):
            allowed = relkind == "v" and privilege == "SELECT" and kind in VIEWS.get(relname, set())
            if has != allowed:
                wrong.append(f"{kind}: {privilege} on pgq.{relname} = {has}")
        # No column-level grants sneak past the table-level check.
        columns = conn.execute(
            "SELECT c.relname FROM pg_class AS c JOIN pg_attribute AS a ON a.attrelid = c.oid"
            " WHERE c.relnamespace = 'pgq'::regnamespace AND c.relname LIKE '\\_%%' AND a.attnum > 0"
            " AND has_column_privilege(%s, c.oid, a.attnum, 'SELECT, INSERT, UPDATE, REFERENCES')",
            (role,),
        ).fetchall()
        if columns:
            wrong.append(f"{kind}: column privileges on {sorted(set(columns))}")
    assert wrong == [], "\n".join(wrong)


def test_views_and_internal_tables_are_all_covered(conn: psycopg.Connection) -> None:
    rels = conn.execute(
        "SELECT relname, relkind FROM pg_class WHERE relnamespace = 'pgq'::regnamespace"
        " AND relkind IN ('r', 'p', 'v', 'm', 'S', 'f')"
    ).fetchall()
    assert {n for n, k in rels if k == "v"} == set(VIEWS)
    assert all(n.startswith("_") for n, k in rels if k != "v"), "a table without the internal prefix"
    assert {"_jobs", "_queues", "_workers", "_schedules", "_outcomes"} <= {n for n, _ in rels}


# --- privileges in practice ----------------------------------------------------------------------

# (statement, kinds that may run it). Calls that need a worker register one first, under the
# same role, so a denial comes from the privilege and not from a missing worker.
W = "pgq.register_worker('w', ARRAY['hx_priv'])"
PRACTICE: list[tuple[str, set[str]]] = [
    ("SELECT pgq.enqueue('hx_priv', '{\"a\": 1}')", {PRODUCER, ADMIN}),
    ("SELECT * FROM pgq.enqueue_batch('hx_priv', ARRAY['{}'::jsonb])", {PRODUCER, ADMIN}),
    (
        "SELECT * FROM pgq.enqueue_job('hx_priv', dedupe_key => 'k', dedupe_mode => 'replace')",
        {PRODUCER, ADMIN},
    ),
    ("SELECT pgq.batch()", {PRODUCER, ADMIN}),
    ("SELECT pgq.job_status(1)", {PRODUCER, WORKER, ADMIN}),
    ("SELECT pgq.job(1)", {PRODUCER, WORKER, ADMIN}),
    ("SELECT pgq.watch(1)", {PRODUCER, WORKER, ADMIN}),
    (f"SELECT {W}", {WORKER, ADMIN}),
    (f"SELECT * FROM pgq.claim({W}, ARRAY['hx_priv'])", {WORKER, ADMIN}),
    (f"SELECT * FROM pgq.heartbeat({W})", {WORKER, ADMIN}),
    (f"SELECT * FROM pgq.complete({W}, ARRAY[1]::bigint[])", {WORKER, ADMIN}),
    (f"SELECT pgq.fail({W}, 1, 'e')", {WORKER, ADMIN}),
    (f"SELECT pgq.snooze({W}, 1, '1 second')", {WORKER, ADMIN}),
    (f"SELECT pgq.unregister_worker({W})", {WORKER, ADMIN}),
    ("SELECT pgq.reap()", {WORKER, ADMIN}),
    ("SELECT pgq.sweep()", {WORKER, ADMIN}),
    ("SELECT * FROM pgq.settings(ARRAY['hx_priv'])", {WORKER, ADMIN}),
    ("SELECT pgq.cancel(ARRAY[1]::bigint[])", {ADMIN}),
    ("SELECT pgq.retry(ARRAY[1]::bigint[])", {ADMIN}),
    ("SELECT pgq.pause('hx_priv')", {ADMIN}),
    ("SELECT pgq.resume('hx_priv')", {ADMIN}),
    ("SELECT pgq.configure('hx_priv', max_attempts => 3)", {ADMIN}),
    ("SELECT pgq.schedule('hx_priv', '* * * * *', 'hx_priv')", {ADMIN}),
    ("SELECT pgq.unschedule('hx_priv')", {ADMIN}),
    ("SELECT pgq.run_schedules()", {ADMIN}),
    ("SELECT pgq.prune()", {ADMIN}),
    ("SELECT * FROM pgq.stats('1 hour')", {WORKER, ADMIN}),
    ("SELECT * FROM pgq.queues", {WORKER, ADMIN}),
    ("SELECT * FROM pgq.outcome_totals", {WORKER, ADMIN}),
    ("SELECT * FROM pgq.workers", {WORKER, ADMIN}),
    ("SELECT * FROM pgq.jobs", {ADMIN}),
    ("SELECT * FROM pgq.outcomes", {ADMIN}),
    ("SELECT * FROM pgq.schedules", {ADMIN}),
    # Internal tables and helpers: nobody, whatever the role.
    ("SELECT * FROM pgq._jobs", set()),
    ("SELECT * FROM pgq._outcomes", set()),
    ("SELECT * FROM pgq._workers", set()),
    ("SELECT * FROM pgq._queues", set()),
    ("SELECT * FROM pgq._schedules", set()),
    ("SELECT * FROM pgq._migrations", set()),
    ("SELECT * FROM pgq._batches", set()),
    ("INSERT INTO pgq._jobs (entrypoint) VALUES ('x')", set()),
    ("UPDATE pgq._jobs SET priority = 1", set()),
    ("DELETE FROM pgq._queues", set()),
    ("TRUNCATE pgq._jobs", set()),
    ("SELECT nextval('pgq._jobs_id_seq')", set()),
    ("SELECT pgq._invalid('a', 'b', 'c')", set()),
    ("SELECT pgq._sweep(TRUE)", set()),
    ("SELECT pgq._release(ARRAY[gen_random_uuid()])", set()),
    ("SELECT pgq._fail(1, 'e', NULL)", set()),
    ("SELECT pgq._cancel_dependents(ARRAY[1]::bigint[], 'x')", set()),
    ("CREATE TABLE pgq.hx_intruder (x int)", set()),
    ("CREATE FUNCTION pgq.hx_intruder() RETURNS int LANGUAGE sql AS 'SELECT 1'", set()),
    ("CREATE OR REPLACE VIEW pgq.jobs AS SELECT 1 AS id", set()),
    ("ALTER FUNCTION pgq.enqueue_trigger() SECURITY INVOKER", set()),
    ("ALTER FUNCTION pgq.enqueue_trigger() SECURITY DEFINER", set()),
]


@pytest.mark.parametrize("kind", KINDS)
def test_privileges_in_practice(conn: psycopg.Connection, roles: dict[str, str], kind: str) -> None:
    got = {statement: as_role(conn, roles[kind], statement) for statement, _ in PRACTICE}
    want = {statement: ("ok" if kind in kinds else "42501") for statement, kinds in PRACTICE}
    wrong = [f"{s}: got {got[s]}, want {want[s]}" for s in got if got[s] != want[s]]
    assert wrong == [], "\n".join(wrong)


def test_producer_enqueues_but_cannot_claim_or_read_jobs(dsn: str, roles: dict[str, str]) -> None:
    with psycopg.connect(make_conninfo(dsn, user=roles[PRODUCER]), autocommit=True) as producer:
        job = producer.execute("SELECT pgq.enqueue('hx_prod', '{\"secret\": 1}')").fetchone()[0]
        assert producer.execute("SELECT pgq.job_status(%s)", (job,)).fetchone()[0] == "queued"
        for statement in (
            "SELECT * FROM pgq.claim(gen_random_uuid(), ARRAY['hx_prod'])",
            "SELECT pgq.register_worker('w', ARRAY['hx_prod'])",
            "SELECT payload FROM pgq._jobs",
            "SELECT payload FROM pgq.jobs",
            "SELECT pgq.cancel(ARRAY[1]::bigint[])",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                producer.execute(statement)
    with psycopg.connect(make_conninfo(dsn, user=roles[NOBODY]), autocommit=True) as nobody:
        for statement in (
            "SELECT pgq.enqueue('hx_prod')",
            "SELECT pgq.job_status(1)",
            "SELECT * FROM pgq.queues",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                nobody.execute(statement)


# --- search_path attack ----------------------------------------------------------------------------

# Look-alikes of what the functions call unqualified: (name, argument types, return type, value).
LOOKALIKE_FUNCTIONS = [
    ("now", "", "timestamptz", "'2000-01-01 00:00:00+00'"),
    ("clock_timestamp", "", "timestamptz", "'2000-01-01 00:00:00+00'"),
    ("btrim", "text", "text", "'x'"),
    ("btrim", "text, text", "text", "'x'"),
    ("length", "text", "integer", "0"),
    ("lower", "text", "text", "'x'"),
    ("left", "text, integer", "text", "'x'"),
    ("format", "text, text", "text", "'x'"),
    ("format", "text, integer", "text", "'x'"),
    ("jsonb_typeof", "jsonb", "text", "'object'"),
    ("jsonb_build_object", "text, text, text, text", "jsonb", "'{}'"),
    ("jsonb_build_object", "text, text, text, text, text, text", "jsonb", "'{}'"),
    ("to_jsonb", "anyelement", "jsonb", "'{}'"),
    ("pg_notify", "text, text", "void", None),
    ("gen_random_uuid", "", "uuid", "'00000000-0000-0000-0000-000000000000'"),
    ("pg_column_size", "jsonb", "integer", "0"),
    ("isfinite", "timestamptz", "boolean", "true"),
    ("cardinality", "text[]", "integer", "0"),
    ("cardinality", "bigint[]", "integer", "0"),
    ("cardinality", "jsonb[]", "integer", "0"),
    ("array_position", "bigint[], bigint", "integer", "NULL"),
    ("random", "", "double precision", "0"),
    ("pg_try_advisory_xact_lock", "integer, integer", "boolean", "true"),
    ("to_char", "timestamp, text", "text", "'x'"),
    ("date_trunc", "text, timestamp", "timestamp", "'2000-01-01'"),
    ("date_part", "text, timestamp", "double precision", "0"),
    ("nextval", "regclass", "bigint", "0"),
    ("pg_get_serial_sequence", "text, text", "text", "NULL"),
    ("string_to_array", "text, text", "text[]", "'{}'"),
    ("regexp_split_to_array", "text, text", "text[]", "'{}'"),
    (
        "make_interval",
        "integer, integer, integer, integer, integer, integer, double precision",
        "interval",
        "'0'",
    ),
    ("power", "integer, integer", "double precision", "0"),
    ("to_regclass", "text", "regclass", "NULL"),
    ("count", "bigint", "bigint", "0"),
]
# Operators: (symbol, left type, right type, return type, value).
LOOKALIKE_OPERATORS = [
    ("=", "text", "text", "boolean", "false"),
    ("<>", "text", "text", "boolean", "true"),
    ("~", "text", "text", "boolean", "false"),
    ("!~", "text", "text", "boolean", "true"),
    ("||", "text", "text", "text", "'x'"),
    ("<@", "text[]", "text[]", "boolean", "true"),
    ("&&", "bigint[]", "bigint[]", "boolean", "false"),
    ("=", "bigint", "bigint", "boolean", "false"),
    ("=", "uuid", "uuid", "boolean", "false"),
    ("<", "integer", "integer", "boolean", "false"),
    (">", "integer", "integer", "boolean", "false"),
    ("<=", "timestamptz", "timestamptz", "boolean", "true"),
    ("-", "timestamptz", "interval", "timestamptz", "'2000-01-01'"),
    ("+", "timestamptz", "interval", "timestamptz", "'2000-01-01'"),
]
LOOKALIKE_TABLES = [
    "_jobs",
    "_queues",
    "_workers",
    "_schedules",
    "_outcomes",
    "_maintenance",
    "jobs",
    "queues",
]


def lookalike_ddl(schema: str, calls: str) -> list[sql.Composable]:
    """Look-alikes in `schema`; each records its call in the table `calls`."""
    s = sql.Identifier(schema)

    def record(what: str) -> sql.Composable:
        return sql.SQL("INSERT INTO {} VALUES ({})").format(
            sql.Identifier(*calls.split(".")), sql.Literal(what)
        )

    ddl: list[sql.Composable] = []
    for name, args, returns, value in LOOKALIKE_FUNCTIONS:
        rec = record(f"{schema}.{name}({args})")
        if name == "count":  # an aggregate
            ddl.append(
                sql.SQL(
                    "CREATE FUNCTION {}.hx_count_step(bigint, bigint) RETURNS bigint LANGUAGE plpgsql"
                    " AS $f$ BEGIN {}; RETURN 0; END $f$"
                ).format(s, rec)
            )
            ddl.append(
                sql.SQL(
                    "CREATE AGGREGATE {}.count(bigint) (SFUNC = {}.hx_count_step, STYPE = bigint)"
                ).format(s, s)
            )
            continue
        ret = sql.SQL("RETURN;" if value is None else f"RETURN {value}::{returns};")
        ddl.append(
            sql.SQL(
                "CREATE FUNCTION {}.{}({}) RETURNS {} LANGUAGE plpgsql VOLATILE AS $f$ BEGIN {}; {} END $f$"
            ).format(s, sql.Identifier(name), sql.SQL(args), sql.SQL(returns), rec, ret)
        )
    for i, (op, left, right, returns, value) in enumerate(LOOKALIKE_OPERATORS):
        fn = sql.Identifier(f"hx_op_{i}")
        ddl.append(
            sql.SQL(
                "CREATE FUNCTION {}.{}({}, {}) RETURNS {} LANGUAGE plpgsql VOLATILE"
                " AS $f$ BEGIN {}; RETURN {}; END $f$"
            ).format(
                s,
                fn,
                sql.SQL(left),
                sql.SQL(right),
                sql.SQL(returns),
                record(f"{schema}.{left} {op} {right}"),
                sql.SQL(f"{value}::{returns}"),
            )
        )
        ddl.append(
            sql.SQL("CREATE OPERATOR {}.{} (LEFTARG = {}, RIGHTARG = {}, FUNCTION = {}.{})").format(
                s, sql.SQL(op), sql.SQL(left), sql.SQL(right), s, fn
            )
        )
    for table in LOOKALIKE_TABLES:
        t = sql.Identifier(table)
        ddl.append(sql.SQL("CREATE TABLE {}.{} (id bigint, entrypoint text, status text)").format(s, t))
        ddl.append(sql.SQL("INSERT INTO {}.{} VALUES (1, 'lookalike', 'queued')").format(s, t))
    return ddl


@pytest.fixture
def attacker(dsn: str) -> Iterator[tuple[str, str]]:
    """(role, schema): a login role with CREATE on public and its own schema, full of look-alikes."""
    role = f"hx_attacker_{suffix()}"
    schema = role
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        admin.execute(sql.SQL("GRANT CREATE, USAGE ON SCHEMA public TO {}").format(sql.Identifier(role)))
        admin.execute(
            sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(sql.Identifier(schema), sql.Identifier(role))
        )
    try:
        with psycopg.connect(make_conninfo(dsn, user=role), autocommit=True) as c:
            c.execute(sql.SQL("CREATE TABLE {}.calls (fn text)").format(sql.Identifier(schema)))
            c.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO PUBLIC").format(sql.Identifier(schema)))
            c.execute(sql.SQL("GRANT INSERT, SELECT ON {}.calls TO PUBLIC").format(sql.Identifier(schema)))
            for target in (schema, "public"):
                for statement in lookalike_ddl(target, f"{schema}.calls"):
                    c.execute(statement)
        yield role, schema
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            drop_role(admin, role)


def test_search_path_attack_reaches_no_lookalike(dsn: str, attacker: tuple[str, str]) -> None:
    role, schema = attacker
    with psycopg.connect(dsn, autocommit=True) as admin:
        for group in GROUP.values():
            admin.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(group), sql.Identifier(role)))
    check_conninfo = make_conninfo(dsn, options="-c search_path=pg_catalog")
    with (
        psycopg.connect(make_conninfo(dsn, user=role), autocommit=True) as a,
        psycopg.connect(check_conninfo, autocommit=True) as check,
        psycopg.connect(check_conninfo, autocommit=True) as listener,
    ):
        a.execute(sql.SQL("SET search_path = {}, public, pg_catalog").format(sql.Identifier(schema)))
        a.execute("CREATE TEMP TABLE _jobs (id bigint, entrypoint text, status text)")
        a.execute("CREATE TEMP TABLE _workers (id uuid, state text)")
        listener.execute("LISTEN pgq")

        def one(query: str, params: tuple[Any, ...] = ()) -> Any:
            return a.execute(query, params or None).fetchone()[0]

        def rows(query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
            return a.execute(query, params or None).fetchall()

        ep = "hx'attack 🙂"
        job1 = one(
            "SELECT pgq.enqueue(%s, '{\"a\": 1}', priority => 3, dedupe_key => 'k',"
            ' headers => \'{"h": "v"}\','
            " max_attempts => 3)",
            (ep,),
        )
        assert check.execute(
            "SELECT entrypoint, payload, priority, dedupe_key, headers, max_attempts, status,"
            " run_at > pg_catalog.now() - interval '1 minute' FROM pgq.jobs WHERE id = %s",
            (job1,),
        ).fetchone() == (ep, {"a": 1}, 3, "k", {"h": "v"}, 3, "queued", True)
        assert one("SELECT pgq.enqueue(%s, dedupe_key => 'k')", (ep,)) == job1
        assert [n.payload for n in listener.notifies(timeout=2, stop_after=1)] == [ep]
        batch = [
            r[0]
            for r in rows(
                "SELECT * FROM pgq.enqueue_batch(%s, ARRAY['{\"b\": 1}', '{\"b\": 2}']::jsonb[])", (ep,)
            )
        ]
        assert len(batch) == 2 and job1 < batch[0] < batch[1]
        job4 = one("SELECT pgq.enqueue(%s, depends_on => ARRAY[%s]::bigint[])", (ep, job1))
        assert one("SELECT pgq.job_status(%s)", (job4,)) == "waiting"
        assert one("SELECT pgq.enqueue(%s, run_at => '2999-01-01')", (ep,)) not in (None, 0)

        worker = one("SELECT pgq.register_worker('w', ARRAY[%s, %s])", (ep, ep))
        assert worker != uuid.UUID(int=0)
        assert check.execute(
            "SELECT entrypoints, state FROM pgq.workers WHERE id = %s", (worker,)
        ).fetchone() == (
            [ep],
            "alive",
        )
        settings = rows(
            "SELECT entrypoint, paused, max_attempts, lease, timeout FROM pgq.settings(ARRAY[%s])", (ep,)
        )
        assert [(s[0], s[1], s[2]) for s in settings] == [(ep, False, 5)]
        assert str(settings[0][3]) == "0:00:30"

        claimed = rows("SELECT id, deliveries, payload FROM pgq.claim(%s, ARRAY[%s], 2)", (worker, ep))
        assert claimed == [(job1, 1, {"a": 1}), (batch[0], 1, {"b": 1})]
        assert rows("SELECT * FROM pgq.heartbeat(%s)", (worker,)) == []
        assert one("SELECT pgq.cancel(ARRAY[%s]::bigint[])", (batch[1],)) == 1
        assert one("SELECT pgq.job_status(%s)", (batch[1],)) == "canceled"
        assert rows(
            "SELECT * FROM pgq.complete(%s, ARRAY[%s]::bigint[], ARRAY['{\"r\": 1}']::jsonb[])",
            (worker, job1),
        ) == [(job1,)]
        assert one("SELECT pgq.job_status(%s)", (job1,)) == "succeeded"
        assert one("SELECT pgq.job_status(%s)", (job4,)) == "queued"
        assert one("SELECT pgq.fail(%s, %s, 'boom', '0')", (worker, batch[0])) == "queued"
        assert check.execute(
            "SELECT attempt, last_error FROM pgq.jobs WHERE id = %s", (batch[0],)
        ).fetchone() == (2, "boom")  # failed once: its next run is attempt 2

        dead = one("SELECT pgq.enqueue('hx_dead', max_attempts => 1)")
        w2 = one("SELECT pgq.register_worker('w2', ARRAY['hx_dead'])")
        assert [r[0] for r in rows("SELECT id FROM pgq.claim(%s, ARRAY['hx_dead'])", (w2,))] == [dead]
        assert one("SELECT pgq.fail(%s, %s, 'fatal')", (w2, dead)) == "dead"
        assert one("SELECT pgq.retry(ARRAY[%s]::bigint[])", (dead,)) == 1
        assert one("SELECT pgq.job_status(%s)", (dead,)) == "queued"

        a.execute("SELECT pgq.pause(%s)", (ep,))
        assert rows("SELECT id FROM pgq.claim(%s, ARRAY[%s], 10)", (worker, ep)) == []
        a.execute("SELECT pgq.resume(%s)", (ep,))
        assert sorted(
            r[0] for r in rows("SELECT id FROM pgq.claim(%s, ARRAY[%s], 10)", (worker, ep))
        ) == sorted([batch[0], job4])
        a.execute(
            "SELECT pgq.configure(%s, max_attempts => 7, backoff_base => '2 seconds',"
            " backoff_max => '1 minute', lease => '2 minutes', timeout => '5 minutes', concurrency => 5,"
            " rate => 10, retention => '1 day')",
            (ep,),
        )
        assert check.execute(
            "SELECT max_attempts, backoff_base::text, backoff_max::text, lease::text, timeout::text,"
            " concurrency,"
            " rate, retention::text FROM pgq.settings(ARRAY[%s])",
            (ep,),
        ).fetchone() == (7, "00:00:02", "00:01:00", "00:02:00", "00:05:00", 5, 10, "1 day")

        name = "s'; --"
        next_run = one("SELECT pgq.schedule(%s, '*/5 * * * *', %s, '{\"s\": 1}')", (name, ep))
        ok = check.execute(
            "SELECT %s > pg_catalog.now() AND %s <= pg_catalog.now() + interval '5 minutes'"
            " AND extract(minute FROM %s::timestamptz)::int %% 5 = 0"
            " AND extract(second FROM %s::timestamptz) = 0",
            (next_run, next_run, next_run, next_run),
        ).fetchone()[0]
        assert ok, next_run
        assert one("SELECT pgq.run_schedules(%s)", (next_run,)) == 1
        fired = check.execute(
            "SELECT dedupe_key, headers->>'schedule', payload FROM pgq.jobs"
            " WHERE entrypoint = %s AND headers ? 'schedule'",
            (ep,),
        ).fetchone()
        assert fired[0].startswith(f"schedule:{name}:") and fired[1:] == (name, {"s": 1})
        assert one("SELECT pgq.unschedule(%s)", (name,)) is True
        assert one("SELECT pgq.unschedule(%s)", (name,)) is False

        assert one("SELECT pgq.reap()") >= 0
        assert one("SELECT pgq.prune()") >= 0
        stats = {
            r[0]: r[1:4] for r in rows("SELECT entrypoint, succeeded, failed, dead FROM pgq.stats('1 hour')")
        }
        assert stats[ep] == (1, 1, 0) and stats["hx_dead"] == (0, 1, 1)
        assert one("SELECT pgq.unregister_worker(%s)", (worker,)) == 2

        queues = {r[0]: r[1:] for r in rows("SELECT entrypoint, queued, running, paused FROM pgq.queues")}
        assert queues[ep] == (3, 0, False)
        assert {r[0] for r in rows("SELECT id FROM pgq.workers")} == {worker, w2}
        assert len(rows("SELECT * FROM pgq.jobs WHERE entrypoint OPERATOR(pg_catalog.=) %s", (ep,))) == 4
        assert len(rows("SELECT * FROM pgq.outcomes WHERE entrypoint OPERATOR(pg_catalog.=) %s", (ep,))) >= 3
        assert rows("SELECT name FROM pgq.schedules") == []

        # A trigger on the attacker's own table.
        a.execute(sql.SQL("CREATE TABLE {}.orders (id int, note text)").format(sql.Identifier(schema)))
        a.execute(
            sql.SQL(
                "CREATE TRIGGER t AFTER INSERT ON {}.orders FOR EACH ROW"
                " EXECUTE FUNCTION pgq.enqueue_trigger({})"
            ).format(sql.Identifier(schema), sql.Literal(ep))
        )
        a.execute(sql.SQL("INSERT INTO {}.orders VALUES (7, 'n')").format(sql.Identifier(schema)))
        assert check.execute(
            "SELECT payload, headers FROM pgq.jobs WHERE entrypoint = %s AND headers ? 'table'", (ep,)
        ).fetchone() == ({"id": 7, "note": "n"}, {"table": "orders", "schema": schema, "op": "INSERT"})

        calls = check.execute(sql.SQL("SELECT fn FROM {}.calls").format(sql.Identifier(schema))).fetchall()
    assert calls == [], f"look-alikes were called: {calls}"


def test_lookalikes_would_be_found_without_the_pinned_search_path(
    dsn: str, attacker: tuple[str, str]
) -> None:
    """The attack is real: an unpinned function with the attacker's search_path calls them."""
    role, schema = attacker
    with psycopg.connect(make_conninfo(dsn, user=role), autocommit=True) as a:
        a.execute(sql.SQL("SET search_path = {}, public, pg_catalog").format(sql.Identifier(schema)))
        a.execute(
            "CREATE FUNCTION pg_temp.naive(t text) RETURNS boolean LANGUAGE plpgsql"
            " AS $$ BEGIN RETURN btrim(t) = ''; END $$"
        )
        a.execute("SELECT pg_temp.naive('x')")
        calls = a.execute(
            sql.SQL("SELECT fn FROM {}.calls ORDER BY fn").format(sql.Identifier(schema))
        ).fetchall()
    assert (f"{schema}.btrim(text)",) in calls and (f"{schema}.text = text",) in calls


# --- enqueue_trigger runs as the writer ------------------------------------------------------------


@pytest.fixture
def producer_role(dsn: str) -> Iterator[str]:
    """A login role in pgq_producer only, with a schema of its own (named after it)."""
    role = f"hx_trig_{suffix()}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE pgq_producer").format(sql.Identifier(role)))
        admin.execute(
            sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(sql.Identifier(role), sql.Identifier(role))
        )
    try:
        yield role
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            drop_role(admin, role)


def test_enqueue_trigger_runs_user_casts_as_the_writer(dsn: str, producer_role: str) -> None:
    """to_jsonb(NEW) calls a user-defined cast to json for a user-defined column type. The
    trigger used to be SECURITY DEFINER, so any pgq_producer member ran code of its choice as
    the owner of pgq (a superuser); now the cast runs as the role that wrote the row."""
    role = producer_role
    s = sql.Identifier(role)
    with psycopg.connect(make_conninfo(dsn, user=role), autocommit=True) as c:
        c.execute(sql.SQL("CREATE TABLE {}.seen (who text, superuser boolean)").format(s))
        c.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO PUBLIC").format(s))
        c.execute(sql.SQL("GRANT INSERT ON {}.seen TO PUBLIC").format(s))
        c.execute(sql.SQL("CREATE TYPE {}.mood AS ENUM ('happy')").format(s))
        c.execute(
            sql.SQL(
                "CREATE FUNCTION {s}.mood_json({s}.mood) RETURNS json LANGUAGE plpgsql AS $f$ BEGIN"
                " INSERT INTO {s}.seen SELECT current_user, rolsuper FROM pg_catalog.pg_roles"
                " WHERE rolname = current_user;"
                " RETURN pg_catalog.to_json($1::text); END $f$"
            ).format(s=s)
        )
        c.execute(sql.SQL("CREATE CAST ({s}.mood AS json) WITH FUNCTION {s}.mood_json({s}.mood)").format(s=s))
        c.execute(sql.SQL("CREATE TABLE {}.t (id int, m {}.mood)").format(s, s))
        c.execute(
            sql.SQL(
                "CREATE TRIGGER t AFTER INSERT ON {}.t FOR EACH ROW"
                " EXECUTE FUNCTION pgq.enqueue_trigger('hx_cast')"
            ).format(s)
        )
        c.execute(sql.SQL("INSERT INTO {}.t VALUES (1, 'happy')").format(s))
        seen = c.execute(sql.SQL("SELECT who, superuser FROM {}.seen").format(s)).fetchall()
    assert seen == [(role, False)], f"the cast ran as {seen}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        jobs = admin.execute(
            "SELECT payload, headers FROM pgq.jobs WHERE entrypoint = 'hx_cast' AND headers->>'schema' = %s",
            (role,),
        ).fetchall()
    assert jobs == [({"id": 1, "m": "happy"}, {"table": "t", "schema": role, "op": "INSERT"})]


def test_enqueue_trigger_needs_pgq_producer_to_write(conn: psycopg.Connection, roles: dict[str, str]) -> None:
    """The trigger runs as the writer: roles with INSERT on the table but without
    pgq_producer (or pgq_admin) cannot write to it (42501), and the row is not written."""
    name = f"hx_trig_{suffix()}"
    table = sql.Identifier(name)
    conn.execute(sql.SQL("CREATE TABLE {} (id int)").format(table))
    try:
        conn.execute(
            sql.SQL(
                "CREATE TRIGGER t AFTER INSERT ON {} FOR EACH ROW"
                " EXECUTE FUNCTION pgq.enqueue_trigger('hx_w')"
            ).format(table)
        )
        conn.execute(
            sql.SQL("GRANT INSERT ON {} TO {}").format(
                table, sql.SQL(", ").join(sql.Identifier(r) for r in roles.values())
            )
        )
        insert = sql.SQL("INSERT INTO {} VALUES (1)").format(table).as_string(conn)
        got = {kind: as_role(conn, role, insert) for kind, role in roles.items()}
        assert got == {PRODUCER: "ok", ADMIN: "ok", WORKER: "42501", NOBODY: "42501"}
        # In practice too: the producer's row and job commit together.
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(roles[PRODUCER])))
        try:
            conn.execute(insert)
        finally:
            conn.execute("RESET ROLE")
        assert conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()[0] == 1
        assert (
            conn.execute(
                "SELECT count(*) FROM pgq.jobs WHERE entrypoint = 'hx_w' AND headers->>'table' = %s",
                (name,),
            ).fetchone()[0]
            == 1
        )
    finally:
        conn.execute(sql.SQL("DROP TABLE {}").format(table))


# --- known bugs --------------------------------------------------------------------------------------


def test_enqueue_trigger_argument_errors_are_pq001_for_producers(dsn: str, producer_role: str) -> None:
    s = sql.Identifier(producer_role)
    got = {}
    with psycopg.connect(make_conninfo(dsn, user=producer_role), autocommit=True) as c:
        c.execute(sql.SQL("CREATE TABLE {}.t (id int)").format(s))
        for level, arguments in [
            ("ROW", ("hx_arg", "abc")),
            ("ROW", ("hx_arg", "99999999999")),
            ("STATEMENT", ("hx_arg",)),
            ("ROW", ("hx\u0001arg",)),  # checked in pgq.enqueue (SECURITY DEFINER): PQ001 already
        ]:
            c.execute(sql.SQL("DROP TRIGGER IF EXISTS t ON {}.t").format(s))
            c.execute(
                sql.SQL(
                    "CREATE TRIGGER t AFTER INSERT ON {}.t FOR EACH {}"
                    " EXECUTE FUNCTION pgq.enqueue_trigger({})"
                ).format(s, sql.SQL(level), sql.SQL(", ").join(map(sql.Literal, arguments)))
            )
            try:
                c.execute(sql.SQL("INSERT INTO {}.t VALUES (1)").format(s))
                got[level, arguments] = "ok"
            except psycopg.Error as exc:
                got[level, arguments] = exc.sqlstate
        assert c.execute(sql.SQL("SELECT count(*) FROM {}.t").format(s)).fetchone()[0] == 0
    assert set(got.values()) == {"PQ001"}, got
