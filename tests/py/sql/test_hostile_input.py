"""Hostile input: every public SQL function of pgq called with values meant to break it.

The contract (docs/errors.md): a call either succeeds with a correct result or raises an
error of SQLSTATE class PQ, and then changes nothing. Never an internal error, a crash, an
error of another class (22xxx, 23xxx, 42xxx, 54xxx...), nor a half-applied change: every
failing call is bracketed by a snapshot of the internal tables.

Values come from explicit cases (NULLs, empty and 1 MB strings, unicode, control
characters, 1000-deep JSON, payloads over the limit, int4/int8 extremes, negative, huge
and infinite intervals and timestamps, arrays with NULLs, duplicates, no elements or 10001)
and from Hypothesis, bounded and derandomized so that CI is reproducible. Strings that are
data (entrypoints, schedule names, dedupe keys, headers, payloads) must round-trip
unchanged and never execute, NOTIFY payloads included; the pg_cron commands that
`pgq install` writes hold no user input, whatever the database is called.

Bugs found here and fixed have regression tests at the end (multidimensional arrays,
multibyte dedupe keys, run_schedules near the ends of time, backoff overflow, complete's
pairing of results, pg_cron job names of long database names).
"""

from __future__ import annotations

import datetime
import json
import unicodedata
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

from conftest import ADMIN_DSN, create_database, drop_database
from pgq import migrate

MiB = 1 << 20
INT4_MIN, INT4_MAX = -(2**31), 2**31 - 1
INT8_MIN, INT8_MAX = -(2**63), 2**63 - 1
LONG = "x" * MiB
DEFAULT_MAX_ATTEMPTS = 5
# Dedupe keys are limited in bytes (docs/errors.md), not characters. Distinct CJK characters
# (3 bytes each) do not compress, so these keys reach the btree entry at full length.
CJK_1000 = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(1000))  # 3000 bytes
KEY_1000_BYTES = CJK_1000[:333] + "k"  # 333 characters, exactly 1000 bytes
KEY_1001_BYTES = CJK_1000[:333] + "kk"

HYPOTHESIS = settings(
    max_examples=50,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)

# --- hostile values ------------------------------------------------------------------------

INJECTIONS = [
    "'; DROP TABLE hx_canary; --",
    '"; DROP TABLE hx_canary; --',
    "x'); DELETE FROM pgq._jobs; --",
    "$$; DROP TABLE hx_canary; $$",
    "$pgq$ DROP TABLE hx_canary; $pgq$",
    "%I %L %s %1$s %% %",
    "\\'; SELECT pg_sleep(10); --",
    'it\'s "quoted"; -- still data',
    "NULL",
    "E'\\x41'",
    "/* comment */ *",
]
UNICODE = [
    "🙂",
    "👩\u200d👩\u200d👧\u200d👦 family",
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u202eevil\u202c",
    "e\u0301\u0327\u0308",
    "Z\u0324\u0354\u0367\u0311\u0313a\u0308\u0356\u032d\u0308\u0307l\u036e\u0312\u036b",
    "zero\u200bwidth\u200d",
    "\ufeffbom",
    "日本語のテキスト",
    "\U0001d573\U0001d594\U0001d598\U0001d599\U0001d58e\U0001d591\U0001d58a",
    "line\u2028para\u2029",
]
CONTROL = [
    "a\u0001b",
    "\u001b[31mred\u001b[0m",
    "tab\there",
    "new\nline",
    "cr\rx",
    "del\u007f",
    "c1\u0085",
    "csi\u009b2J",
    "\u0007bell",
]
EDGE = ["", " ", "   ", " lead", "trail ", "a" * 200, "a" * 201, "🙂" * 200, "🙂" * 201, LONG]
HOSTILE_TEXT = [*INJECTIONS, *UNICODE, *CONTROL, *EDGE]

DEEP = "[" * 1000 + "]" * 1000
DEEP_OBJECT = '{"a": ' * 1000 + "1" + "}" * 1000
OVER_LIMIT = json.dumps("x" * (MiB + 100))  # a jsonb string over 1 MiB
BIG_HEADERS = json.dumps({"k": "x" * 70_000})  # an object over 64 KiB

# Intervals with the seconds PostgreSQL compares them by (a month is 30 days there, so
# '10 years' is 3600 days and '3650 days' is longer).
YEAR = 360 * 86400
INTERVALS = [
    ("-178000000 years", -178_000_000 * YEAR),
    ("-1 second", -1),
    ("1 mon -31 days", -86400),
    ("0", 0),
    ("00:00:00.000001", 1e-6),
    ("1 second", 1),
    ("59 seconds", 59),
    ("1 minute", 60),
    ("1 hour", 3600),
    ("1 day", 86400),
    ("1 day 00:00:01", 86401),
    ("31 days", 31 * 86400),
    ("31 days 00:00:01", 31 * 86400 + 1),
    ("10 years", 10 * YEAR),
    ("3650 days", 3650 * 86400),
    ("10 years 00:00:01", 10 * YEAR + 1),
    ("2147483647 days", 2147483647 * 86400),
    ("178000000 years", 178_000_000 * YEAR),
]
# Timestamps: the finite extremes of timestamptz and both infinities.
RUN_ATS = [
    None,
    "-infinity",
    "infinity",
    "4713-01-01 00:00:00+00 BC",
    "1970-01-01 00:00:00+00",
    "2999-12-31 00:00:00+00",
    "294276-12-31 23:59:59+00",
]
FUTURE_RUN_ATS = {"2999-12-31 00:00:00+00", "294276-12-31 23:59:59+00"}
INT4_EXTREMES = [INT4_MIN, INT4_MIN + 1, -1, 0, 1, 1000, 1001, 10000, 10001, INT4_MAX]

CRONS: list[tuple[str | None, bool]] = [
    ("* * * * *", True),
    ("*/5 * * * *", True),
    ("0 0 * * mon-fri", True),
    ("@hourly", True),
    ("@DAILY", True),
    ("  * * * * *  ", True),
    ("\t*\t*\t*\t*\t*\n", True),
    ("0-59/15 0-23 1-31 1-12 0-7", True),
    ("59 23 31 12 7", True),
    ("0 0 1 JAN sun", True),
    ("0 0 31 2 *", False),  # matches no date
    (None, False),
    ("", False),
    ("   ", False),
    ("* * * *", False),
    ("* * * * * *", False),
    ("60 * * * *", False),
    ("* 24 * * *", False),
    ("* * 0 * *", False),
    ("* * * 13 *", False),
    ("* * * * 8", False),
    ("*/0 * * * *", False),
    ("5-1 * * * *", False),
    ("1-2-3 * * * *", False),
    ("-1 * * * *", False),
    ("1/2/3 * * * *", False),
    ("*/ * * * *", False),
    ("*,,* * * * *", False),
    ("99999999999999999999 * * * *", False),
    ("*/99999999999999999999 * * * *", False),
    ("0-99999999999999999999 * * * *", False),
    ("\u0661 * * * *", False),
    ("@reboot", False),
    ("@", False),
    ("'; DROP TABLE x; -- * * * *", False),
    ("* * * foo *", False),
    ("% * * * *", False),
    (LONG, False),
]


def is_control(s: str) -> bool:
    return any(unicodedata.category(c) == "Cc" for c in s)


def entrypoint_ok(s: str | None) -> bool:
    """docs/errors.md: 1-200 characters, no control characters, no leading/trailing spaces."""
    return s is not None and s.strip(" ") != "" and len(s) <= 200 and s == s.strip(" ") and not is_control(s)


def worker_name_ok(s: str | None) -> bool:
    return s is not None and s.strip(" ") != "" and len(s) <= 200


def schedule_name_ok(s: str | None) -> bool:
    return worker_name_ok(s) and not is_control(s)


def entrypoints_ok(values: list[str | None] | None) -> bool:
    return bool(values) and len(values) <= 1000 and all(entrypoint_ok(v) for v in values)


def dedupe_key_ok(s: str | None) -> bool:
    """docs/errors.md: NULL, or 1 to 1000 bytes."""
    return s is None or 1 <= len(s.encode()) <= 1000


def ids_ok(values: list[int | None] | None) -> bool:
    return values is not None and len(values) <= 10000 and None not in values


# --- strategies ----------------------------------------------------------------------------


def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Valid values four times in five, so that calls with several arguments still succeed
    often enough to check their results (st.one_of does not weight its branches)."""
    return st.integers(0, 9).flatmap(lambda i: bad if i < 2 else good)


CHARS = st.characters(exclude_categories=("Cs",), exclude_characters="\x00")
texts = st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(CHARS, max_size=60))
maybe_texts = st.one_of(st.none(), texts)
# Dedupe keys: valid up to 1000 bytes (random text of up to 300 characters may be more).
dedupe_keys = mostly(
    st.one_of(
        st.none(),
        st.text(CHARS, min_size=1, max_size=300),
        st.sampled_from([*INJECTIONS, "k" * 1000, "é" * 500, "🙂" * 250, KEY_1000_BYTES]),
    ),
    st.sampled_from(
        [*UNICODE, *CONTROL, "", " ", "k" * 1001, "é" * 501, "🙂" * 251, KEY_1001_BYTES, CJK_1000, LONG]
    ),
)
# Names pgq must accept (printable, 1-200 characters, no edge spaces) and hostile ones.
good_names = st.one_of(
    st.sampled_from([*INJECTIONS, *UNICODE, "a" * 200, "🙂" * 200]),
    st.text(st.characters(exclude_categories=("Cs", "Cc")), min_size=1, max_size=30).filter(entrypoint_ok),
)
names = st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(CHARS, min_size=1, max_size=30))
maybe_names = mostly(good_names, st.one_of(st.none(), names))
name_lists = mostly(
    st.lists(good_names, min_size=1, max_size=5),
    st.one_of(
        st.none(),
        st.lists(st.one_of(st.none(), names), max_size=5),
        st.sampled_from(["many1001", "many10001"]),
    ),
)
int4s = st.one_of(st.none(), st.sampled_from(INT4_EXTREMES), st.integers(INT4_MIN, INT4_MAX))
attempts = mostly(st.one_of(st.none(), st.integers(1, 1000)), int4s)
int8s = st.one_of(
    st.sampled_from([INT8_MIN, INT8_MIN + 1, -1, 0, 1, INT8_MAX]), st.integers(INT8_MIN, INT8_MAX)
)
json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(CHARS, max_size=20),
    st.sampled_from([*INJECTIONS, *UNICODE, *CONTROL]),
)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.one_of(st.text(CHARS, max_size=10), st.sampled_from(INJECTIONS)), inner, max_size=4
        ),
    ),
    max_leaves=15,
)


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


# A payload as JSON text (None: SQL NULL); OVER_LIMIT is over 1 MiB.
payloads = st.one_of(
    st.none(),
    st.sampled_from([DEEP, DEEP_OBJECT, "null", "{}", "[]", '""', OVER_LIMIT]),
    json_values.map(dumps),
)
small_payloads = st.one_of(
    st.none(), st.sampled_from([DEEP, DEEP_OBJECT, "null", "{}"]), json_values.map(dumps)
)
# Headers as (JSON text, kind): kind is "object", "other" (not an object) or "big".
headers = mostly(
    st.one_of(
        st.just((None, "object")),
        st.dictionaries(st.text(CHARS, max_size=10), json_values, max_size=4).map(
            lambda d: (dumps(d), "object")
        ),
    ),
    st.one_of(
        st.sampled_from(["null", "[]", "1", '"s"', "true", DEEP]).map(lambda t: (t, "other")),
        st.just((BIG_HEADERS, "big")),
    ),
)
intervals = st.one_of(st.just((None, None)), st.sampled_from(INTERVALS))
# Settings left as they are (None) most of the time, so that one hostile value is tested at once.
settings_intervals = mostly(st.just((None, None)), st.sampled_from(INTERVALS))


def expand(values: Any, fill: Any) -> Any:
    """Markers for the long arrays: 1001 or 10001 copies of fill."""
    if values == "many1001":
        return [fill] * 1001
    if values == "many10001":
        return [fill] * 10001
    return values


# --- calling -------------------------------------------------------------------------------


def snapshot(conn: psycopg.Connection) -> tuple[Any, ...]:
    """Counts and content hashes of the internal tables."""
    return conn.execute(
        "SELECT (SELECT count(*) FROM pgq._jobs), (SELECT count(*) FROM pgq._queues),"
        " (SELECT count(*) FROM pgq._schedules), (SELECT count(*) FROM pgq._workers),"
        " (SELECT count(*) FROM pgq._outcomes),"
        " (SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t.id), '')) FROM pgq._jobs AS t),"
        " (SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t.entrypoint), '')) FROM pgq._queues AS t),"
        " (SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t.name), '')) FROM pgq._schedules AS t),"
        " (SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t.id), '')) FROM pgq._workers AS t)"
    ).fetchone()


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 300 else text[:300] + f"...({len(text)} chars)"


@dataclass
class Result:
    rows: list[tuple[Any, ...]] | None
    sqlstate: str | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.sqlstate is None

    @property
    def value(self) -> Any:
        assert self.rows is not None and len(self.rows) == 1
        return self.rows[0][0]


def call(conn: psycopg.Connection, query: str, params: tuple[Any, ...] = ()) -> Result:
    """Run one statement: a success, or a PQ error that changed nothing."""
    before = snapshot(conn)
    try:
        with conn.transaction():  # a transaction in autocommit mode, else a savepoint
            cur = conn.execute(query, params or None)
            rows = cur.fetchall() if cur.description else []
    except psycopg.Error as exc:
        state = exc.sqlstate or f"(no SQLSTATE: {type(exc).__name__})"
        assert state.startswith("PQ"), f"{query} with {short(params)} raised {state}: {exc}"
        assert snapshot(conn) == before, f"{query} with {short(params)} failed ({state}) but changed tables"
        return Result(None, state, str(exc))
    return Result(rows)


def check(conn: psycopg.Connection, query: str, params: tuple[Any, ...], problems: set[str] | None) -> Result:
    """problems: the SQLSTATEs the arguments call for; empty: must succeed; None: either."""
    res = call(conn, query, params)
    if problems is None:
        return res
    if problems:
        assert not res.ok, f"accepted invalid input: {query} {short(params)} -> {short(res.rows)}"
        assert res.sqlstate in problems, f"{res.sqlstate} not in {problems}: {res.message}"
    else:
        assert res.ok, f"rejected valid input: {query} {short(params)}: {res.sqlstate} {res.message}"
    return res


def enqueue(conn: psycopg.Connection, entrypoint: str, **kw: Any) -> int:
    args = sql.SQL("").join(
        sql.SQL(", {} => {}").format(sql.Identifier(k), sql.Literal(v)) for k, v in kw.items()
    )
    return conn.execute(sql.SQL("SELECT pgq.enqueue(%s{})").format(args), (entrypoint,)).fetchone()[0]


def register(conn: psycopg.Connection, entrypoints: list[str], name: str = "hx") -> uuid.UUID:
    return conn.execute("SELECT pgq.register_worker(%s, %s::text[])", (name, entrypoints)).fetchone()[0]


def claim(conn: psycopg.Connection, worker: uuid.UUID, entrypoints: list[str], n: int = 1) -> list[int]:
    rows = conn.execute(
        "SELECT id FROM pgq.claim(%s::uuid, %s::text[], %s)", (worker, entrypoints, n)
    ).fetchall()
    return [r[0] for r in rows]


@dataclass
class Ctx:
    """State for the explicit cases: workers alive and stopped, jobs held, queued and dead."""

    worker: uuid.UUID
    stopped: uuid.UUID
    held: int
    queued: int
    dead: int


@pytest.fixture
def ctx(conn: psycopg.Connection) -> Ctx:
    worker = register(conn, ["hx_ctx", "hx_dead"])
    stopped = register(conn, ["hx_ctx"], "stopped")
    conn.execute("SELECT pgq.unregister_worker(%s)", (stopped,))
    dead = enqueue(conn, "hx_dead", max_attempts=1)
    assert claim(conn, worker, ["hx_dead"]) == [dead]
    assert conn.execute("SELECT pgq.fail(%s, %s, 'x')", (worker, dead)).fetchone()[0] == "dead"
    held = enqueue(conn, "hx_ctx")
    assert claim(conn, worker, ["hx_ctx"]) == [held]
    queued = enqueue(conn, "hx_ctx", run_at="2999-01-01")
    # A schedule for run_schedules to fire and unschedule to find.
    conn.execute("SELECT pgq.schedule('hx_every_minute', '* * * * *', 'hx_s')")
    return Ctx(worker, stopped, held, queued, dead)


# --- explicit cases ------------------------------------------------------------------------

Params = tuple[Any, ...] | Callable[[Ctx], tuple[Any, ...]]
RANDOM_UUID = uuid.UUID("6f1c0e2a-3b4d-4e5f-8a9b-0c1d2e3f4a5b")
MANY_IDS = list(range(1, 10002))


@dataclass(frozen=True)
class Case:
    name: str  # <function>-<what>
    query: str
    params: Params
    expect: str  # "ok" or the SQLSTATE


def case(name: str, query: str, params: Params, expect: str) -> Case:
    return Case(name, query, params, expect)


ENQ = "SELECT pgq.enqueue(%s::text, %s::jsonb)"


def enq_arg(param: str, type_: str) -> str:
    return f"SELECT pgq.enqueue('hx_e', {param} => %s::{type_})"


BATCH = "SELECT * FROM pgq.enqueue_batch('hx_b', %s::jsonb[])"
REGISTER_NAME = "SELECT pgq.register_worker(%s, '{hx}')"
REGISTER_EPS = "SELECT pgq.register_worker('w', %s::text[])"
CLAIM_EPS = "SELECT * FROM pgq.claim(%s::uuid, %s::text[])"
COMPLETE = "SELECT * FROM pgq.complete(%s::uuid, %s::bigint[])"
COMPLETE_RESULTS = "SELECT * FROM pgq.complete(%s::uuid, %s::bigint[], %s::jsonb[])"
HEARTBEAT = "SELECT * FROM pgq.heartbeat(%s::uuid)"
RUN_SCHEDULES = "SELECT pgq.run_schedules(%s::timestamptz)"
STATS = "SELECT * FROM pgq.stats(%s::interval)"
SETTINGS = "SELECT * FROM pgq.settings(%s::text[])"

CASES = [
    # enqueue
    case("enqueue-entrypoint-null", ENQ, (None, None), "PQ001"),
    case("enqueue-entrypoint-empty", ENQ, ("", None), "PQ001"),
    case("enqueue-entrypoint-blank", ENQ, ("   ", None), "PQ001"),
    case("enqueue-entrypoint-1mb", ENQ, (LONG, None), "PQ001"),
    case("enqueue-entrypoint-201", ENQ, ("a" * 201, None), "PQ001"),
    case("enqueue-entrypoint-200-emoji", ENQ, ("🙂" * 200, None), "ok"),
    case("enqueue-entrypoint-u0001", ENQ, ("a\u0001b", None), "PQ001"),
    case("enqueue-entrypoint-esc", ENQ, ("\u001b[2J", None), "PQ001"),
    case("enqueue-entrypoint-c1", ENQ, ("a\u009bb", None), "PQ001"),
    case("enqueue-entrypoint-rtl-combining", ENQ, ("\u202e\u05e9\u05dc\u05d5\u05dd e\u0301", None), "ok"),
    case("enqueue-payload-deep-array", ENQ, ("hx_e", DEEP), "ok"),
    case("enqueue-payload-deep-object", ENQ, ("hx_e", DEEP_OBJECT), "ok"),
    case("enqueue-payload-over-limit", ENQ, ("hx_e", OVER_LIMIT), "PQ004"),
    case("enqueue-payload-json-null", ENQ, ("hx_e", "null"), "ok"),
    case("enqueue-headers-over-limit", enq_arg("headers", "jsonb"), (BIG_HEADERS,), "PQ004"),
    case("enqueue-headers-json-null", enq_arg("headers", "jsonb"), ("null",), "PQ001"),
    case("enqueue-headers-array", enq_arg("headers", "jsonb"), ("[1]",), "PQ001"),
    case("enqueue-headers-deep", enq_arg("headers", "jsonb"), (DEEP,), "PQ001"),
    case("enqueue-headers-deep-object", enq_arg("headers", "jsonb"), (DEEP_OBJECT,), "ok"),
    case("enqueue-priority-max", enq_arg("priority", "int"), (INT4_MAX,), "ok"),
    case("enqueue-priority-min", enq_arg("priority", "int"), (INT4_MIN,), "ok"),
    case("enqueue-priority-null", enq_arg("priority", "int"), (None,), "ok"),
    *[
        case(f"enqueue-max-attempts-{v}", enq_arg("max_attempts", "int"), (v,), "PQ001")
        for v in (INT4_MIN, -1, 0, 1001, INT4_MAX)
    ],
    case("enqueue-max-attempts-1000", enq_arg("max_attempts", "int"), (1000,), "ok"),
    case("enqueue-run-at-infinity", enq_arg("run_at", "timestamptz"), ("infinity",), "PQ001"),
    case("enqueue-run-at-minus-infinity", enq_arg("run_at", "timestamptz"), ("-infinity",), "ok"),
    case("enqueue-run-at-max", enq_arg("run_at", "timestamptz"), ("294276-12-31 23:59:59+00",), "ok"),
    case("enqueue-run-at-min", enq_arg("run_at", "timestamptz"), ("4713-01-01 00:00+00 BC",), "ok"),
    case("enqueue-dedupe-empty", enq_arg("dedupe_key", "text"), ("",), "PQ001"),
    case("enqueue-dedupe-1001", enq_arg("dedupe_key", "text"), ("k" * 1001,), "PQ001"),
    case("enqueue-dedupe-1mb", enq_arg("dedupe_key", "text"), (LONG,), "PQ001"),
    case("enqueue-dedupe-1000", enq_arg("dedupe_key", "text"), ("k" * 1000,), "ok"),
    case("enqueue-dedupe-1000-bytes", enq_arg("dedupe_key", "text"), (KEY_1000_BYTES,), "ok"),
    case("enqueue-dedupe-1001-bytes", enq_arg("dedupe_key", "text"), (KEY_1001_BYTES,), "PQ001"),
    case("enqueue-dedupe-501-e-acute", enq_arg("dedupe_key", "text"), ("é" * 501,), "PQ001"),
    case("enqueue-dedupe-1000-cjk", enq_arg("dedupe_key", "text"), (CJK_1000,), "PQ001"),
    case("enqueue-dedupe-control", enq_arg("dedupe_key", "text"), ("\u0001\u001b",), "ok"),
    case("enqueue-depends-null-element", enq_arg("depends_on", "bigint[]"), ([None],), "PQ001"),
    case("enqueue-depends-empty", enq_arg("depends_on", "bigint[]"), ([],), "ok"),
    case("enqueue-depends-10001", enq_arg("depends_on", "bigint[]"), (MANY_IDS,), "PQ001"),
    case("enqueue-depends-negative", enq_arg("depends_on", "bigint[]"), ([-1],), "PQ001"),
    case("enqueue-depends-int8-max", enq_arg("depends_on", "bigint[]"), ([INT8_MAX],), "PQ001"),
    case(
        "enqueue-depends-duplicates",
        enq_arg("depends_on", "bigint[]"),
        lambda c: ([c.queued, c.queued, c.held],),
        "ok",
    ),
    case("enqueue-depends-dead", enq_arg("depends_on", "bigint[]"), lambda c: ([c.dead],), "ok"),
    # enqueue_batch
    case("batch-payloads-null", BATCH, (None,), "PQ001"),
    case("batch-payloads-empty", BATCH, ([],), "ok"),
    case("batch-payloads-100001", BATCH, ([None] * 100001,), "PQ001"),
    case("batch-payloads-10001-nulls", BATCH, ([None] * 10001,), "ok"),
    case("batch-payload-over-limit", BATCH, (["{}", OVER_LIMIT],), "PQ004"),
    case("batch-payload-deep", BATCH, ([DEEP, DEEP_OBJECT],), "ok"),
    case("batch-entrypoint-null", "SELECT * FROM pgq.enqueue_batch(%s, '{}')", (None,), "PQ001"),
    case("batch-entrypoint-1mb", "SELECT * FROM pgq.enqueue_batch(%s, '{}')", (LONG,), "PQ001"),
    case(
        "batch-run-at-infinity",
        "SELECT * FROM pgq.enqueue_batch('hx_b', '{null}', run_at => %s::timestamptz)",
        ("infinity",),
        "PQ001",
    ),
    case(
        "batch-priority-min",
        "SELECT * FROM pgq.enqueue_batch('hx_b', '{null}', priority => %s::int)",
        (INT4_MIN,),
        "ok",
    ),
    # register_worker
    case("register-name-null", REGISTER_NAME, (None,), "PQ001"),
    case("register-name-empty", REGISTER_NAME, ("",), "PQ001"),
    case("register-name-1mb", REGISTER_NAME, (LONG,), "PQ001"),
    case("register-name-control", REGISTER_NAME, ("\u001b[2J\u0001",), "ok"),
    case("register-name-unicode", REGISTER_NAME, ("👩\u200d👩 \u05e9\u05dc\u05d5\u05dd",), "ok"),
    case("register-entrypoints-null", REGISTER_EPS, (None,), "PQ001"),
    case("register-entrypoints-empty", REGISTER_EPS, ([],), "PQ001"),
    case("register-entrypoints-null-element", REGISTER_EPS, ([None],), "PQ001"),
    case("register-entrypoints-1001", REGISTER_EPS, (["e"] * 1001,), "PQ001"),
    case("register-entrypoints-10001", REGISTER_EPS, (["e"] * 10001,), "PQ001"),
    case("register-entrypoints-dupes", REGISTER_EPS, (["e", "e", "f"],), "ok"),
    case("register-entrypoints-1000-distinct", REGISTER_EPS, ([f"e{i}" for i in range(1000)],), "ok"),
    # unregister_worker
    case("unregister-null", "SELECT pgq.unregister_worker(%s::uuid)", (None,), "PQ001"),
    case("unregister-unknown", "SELECT pgq.unregister_worker(%s::uuid)", (RANDOM_UUID,), "PQ002"),
    case("unregister-stopped", "SELECT pgq.unregister_worker(%s::uuid)", lambda c: (c.stopped,), "ok"),
    # claim
    case("claim-worker-null", "SELECT * FROM pgq.claim(%s::uuid, '{hx_ctx}')", (None,), "PQ001"),
    case("claim-worker-unknown", "SELECT * FROM pgq.claim(%s::uuid, '{hx_ctx}')", (RANDOM_UUID,), "PQ002"),
    case(
        "claim-worker-stopped",
        "SELECT * FROM pgq.claim(%s::uuid, '{hx_ctx}')",
        lambda c: (c.stopped,),
        "PQ003",
    ),
    *[
        case(
            f"claim-batch-{v}",
            "SELECT * FROM pgq.claim(%s::uuid, '{hx_ctx}', %s::int)",
            lambda c, v=v: (c.worker, v),
            "PQ001",
        )
        for v in (None, INT4_MIN, -1, 0, 10001, INT4_MAX)
    ],
    case(
        "claim-batch-10000",
        "SELECT * FROM pgq.claim(%s::uuid, '{hx_ctx}', 10000)",
        lambda c: (c.worker,),
        "ok",
    ),
    *[
        case(f"claim-entrypoints-{n}", CLAIM_EPS, lambda c, v=v: (c.worker, v), "PQ001")
        for n, v in [("null", None), ("empty", []), ("null-element", [None]), ("10001", ["hx_ctx"] * 10001)]
    ],
    case("claim-entrypoints-unregistered", CLAIM_EPS, lambda c: (c.worker, ["hx_ctx", "other"]), "PQ001"),
    case(
        "claim-entrypoints-dupes",
        "SELECT * FROM pgq.claim(%s::uuid, %s::text[], 5)",
        lambda c: (c.worker, ["hx_ctx", "hx_ctx"]),
        "ok",
    ),
    # heartbeat
    case("heartbeat-null", HEARTBEAT, (None,), "PQ001"),
    case("heartbeat-unknown", HEARTBEAT, (RANDOM_UUID,), "PQ002"),
    case("heartbeat-stopped", HEARTBEAT, lambda c: (c.stopped,), "PQ003"),
    case("heartbeat-alive", HEARTBEAT, lambda c: (c.worker,), "ok"),
    # complete
    case("complete-worker-null", "SELECT * FROM pgq.complete(%s::uuid, '{1}')", (None,), "PQ001"),
    *[
        case(f"complete-ids-{n}", COMPLETE, lambda c, v=v: (c.worker, v), "PQ001")
        for n, v in [("null", None), ("null-element", [1, None]), ("10001", MANY_IDS)]
    ],
    case("complete-ids-empty", "SELECT * FROM pgq.complete(%s::uuid, '{}')", lambda c: (c.worker,), "ok"),
    case("complete-ids-extremes", COMPLETE, lambda c: (c.worker, [INT8_MIN, -1, 0, INT8_MAX]), "ok"),
    case("complete-ids-dupes", COMPLETE, lambda c: (c.worker, [c.held, c.held]), "ok"),
    case(
        "complete-results-mismatch", COMPLETE_RESULTS, lambda c: (c.worker, [c.held], ["{}", "{}"]), "PQ001"
    ),
    case("complete-results-deep", COMPLETE_RESULTS, lambda c: (c.worker, [c.held], [DEEP]), "ok"),
    case("complete-stopped-worker", COMPLETE, lambda c: (c.stopped, [c.held]), "ok"),
    # fail
    case("fail-worker-null", "SELECT pgq.fail(%s::uuid, 1, 'e')", (None,), "PQ001"),
    case("fail-job-null", "SELECT pgq.fail(%s::uuid, %s::bigint, 'e')", lambda c: (c.worker, None), "PQ001"),
    case(
        "fail-error-null",
        "SELECT pgq.fail(%s::uuid, %s, %s::text)",
        lambda c: (c.worker, c.held, None),
        "PQ001",
    ),
    case("fail-error-1mb", "SELECT pgq.fail(%s::uuid, %s, %s)", lambda c: (c.worker, c.held, LONG), "ok"),
    case(
        "fail-error-control",
        "SELECT pgq.fail(%s::uuid, %s, %s)",
        lambda c: (c.worker, c.held, "\u0001\u001b"),
        "ok",
    ),
    case("fail-error-empty", "SELECT pgq.fail(%s::uuid, %s, '')", lambda c: (c.worker, c.held), "ok"),
    *[
        case(
            f"fail-retry-in-{t}",
            "SELECT pgq.fail(%s::uuid, %s, 'e', %s::interval)",
            lambda c, t=t: (c.worker, c.held, t),
            "PQ001" if (s < 0 or s > 10 * YEAR) else "ok",
        )
        for t, s in INTERVALS
    ],
    *[
        case(
            f"fail-job-{v}", "SELECT pgq.fail(%s::uuid, %s::bigint, 'e')", lambda c, v=v: (c.worker, v), "ok"
        )
        for v in (INT8_MIN, -1, 0, INT8_MAX)
    ],
    # job_status
    case("job-status-null", "SELECT pgq.job_status(%s::bigint)", (None,), "PQ001"),
    *[
        case(f"job-status-{v}", "SELECT pgq.job_status(%s::bigint)", (v,), "ok")
        for v in (INT8_MIN, -1, 0, INT8_MAX)
    ],
    # reap, prune
    case("reap", "SELECT pgq.reap()", (), "ok"),
    case("prune", "SELECT pgq.prune()", (), "ok"),
    # cancel, retry
    *[
        case(f"{fn}-ids-{n}", f"SELECT pgq.{fn}(%s::bigint[])", (v,), "PQ001")
        for fn in ("cancel", "retry", "run_now")
        for n, v in [("null", None), ("null-element", [1, None]), ("10001", MANY_IDS)]
    ],
    *[
        case(f"{fn}-ids-{n}", f"SELECT pgq.{fn}(%s::bigint[])", v, "ok")
        for fn in ("cancel", "retry", "run_now")
        for n, v in [
            ("empty", ([],)),
            ("extremes", ([INT8_MIN, -1, 0, INT8_MAX],)),
            ("10000", (list(range(1, 10001)),)),
            ("dupes", lambda c: ([c.dead, c.dead, c.queued, c.queued, c.held],)),
        ]
    ],
    # pause, resume
    *[
        case(f"{fn}-{n}", f"SELECT pgq.{fn}(%s)", (v,), "PQ001")
        for fn in ("pause", "resume")
        for n, v in [("null", None), ("empty", ""), ("1mb", LONG), ("control", "a\u001b"), ("spaces", " a ")]
    ],
    *[
        case(f"{fn}-unicode", f"SELECT pgq.{fn}(%s)", ("🙂 \u05e9\u05dc\u05d5\u05dd e\u0301",), "ok")
        for fn in ("pause", "resume")
    ],
    # isolate, unisolate
    *[
        case(f"{fn}-{n}", f"SELECT pgq.{fn}(%s)", (v,), "PQ001")
        for fn in ("isolate", "unisolate")
        for n, v in [("null", None), ("empty", ""), ("1mb", LONG), ("control", "a\u001b"), ("spaces", " a ")]
    ],
    *[
        case(f"{fn}-{n}", f"SELECT pgq.{fn}(%s)", (v,), "ok")
        for fn in ("isolate", "unisolate")
        for n, v in [
            ("unicode", "🙂 \u05e9\u05dc\u05d5\u05dd e\u0301"),
            ("200", "e" * 200),
            ("quote", "a'); DROP TABLE x; --"),
        ]
    ],
    # configure
    case("configure-entrypoint-null", "SELECT pgq.configure(%s)", (None,), "PQ001"),
    case("configure-entrypoint-1mb", "SELECT pgq.configure(%s)", (LONG,), "PQ001"),
    case("configure-nothing", "SELECT pgq.configure('hx_c')", (), "ok"),
    *[
        case(
            f"configure-max-attempts-{v}",
            "SELECT pgq.configure('hx_c', max_attempts => %s::int)",
            (v,),
            "PQ001",
        )
        for v in (INT4_MIN, -1, 0, 1001, INT4_MAX)
    ],
    *[
        case(
            f"configure-concurrency-{v}",
            "SELECT pgq.configure('hx_c', concurrency => %s::int)",
            (v,),
            "PQ001",
        )
        for v in (INT4_MIN, -1, 1000001, INT4_MAX)
    ],
    case("configure-concurrency-0", "SELECT pgq.configure('hx_c', concurrency => 0)", (), "ok"),
    *[
        case(f"configure-rate-{v}", "SELECT pgq.configure('hx_c', rate => %s::numeric)", (v,), "PQ001")
        for v in ("NaN", "Infinity", "-Infinity", "-1", "0.0009", "1000000.001", "1e-100", "1e100")
    ],
    case("configure-rate-0", "SELECT pgq.configure('hx_c', rate => 0)", (), "ok"),
    *[
        case(
            f"configure-{param}-{t}",
            f"SELECT pgq.configure('hx_c', {param} => %s::interval)",
            (t,),
            "ok" if lo <= s <= hi else "PQ001",
        )
        for param, lo, hi in [
            ("backoff_base", 0, 3600),
            ("backoff_max", 1, 10 * YEAR),
            ("lease", 1, 86400),
            ("timeout", 1, 10 * YEAR),
            ("retention", 60, 10 * YEAR),
        ]
        for t, s in INTERVALS
    ],
    case(
        "configure-backoff-max-below-base",
        "SELECT pgq.configure('hx_c', backoff_base => '1 hour', backoff_max => '1 minute')",
        (),
        "PQ001",
    ),
    # settings
    *[
        case(f"settings-{n}", SETTINGS, (v,), "PQ001")
        for n, v in [("null", None), ("empty", []), ("null-element", ["a", None]), ("1001", ["a"] * 1001)]
    ],
    case("settings-dupes", SETTINGS, (["a", "a", "🙂"],), "ok"),
    # schedule, unschedule, run_schedules
    *[
        case(f"schedule-name-{n}", "SELECT pgq.schedule(%s, '* * * * *', 'hx_s')", (v,), "PQ001")
        for n, v in [
            ("null", None),
            ("empty", ""),
            ("blank", "  "),
            ("1mb", LONG),
            ("201", "n" * 201),
            ("esc", "\u001b"),
        ]
    ],
    *[
        case(
            f"schedule-cron-{i}", "SELECT pgq.schedule('hx', %s, 'hx_s')", (cron,), "ok" if valid else "PQ006"
        )
        for i, (cron, valid) in enumerate(CRONS)
    ],
    case("schedule-entrypoint-null", "SELECT pgq.schedule('hx', '* * * * *', %s)", (None,), "PQ001"),
    case(
        "schedule-payload-over-limit",
        "SELECT pgq.schedule('hx', '* * * * *', 'hx_s', %s::jsonb)",
        (OVER_LIMIT,),
        "PQ004",
    ),
    case("schedule-payload-deep", "SELECT pgq.schedule('hx', '* * * * *', 'hx_s', %s::jsonb)", (DEEP,), "ok"),
    case("unschedule-null", "SELECT pgq.unschedule(%s)", (None,), "PQ001"),
    case("unschedule-empty", "SELECT pgq.unschedule(%s)", ("",), "ok"),
    case("unschedule-1mb", "SELECT pgq.unschedule(%s)", (LONG,), "ok"),
    case("trigger-schedule-null", "SELECT pgq.trigger_schedule(%s)", (None,), "PQ001"),
    case("trigger-schedule-unknown", "SELECT pgq.trigger_schedule(%s)", ("",), "PQ001"),
    case("trigger-schedule-1mb", "SELECT pgq.trigger_schedule(%s)", (LONG,), "PQ001"),
    # now: from 1970-01-01 up to the end of 9999 UTC, else PQ001 (no overflow near the ends of time).
    *[
        case(f"run-schedules-{v}", RUN_SCHEDULES, (v,), "PQ001")
        for v in (
            "infinity",
            "-infinity",
            "4713-01-01 00:00+00 BC",
            "1969-12-31 23:59:59.999999+00",
            "10000-01-01 00:00+00",
            "200000-01-01 00:00+00",
            "294270-01-01 00:00+00",
            "294276-12-31 23:59:59+00",
        )
    ],
    *[
        case(f"run-schedules-{v}", RUN_SCHEDULES, (v,), "ok")
        for v in (
            None,
            "1970-01-01 00:00+00",
            "1970-01-01 01:00+01",
            "2999-12-31 00:00+00",
            "9999-12-31 00:00+00",
            "9999-12-31 01:00+01",
            "9999-12-31 23:59:59.999999+00",
        )
    ],
    # stats
    case("stats-null", STATS, (None,), "PQ001"),
    *[case(f"stats-{t}", STATS, (t,), "ok" if 1 <= s <= 31 * 86400 else "PQ001") for t, s in INTERVALS],
]


@pytest.mark.parametrize("function", sorted({c.name.split("-")[0] for c in CASES}))
def test_explicit_hostile_cases(conn: psycopg.Connection, ctx: Ctx, function: str) -> None:
    """Each case runs in a transaction rolled back after it, so all start from ctx."""
    failures = []
    for c in CASES:
        if c.name.split("-")[0] != function:
            continue
        args = c.params(ctx) if callable(c.params) else c.params
        try:
            with conn.transaction(force_rollback=True):
                check(conn, c.query, args, set() if c.expect == "ok" else {c.expect})
        except AssertionError as exc:
            failures.append(f"{c.name}: {str(exc)[:500]}")
    assert not failures, "\n".join(failures)


# --- explicit cases with a result to check ---------------------------------------------------


def test_deep_json_round_trips(conn: psycopg.Connection) -> None:
    for payload in (DEEP, DEEP_OBJECT):
        job = conn.execute(
            "SELECT pgq.enqueue('hx_deep', %s::jsonb, headers => %s::jsonb)", (payload, DEEP_OBJECT)
        ).fetchone()[0]
        same = conn.execute(
            "SELECT payload = %s::jsonb, headers = %s::jsonb FROM pgq.jobs WHERE id = %s",
            (payload, DEEP_OBJECT, job),
        ).fetchone()
        assert same == (True, True)
    ids = [
        r[0] for r in conn.execute("SELECT * FROM pgq.enqueue_batch('hx_deep', %s::jsonb[])", ([DEEP, None],))
    ]
    assert conn.execute(
        "SELECT array_agg(payload IS NOT DISTINCT FROM p ORDER BY id) FROM pgq.jobs"
        " JOIN unnest(%s::bigint[], %s::jsonb[]) AS u (i, p) ON u.i = id",
        (ids, [DEEP, None]),
    ).fetchone()[0] == [True, True]


def test_long_values_are_kept_or_cut_as_documented(conn: psycopg.Connection) -> None:
    worker = register(conn, ["hx_long"])
    job = enqueue(conn, "hx_long")
    claim(conn, worker, ["hx_long"])
    error = "é" * (MiB // 2)
    assert conn.execute("SELECT pgq.fail(%s, %s, %s)", (worker, job, error)).fetchone()[0] == "queued"
    kept = conn.execute("SELECT last_error FROM pgq.jobs WHERE id = %s", (job,)).fetchone()[0]
    assert kept == error[:65536]
    logged = conn.execute("SELECT error FROM pgq.outcomes WHERE job_id = %s", (job,)).fetchone()[0]
    assert logged == error[:65536]

    name = "🙂" * 200
    worker = conn.execute("SELECT pgq.register_worker(%s, %s::text[])", (name, [name, name])).fetchone()[0]
    assert conn.execute("SELECT name, entrypoints FROM pgq.workers WHERE id = %s", (worker,)).fetchone() == (
        name,
        [name],
    )


def test_enqueue_batch_10001_payloads_keep_their_order(conn: psycopg.Connection) -> None:
    payloads = [None if i % 7 == 0 else json.dumps({"i": i}) for i in range(10001)]
    ids = [r[0] for r in conn.execute("SELECT * FROM pgq.enqueue_batch('hx_many', %s::jsonb[])", (payloads,))]
    assert len(ids) == 10001 and ids == sorted(ids) and len(set(ids)) == 10001
    stored = conn.execute(
        "SELECT array_agg(payload->>'i' ORDER BY id) FROM pgq._jobs WHERE entrypoint = 'hx_many'"
    ).fetchone()[0]
    assert stored == [None if p is None else str(i) for i, p in enumerate(payloads)]


def test_id_arrays_with_duplicates_count_each_job_once(conn: psycopg.Connection) -> None:
    jobs = [enqueue(conn, "hx_dup") for _ in range(3)]
    assert conn.execute("SELECT pgq.cancel(%s::bigint[])", (jobs + jobs + [-1, INT8_MAX],)).fetchone()[0] == 3
    conn.execute("SELECT pgq.configure('hx_dup', max_attempts => 1)")
    worker = register(conn, ["hx_dup"])
    dead = enqueue(conn, "hx_dup")
    claim(conn, worker, ["hx_dup"])
    conn.execute("SELECT pgq.fail(%s, %s, 'x')", (worker, dead))
    assert conn.execute("SELECT pgq.retry(%s::bigint[])", ([dead, dead, dead],)).fetchone()[0] == 1
    held = claim(conn, worker, ["hx_dup"])
    assert held == [dead]
    done = conn.execute("SELECT * FROM pgq.complete(%s, %s::bigint[])", (worker, [dead, dead, 0])).fetchall()
    assert done == [(dead,)]


# --- injection: data stays data --------------------------------------------------------------


@pytest.fixture
def canary(conn: psycopg.Connection) -> Iterator[None]:
    """A table named by the injections; it must survive every call."""
    conn.execute("CREATE TABLE IF NOT EXISTS hx_canary (x int)")
    conn.execute("CREATE TABLE IF NOT EXISTS x (x int)")
    yield
    assert conn.execute(
        "SELECT to_regclass('hx_canary') IS NOT NULL AND to_regclass('x') IS NOT NULL"
    ).fetchone()[0]
    conn.execute("DROP TABLE hx_canary, x")


@pytest.mark.usefixtures("canary")
@pytest.mark.parametrize("text", [*INJECTIONS, *UNICODE], ids=range(len(INJECTIONS) + len(UNICODE)))
def test_hostile_strings_round_trip_as_data(conn: psycopg.Connection, text: str) -> None:
    entrypoint = text.strip(" ") or "hx"
    headers = {"k": text, text: [text]}
    payload = {"s": text, text: {"n": [text, 1]}}
    job = conn.execute(
        "SELECT pgq.enqueue(%s, %s::jsonb, dedupe_key => %s, headers => %s::jsonb)",
        (entrypoint, dumps(payload), text, dumps(headers)),
    ).fetchone()[0]
    row = conn.execute(
        "SELECT entrypoint, dedupe_key, payload, headers FROM pgq.jobs WHERE id = %s", (job,)
    ).fetchone()
    assert row == (entrypoint, text, payload, headers)
    # The same key finds the same job.
    again = conn.execute("SELECT pgq.enqueue(%s, dedupe_key => %s)", (entrypoint, text)).fetchone()[0]
    assert again == job

    conn.execute("SELECT pgq.configure(%s, max_attempts => 2)", (entrypoint,))
    conn.execute("SELECT pgq.pause(%s)", (entrypoint,))
    queue = conn.execute(
        "SELECT entrypoint, paused, max_attempts FROM pgq.queues WHERE entrypoint = %s", (entrypoint,)
    )
    assert queue.fetchone() == (entrypoint, True, 2)
    conn.execute("SELECT pgq.resume(%s)", (entrypoint,))
    worker = register(conn, [entrypoint], name=text or "w")
    assert claim(conn, worker, [entrypoint]) == [job]
    assert conn.execute("SELECT pgq.fail(%s, %s, %s, '0')", (worker, job, text)).fetchone()[0] == "queued"
    assert conn.execute("SELECT last_error FROM pgq.jobs WHERE id = %s", (job,)).fetchone()[0] == text
    assert claim(conn, worker, [entrypoint]) == [job]
    assert conn.execute(
        "SELECT * FROM pgq.complete(%s, ARRAY[%s]::bigint[], ARRAY[%s::jsonb])", (worker, job, dumps(payload))
    ).fetchall() == [(job,)]
    assert (
        conn.execute(
            "SELECT result FROM pgq.outcomes WHERE job_id = %s AND outcome = 'succeeded'", (job,)
        ).fetchone()[0]
        == payload
    )
    stats = conn.execute(
        "SELECT entrypoint, succeeded, failed FROM pgq.stats('1 hour') WHERE entrypoint = %s", (entrypoint,)
    )
    assert stats.fetchall() == [(entrypoint, 1, 1)]

    # Schedules: name, entrypoint and payload are data; the job they enqueue says so.
    name = text.strip(" ") or "hx"
    conn.execute("SELECT pgq.schedule(%s, '* * * * *', %s, %s::jsonb)", (name, entrypoint, dumps(payload)))
    sched = conn.execute(
        "SELECT name, cron, entrypoint, payload, next_run::text FROM pgq.schedules WHERE name = %s", (name,)
    )
    row = sched.fetchone()
    assert row[:4] == (name, "* * * * *", entrypoint, payload)
    assert conn.execute("SELECT pgq.run_schedules(%s::timestamptz)", (row[4],)).fetchone()[0] == 1
    fired = conn.execute(
        "SELECT dedupe_key, headers->>'schedule', payload FROM pgq.jobs"
        " WHERE entrypoint = %s AND headers ? 'schedule'",
        (entrypoint,),
    ).fetchone()
    assert fired[1] == name and fired[2] == payload
    assert fired[0].startswith(f"schedule:{name}:")
    assert conn.execute("SELECT pgq.unschedule(%s)", (name,)).fetchone()[0] is True
    assert conn.execute("SELECT pgq.unschedule(%s)", (name,)).fetchone()[0] is False


@pytest.mark.parametrize(
    "entrypoint",
    [
        'it\'s "quoted" 🙂 \u05e9\u05dc\u05d5\u05dd e\u0301',
        "'; NOTIFY pgq, 'x'; --",
        "$$ %I %L \\ $$",
        "🙂" * 200,
    ],
    ids=["quotes-unicode", "notify-injection", "dollar-format", "200-emoji"],
)
def test_notify_payload_is_the_entrypoint(dsn: str, conn: psycopg.Connection, entrypoint: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier("pgq")))
        conn.execute("SELECT pgq.enqueue(%s)", (entrypoint,))
        conn.execute("SELECT * FROM pgq.enqueue_batch(%s, '{null}')", (entrypoint,))
        conn.execute("SELECT pgq.pause(%s)", (entrypoint,))
        conn.execute("SELECT pgq.resume(%s)", (entrypoint,))
        got = [(n.channel, n.payload) for n in listener.notifies(timeout=5, stop_after=3)]
    assert got == [("pgq", entrypoint)] * 3


@pytest.mark.usefixtures("canary")
def test_enqueue_trigger_with_hostile_names(conn: psycopg.Connection) -> None:
    table = "t'; DROP TABLE hx_canary; --"
    entrypoint = 'it\'s "q"; DROP TABLE x; -- 🙂'
    tbl = sql.Identifier(table)
    conn.execute(sql.SQL("CREATE TABLE {} (id int, note text)").format(tbl))
    try:
        conn.execute(
            sql.SQL(
                "CREATE TRIGGER hx AFTER INSERT OR DELETE ON {} FOR EACH ROW"
                " EXECUTE FUNCTION pgq.enqueue_trigger({}, '-7')"
            ).format(tbl, sql.Literal(entrypoint))
        )
        conn.execute(sql.SQL("INSERT INTO {} VALUES (1, %s)").format(tbl), ("$$'; --\u202e",))
        conn.execute(sql.SQL("DELETE FROM {}").format(tbl))
        rows = conn.execute(
            "SELECT payload, headers, priority FROM pgq.jobs WHERE entrypoint = %s ORDER BY id", (entrypoint,)
        ).fetchall()
        expect_headers = {"table": table, "schema": "public"}
        assert [(p, {k: h[k] for k in expect_headers}, h["op"], pr) for p, h, pr in rows] == [
            ({"id": 1, "note": "$$'; --\u202e"}, expect_headers, "INSERT", -7),
            ({"id": 1, "note": "$$'; --\u202e"}, expect_headers, "DELETE", -7),
        ]

        # Bad trigger arguments and oversized rows are PQ errors of the triggering statement.
        bad = [
            ("a\u001b", "1", "PQ001"),
            ("", "1", "PQ001"),
            ("ok", "abc", "PQ001"),
            ("ok", "99999999999", "PQ001"),
            ("ok", "1; DROP TABLE x", "PQ001"),
        ]
        for ep, priority, code in bad:
            conn.execute(sql.SQL("DROP TRIGGER hx ON {}").format(tbl))
            conn.execute(
                sql.SQL(
                    "CREATE TRIGGER hx AFTER INSERT ON {} FOR EACH ROW"
                    " EXECUTE FUNCTION pgq.enqueue_trigger({}, {})"
                ).format(tbl, sql.Literal(ep), sql.Literal(priority))
            )
            res = call(conn, sql.SQL("INSERT INTO {} VALUES (2, 'x')").format(tbl).as_string(conn))
            assert res.sqlstate == code, (ep, priority, res)
        conn.execute(sql.SQL("DROP TRIGGER hx ON {}").format(tbl))
        conn.execute(
            sql.SQL(
                "CREATE TRIGGER hx AFTER INSERT ON {} FOR EACH ROW"
                " EXECUTE FUNCTION pgq.enqueue_trigger('hx_t')"
            ).format(tbl)
        )
        res = call(
            conn, sql.SQL("INSERT INTO {} VALUES (3, repeat('x', 1100000))").format(tbl).as_string(conn)
        )
        assert res.sqlstate == "PQ004"
        conn.execute(sql.SQL("DROP TRIGGER hx ON {}").format(tbl))
        conn.execute(
            sql.SQL(
                "CREATE TRIGGER hx AFTER INSERT ON {} FOR EACH STATEMENT"
                " EXECUTE FUNCTION pgq.enqueue_trigger('hx_t')"
            ).format(tbl)
        )
        res = call(conn, sql.SQL("INSERT INTO {} VALUES (4, 'x')").format(tbl).as_string(conn))
        assert res.sqlstate == "PQ001"
        assert conn.execute(sql.SQL("SELECT count(*) FROM {}").format(tbl)).fetchone()[0] == 0
    finally:
        conn.execute(sql.SQL("DROP TABLE {}").format(tbl))


# --- pg_cron: the commands hold no user input ---------------------------------------------------


@pytest.fixture
def needs_cron() -> None:
    with psycopg.connect(ADMIN_DSN, autocommit=True) as c:
        if not c.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_cron'").fetchone():
            pytest.skip("pg_cron is not installed in the maintenance database")


@pytest.fixture
def hostile_databases() -> Iterator[list[str]]:
    """Databases (and their pg_cron jobs) removed after the test, whatever happened."""
    created: list[str] = []
    yield created
    with psycopg.connect(ADMIN_DSN, autocommit=True) as c:
        for name in created:
            c.execute(
                "SELECT cron.unschedule(jobid) FROM cron.job"
                " WHERE database = %s OR position(%s IN jobname::text) > 0",
                (name, name[:30]),
            )
    for name in created:
        drop_database(name)


def cron_rows(name: str) -> list[tuple[str, str, str, str]]:
    with psycopg.connect(ADMIN_DSN, autocommit=True) as c:
        return c.execute(
            "SELECT jobname::text, schedule, command, database FROM cron.job"
            " WHERE database = %s OR jobname::text LIKE 'pgq-%%' AND position(%s IN jobname::text) > 0"
            " ORDER BY jobname",
            (name, name),
        ).fetchall()


@pytest.mark.usefixtures("needs_cron")
def test_pg_cron_commands_hold_no_user_input(hostile_databases: list[str]) -> None:
    name = f"pgq_h'; select 1; --{uuid.uuid4().hex[:8]}"
    hostile_databases.append(name)
    dsn = create_database(name)
    migrate.install(dsn, cron=True)

    rows = cron_rows(name)
    commands = {cmd for _, _, cmd in migrate.CRON_JOBS}
    in_db = [r for r in rows if r[3] == name]
    assert sorted(r[0] for r in in_db) == sorted(f"pgq-{n}:{name}" for n, _, _ in migrate.CRON_JOBS)
    assert {r[2] for r in in_db} == commands
    log_jobs = [r for r in rows if r[3] != name]
    assert [(r[0], r[2]) for r in log_jobs] == [
        (f"pgq-{migrate.CRON_LOG_JOB[0]}:{name}", migrate.CRON_LOG_JOB[2])
    ]
    for _, schedule, command, _ in rows:
        assert name not in command and "select 1" not in command.lower()
        assert schedule in {s for _, s, _ in [*migrate.CRON_JOBS, migrate.CRON_LOG_JOB]}
    with psycopg.connect(dsn, autocommit=True) as c:
        for command in commands:
            c.execute(command)  # each runs as is in the queue's database

    migrate.uninstall(dsn)
    assert cron_rows(name) == []


# --- hypothesis: each public function ---------------------------------------------------------


@HYPOTHESIS
@given(
    entrypoint=maybe_names,
    payload=payloads,
    priority=int4s,
    run_at=mostly(st.sampled_from([r for r in RUN_ATS if r != "infinity"]), st.just("infinity")),
    dedupe_key=dedupe_keys,
    header=headers,
    max_attempts=attempts,
    depends=mostly(
        st.sampled_from(["none", "empty", "live", "live-dupes"]),
        st.sampled_from(["null", "negative", "int8max", "many"]),
    ),
)
def test_enqueue_property(
    conn: psycopg.Connection,
    entrypoint: str | None,
    payload: str | None,
    priority: int | None,
    run_at: str | None,
    dedupe_key: str | None,
    header: tuple[str | None, str],
    max_attempts: int | None,
    depends: str,
) -> None:
    anchor = enqueue(conn, "hx_anchor")
    depends_on = {
        "none": None,
        "empty": [],
        "null": [anchor, None],
        "negative": [-1],
        "int8max": [INT8_MAX],
        "live": [anchor],
        "live-dupes": [anchor, anchor],
        "many": [anchor] * 10001,
    }[depends]
    header_text, header_kind = header
    problems = set()
    if not entrypoint_ok(entrypoint) or run_at == "infinity":
        problems.add("PQ001")
    if not dedupe_key_ok(dedupe_key):
        problems.add("PQ001")
    if header_kind == "other" or (max_attempts is not None and not 1 <= max_attempts <= 1000):
        problems.add("PQ001")
    if depends in ("null", "negative", "int8max", "many"):
        problems.add("PQ001")
    if payload == OVER_LIMIT or header_kind == "big":
        problems.add("PQ004")
    existing = None
    if not problems and dedupe_key is not None:
        existing = conn.execute(
            "SELECT id FROM pgq._jobs WHERE entrypoint = %s AND dedupe_key = %s AND status <> 'dead'",
            (entrypoint, dedupe_key),
        ).fetchone()
    res = check(
        conn,
        "SELECT pgq.enqueue(%s, %s::jsonb, %s::int, %s::timestamptz, %s, %s::jsonb, %s::int, %s::bigint[])",
        (entrypoint, payload, priority, run_at, dedupe_key, header_text, max_attempts, depends_on),
        problems,
    )
    if not res.ok:
        return
    job = res.value
    if existing is not None:
        assert job == existing[0]
        return
    row = conn.execute(
        "SELECT entrypoint, dedupe_key, priority, max_attempts, status,"
        " payload IS NOT DISTINCT FROM %s::jsonb, headers IS NOT DISTINCT FROM %s::jsonb,"
        " run_at = %s::timestamptz, run_at <= now() AND run_at > now() - interval '1 minute'"
        " FROM pgq.jobs WHERE id = %s",
        (payload, header_text, run_at, job),
    ).fetchone()
    status = "waiting" if depends in ("live", "live-dupes") else "queued"
    expected_max = max_attempts if max_attempts is not None else DEFAULT_MAX_ATTEMPTS
    assert row[:7] == (entrypoint, dedupe_key, priority or 0, expected_max, status, True, True)
    assert row[7] if run_at in FUTURE_RUN_ATS else row[8]


@HYPOTHESIS
@given(
    entrypoint=st.one_of(maybe_names, st.sampled_from(["", " ", " x", "x ", "a\tb", "x" * 200, "x" * 201])),
    payload=payloads,
    priority=int4s,
    run_at=st.sampled_from(RUN_ATS),
    header=headers,
    max_attempts=attempts,
)
def test_enqueue_answers_as_enqueue_job(
    conn: psycopg.Connection,
    entrypoint: str | None,
    payload: str | None,
    priority: int | None,
    run_at: str | None,
    header: tuple[str | None, str],
    max_attempts: int | None,
) -> None:
    # pgq.enqueue inserts a plain call's job itself when its arguments pass pgq._check_job,
    # by one condition that mirrors those checks: it must accept exactly what enqueue_job
    # accepts, store the same job and NOTIFY the same, and raise the same errors.
    args = (entrypoint, payload, priority, run_at, header[0], max_attempts)
    named = (
        "entrypoint => %s, payload => %s::jsonb, priority => %s::int, run_at => %s::timestamptz,"
        " headers => %s::jsonb, max_attempts => %s::int"
    )
    conn.execute("LISTEN pgq")
    outcomes = []
    for query in (f"SELECT pgq.enqueue({named})", f"SELECT e.id FROM pgq.enqueue_job({named}) AS e"):
        res = call(conn, query, args)
        stored = notified = None
        if res.ok:
            stored = conn.execute(
                "SELECT entrypoint, payload, priority, run_at - enqueued_at < interval '1 minute',"
                " run_at > now() + interval '1 day', headers, max_attempts, status, dedupe_key, depends_on,"
                " concurrency_key, attempt, deliveries FROM pgq._jobs WHERE id = %s",
                (res.value,),
            ).fetchone()
            notified = [(n.channel, n.payload) for n in conn.notifies(timeout=0.05, stop_after=1)]
            # A job due now wakes the workers: the comparison below must not pass with none.
            assert notified == ([] if run_at in FUTURE_RUN_ATS else [("pgq", entrypoint)])
        # The message and its HINT; the CONTEXT names the functions it passed through.
        outcomes.append((res.sqlstate, res.message.split("\nCONTEXT:")[0], stored, notified))
    conn.execute("UNLISTEN pgq")
    assert outcomes[0] == outcomes[1]


@HYPOTHESIS
@given(
    entrypoint=maybe_names,
    batch=mostly(
        st.lists(small_payloads, max_size=8), st.one_of(st.none(), st.sampled_from(["many10001", "over"]))
    ),
    priority=int4s,
    run_at=mostly(st.sampled_from([r for r in RUN_ATS if r != "infinity"]), st.just("infinity")),
)
def test_enqueue_batch_property(
    conn: psycopg.Connection, entrypoint: str | None, batch: Any, priority: int | None, run_at: str | None
) -> None:
    batch = [None, OVER_LIMIT] if batch == "over" else expand(batch, None)
    problems = set()
    if not entrypoint_ok(entrypoint) or run_at == "infinity" or batch is None:
        problems.add("PQ001")
    if batch is not None and OVER_LIMIT in batch:
        problems.add("PQ004")
    res = check(
        conn,
        "SELECT * FROM pgq.enqueue_batch(%s, %s::jsonb[], %s::int, %s::timestamptz)",
        (entrypoint, batch, priority, run_at),
        problems,
    )
    if not res.ok:
        return
    ids = [r[0] for r in res.rows]
    assert len(ids) == len(batch) and ids == sorted(ids) and len(set(ids)) == len(ids)
    if ids:
        same = conn.execute(
            "SELECT bool_and(j.entrypoint = %s AND j.priority = %s AND j.payload IS NOT DISTINCT FROM u.p),"
            " count(j.id)"
            " FROM unnest(%s::bigint[], %s::jsonb[]) AS u (i, p) LEFT JOIN pgq.jobs AS j ON j.id = u.i",
            (entrypoint, priority or 0, ids, batch),
        ).fetchone()
        assert same == (True, len(ids))


@HYPOTHESIS
@given(name=mostly(good_names, maybe_texts), entrypoints=name_lists)
def test_register_worker_property(conn: psycopg.Connection, name: str | None, entrypoints: Any) -> None:
    entrypoints = expand(entrypoints, "hx")
    problems = set() if worker_name_ok(name) and entrypoints_ok(entrypoints) else {"PQ001"}
    res = check(conn, "SELECT pgq.register_worker(%s, %s::text[])", (name, entrypoints), problems)
    if res.ok:
        row = conn.execute(
            "SELECT name, entrypoints, state FROM pgq.workers WHERE id = %s", (res.value,)
        ).fetchone()
        assert row == (name, sorted(set(entrypoints)), "alive")


WORKERS = st.sampled_from(["alive", "stopped", "unknown", "null"])


@pytest.fixture
def workers(conn: psycopg.Connection) -> dict[str, uuid.UUID | None]:
    alive = register(conn, ["hx_a", "hx_b", "🙂 x", "'; --"])
    stopped = register(conn, ["hx_a"], "stopped")
    conn.execute("SELECT pgq.unregister_worker(%s)", (stopped,))
    return {"alive": alive, "stopped": stopped, "unknown": RANDOM_UUID, "null": None}


def worker_problem(kind: str) -> str | None:
    return {"null": "PQ001", "unknown": "PQ002", "stopped": "PQ003"}.get(kind)


@HYPOTHESIS
@given(kind=WORKERS, other=st.uuids())
def test_heartbeat_and_unregister_property(
    conn: psycopg.Connection, workers: dict[str, uuid.UUID | None], kind: str, other: uuid.UUID
) -> None:
    worker = workers[kind] if kind != "unknown" else other
    code = worker_problem(kind)
    res = check(conn, "SELECT * FROM pgq.heartbeat(%s::uuid)", (worker,), {code} if code else set())
    if res.ok:
        assert res.rows == []
    code = None if kind in ("alive", "stopped") else code
    if kind != "alive":  # keep the live worker for the other examples
        res = check(conn, "SELECT pgq.unregister_worker(%s::uuid)", (worker,), {code} if code else set())
        if res.ok:
            assert res.value == 0


@HYPOTHESIS
@given(
    kind=mostly(st.just("alive"), WORKERS),
    entrypoints=mostly(st.lists(st.sampled_from(["hx_a", "hx_b", "🙂 x", "'; --"]), min_size=1), name_lists),
    batch_size=mostly(st.integers(1, 20), int4s),
)
def test_claim_property(
    conn: psycopg.Connection,
    workers: dict[str, uuid.UUID | None],
    kind: str,
    entrypoints: Any,
    batch_size: int | None,
) -> None:
    conn.execute("SELECT * FROM pgq.enqueue_batch('hx_a', '{null,null}')")
    conn.execute("SELECT pgq.enqueue('🙂 x')")
    entrypoints = expand(entrypoints, "hx_a")
    registered = {"hx_a", "hx_b", "🙂 x", "'; --"}
    if batch_size is None or not 1 <= batch_size <= 10000 or not entrypoints_ok(entrypoints):
        code = "PQ001"
    elif worker_problem(kind):
        code = worker_problem(kind)
    elif not set(entrypoints) <= registered:
        code = "PQ001"
    else:
        code = None
    res = check(
        conn,
        "SELECT id, entrypoint, deliveries FROM pgq.claim(%s::uuid, %s::text[], %s::int)",
        (workers[kind], entrypoints, batch_size),
        {code} if code else set(),
    )
    if res.ok:
        assert len(res.rows) <= batch_size
        assert all(ep in entrypoints and d == 1 for _, ep, d in res.rows)
        ids = [r[0] for r in res.rows]
        held = conn.execute(
            "SELECT count(*) FROM pgq._jobs WHERE id = ANY(%s) AND worker_id = %s AND status = 'running'",
            (ids, workers[kind]),
        ).fetchone()[0]
        assert held == len(ids)


JOB_REFS = st.one_of(st.none(), st.sampled_from(["held1", "held2", "queued"]), int8s)


@HYPOTHESIS
@given(
    kind=mostly(st.just("alive"), WORKERS),
    refs=mostly(
        st.lists(st.one_of(st.sampled_from(["held1", "held2", "queued"]), int8s), max_size=6),
        st.one_of(st.none(), st.lists(JOB_REFS, min_size=1, max_size=6), st.just("many10001")),
    ),
    results=st.one_of(st.none(), st.sampled_from(["match", "mismatch"])),
    result_values=st.lists(
        st.one_of(st.none(), json_values.map(dumps), st.just(DEEP)), min_size=12, max_size=12
    ),
)
def test_complete_property(
    conn: psycopg.Connection,
    workers: dict[str, uuid.UUID | None],
    kind: str,
    refs: Any,
    results: str | None,
    result_values: list[str | None],
) -> None:
    alive = workers["alive"]
    conn.execute("SELECT pgq.cancel(coalesce(array_agg(id), '{}')) FROM pgq._jobs WHERE status = 'queued'")
    pool = {"held1": enqueue(conn, "hx_a"), "held2": enqueue(conn, "hx_a")}
    assert sorted(claim(conn, alive, ["hx_a"], 2)) == sorted(pool.values())
    pool["queued"] = enqueue(conn, "hx_a", run_at="2999-01-01")
    ids = expand(refs, 1)
    if isinstance(ids, list):
        ids = [pool.get(r, r) if isinstance(r, str) else r for r in ids]
    values = None
    if results is not None and (ids is None or len(ids) <= 12):
        n = (len(ids) if ids is not None else 0) + (results == "mismatch")
        values = [result_values[i % 12] for i in range(n)]
    if kind == "null" or not ids_ok(ids) or (values is not None and (ids is None or len(values) != len(ids))):
        code: str | None = "PQ001"
    else:
        code = None
    res = check(
        conn,
        "SELECT * FROM pgq.complete(%s::uuid, %s::bigint[], %s::jsonb[])",
        (workers[kind], ids, values),
        {code} if code else set(),
    )
    if not res.ok:
        return
    done = sorted(r[0] for r in res.rows)
    expected = sorted({pool["held1"], pool["held2"]} & set(ids)) if kind == "alive" else []
    assert done == expected
    for job in done:
        want = values[ids.index(job)] if values is not None else None
        assert conn.execute(
            "SELECT result IS NOT DISTINCT FROM %s::jsonb FROM pgq._outcomes"
            " WHERE job_id = %s AND outcome = 'succeeded'",
            (want, job),
        ).fetchone()[0]
    # What was not completed is still held.
    conn.execute("SELECT pgq.complete(%s, %s::bigint[])", (alive, [pool["held1"], pool["held2"]]))


@HYPOTHESIS
@given(
    kind=mostly(st.just("alive"), WORKERS),
    ref=mostly(st.just("held1"), JOB_REFS),
    error=mostly(texts, st.none()),
    retry_in=mostly(
        st.sampled_from([(None, None), ("0", 0), ("1 second", 1), ("10 years", 10 * YEAR)]), intervals
    ),
)
def test_fail_property(
    conn: psycopg.Connection,
    workers: dict[str, uuid.UUID | None],
    kind: str,
    ref: Any,
    error: str | None,
    retry_in: tuple[str | None, float | None],
) -> None:
    alive = workers["alive"]
    conn.execute(
        "SELECT pgq.cancel(coalesce(array_agg(id), '{}')) FROM pgq._jobs WHERE status IN ('queued', 'dead')"
    )
    job = enqueue(conn, "hx_a")
    assert claim(conn, alive, ["hx_a"]) == [job]
    job_id = {"held1": job, "held2": job, "queued": enqueue(conn, "hx_a", run_at="2999-01-01")}.get(ref, ref)
    text, seconds = retry_in
    if kind == "null" or job_id is None or error is None:
        code: str | None = "PQ001"
    elif seconds is not None and not 0 <= seconds <= 10 * YEAR:
        code = "PQ001"
    else:
        code = None
    res = check(
        conn,
        "SELECT pgq.fail(%s::uuid, %s::bigint, %s, %s::interval)",
        (workers[kind], job_id, error, text),
        {code} if code else set(),
    )
    if res.ok:
        if kind == "alive" and job_id == job:
            assert res.value == "queued"
            row = conn.execute(
                "SELECT status, attempt, last_error, run_at <= now() + coalesce(%s::interval, '1 hour')"
                " FROM pgq.jobs WHERE id = %s",
                (text, job),
            ).fetchone()
            assert row == ("queued", 2, error[:65536], True)  # its next run is attempt 2
        else:
            assert res.value is None
    conn.execute("SELECT pgq.complete(%s, ARRAY[%s]::bigint[])", (alive, job))


@HYPOTHESIS
@given(ref=st.one_of(st.none(), st.sampled_from(["queued", "running", "dead", "canceled"]), int8s))
def test_job_status_property(conn: psycopg.Connection, ctx: Ctx, ref: Any) -> None:
    canceled = enqueue(conn, "hx_ctx", run_at="2999-01-01")
    conn.execute("SELECT pgq.cancel(ARRAY[%s]::bigint[])", (canceled,))
    known = {"queued": ctx.queued, "running": ctx.held, "dead": ctx.dead, "canceled": canceled}
    job_id = known.get(ref, ref) if isinstance(ref, str) else ref
    res = check(conn, "SELECT pgq.job_status(%s::bigint)", (job_id,), {"PQ001"} if job_id is None else set())
    if res.ok and isinstance(ref, str):
        assert res.value == ref
    elif res.ok and (job_id <= 0 or job_id > canceled):
        assert res.value is None


@HYPOTHESIS
@given(
    fn=st.sampled_from(["cancel", "retry"]),
    refs=st.one_of(
        st.none(),
        st.lists(st.one_of(st.none(), st.sampled_from(["queued", "dead"]), int8s), max_size=6),
        st.just("many10001"),
    ),
)
def test_cancel_and_retry_property(conn: psycopg.Connection, fn: str, refs: Any) -> None:
    conn.execute("SELECT pgq.configure('hx_r', max_attempts => 1)")
    worker = register(conn, ["hx_r"])
    dead = enqueue(conn, "hx_r")
    assert claim(conn, worker, ["hx_r"]) == [dead]
    conn.execute("SELECT pgq.fail(%s, %s, 'x')", (worker, dead))
    pool = {"queued": enqueue(conn, "hx_r", run_at="2999-01-01"), "dead": dead}
    ids = expand(refs, 1)
    if isinstance(ids, list):
        ids = [pool.get(r, r) if isinstance(r, str) else r for r in ids]
    res = check(conn, f"SELECT pgq.{fn}(%s::bigint[])", (ids,), set() if ids_ok(ids) else {"PQ001"})
    if res.ok:
        hit = {pool[k] for k in (("queued", "dead") if fn == "cancel" else ("dead",))} & set(ids)
        assert res.value == len(hit)
    conn.execute("SELECT pgq.unregister_worker(%s)", (worker,))
    conn.execute("SELECT pgq.cancel(coalesce(array_agg(id), '{}')) FROM pgq._jobs WHERE entrypoint = 'hx_r'")


@HYPOTHESIS
@given(entrypoint=maybe_names)
def test_pause_and_resume_property(conn: psycopg.Connection, entrypoint: str | None) -> None:
    problems = set() if entrypoint_ok(entrypoint) else {"PQ001"}
    for fn, paused in (("pause", True), ("resume", False)):
        res = check(conn, f"SELECT pgq.{fn}(%s)", (entrypoint,), problems)
        if res.ok:
            got = conn.execute("SELECT paused FROM pgq.settings(ARRAY[%s])", (entrypoint,)).fetchone()[0]
            assert got is paused


RATES = [
    (None, True),
    ("0", True),
    ("0.001", True),
    ("12.5", True),
    ("1000000", True),
    ("-1", False),
    ("0.0009", False),
    ("1000000.001", False),
    ("NaN", False),
    ("Infinity", False),
    ("-Infinity", False),
    ("1e-100", False),
    ("1e100", False),
]


@HYPOTHESIS
@given(
    entrypoint=maybe_names,
    max_attempts=attempts,
    backoff_base=settings_intervals,
    backoff_max=settings_intervals,
    lease=settings_intervals,
    timeout=settings_intervals,
    concurrency=mostly(st.one_of(st.none(), st.integers(0, 1000000)), int4s),
    rate=mostly(st.just((None, True)), st.sampled_from(RATES)),
    retention=settings_intervals,
)
def test_configure_property(
    conn: psycopg.Connection,
    entrypoint: str | None,
    max_attempts: int | None,
    backoff_base: tuple[str | None, float | None],
    backoff_max: tuple[str | None, float | None],
    lease: tuple[str | None, float | None],
    timeout: tuple[str | None, float | None],
    concurrency: int | None,
    rate: tuple[str | None, bool],
    retention: tuple[str | None, float | None],
) -> None:
    conn.execute("DELETE FROM pgq._queues")

    def bad(value: tuple[str | None, float | None], lo: float, hi: float) -> bool:
        return value[1] is not None and not lo <= value[1] <= hi

    base = backoff_base[1] if backoff_base[1] is not None else 1
    cap = backoff_max[1] if backoff_max[1] is not None else 3600
    invalid = (
        not entrypoint_ok(entrypoint)
        or (max_attempts is not None and not 1 <= max_attempts <= 1000)
        or bad(backoff_base, 0, 10 * YEAR)
        or bad(backoff_max, 0, 10 * YEAR)
        or bad(lease, 1, 86400)
        or bad(timeout, 1, 10 * YEAR)
        or (concurrency is not None and not 0 <= concurrency <= 1000000)
        or not rate[1]
        or bad(retention, 60, 10 * YEAR)
        or cap < base
    )
    res = check(
        conn,
        "SELECT pgq.configure(%s, max_attempts => %s::int, backoff_base => %s::interval,"
        " backoff_max => %s::interval, lease => %s::interval, timeout => %s::interval,"
        " concurrency => %s::int, rate => %s::numeric, retention => %s::interval)",
        (
            entrypoint,
            max_attempts,
            backoff_base[0],
            backoff_max[0],
            lease[0],
            timeout[0],
            concurrency,
            rate[0],
            retention[0],
        ),
        {"PQ001"} if invalid else set(),
    )
    if res.ok:
        row = conn.execute(
            "SELECT s.max_attempts = coalesce(%s::int, 5),"
            " s.backoff_base = coalesce(%s::interval, '1 second'),"
            " s.backoff_max = coalesce(%s::interval, '1 hour'),"
            " s.lease = coalesce(%s::interval, '30 seconds'), s.timeout = coalesce(%s::interval, '1 hour'),"
            " s.concurrency IS NOT DISTINCT FROM nullif(%s::int, 0),"
            " s.rate IS NOT DISTINCT FROM nullif(%s::numeric, 0),"
            " s.retention = coalesce(%s::interval, '7 days'), NOT s.paused"
            " FROM pgq.settings(ARRAY[%s]) AS s",
            (
                max_attempts,
                backoff_base[0],
                backoff_max[0],
                lease[0],
                timeout[0],
                concurrency,
                rate[0],
                retention[0],
                entrypoint,
            ),
        ).fetchone()
        assert all(row), row


@HYPOTHESIS
@given(entrypoints=name_lists)
def test_settings_property(conn: psycopg.Connection, entrypoints: Any) -> None:
    entrypoints = expand(entrypoints, "hx")
    res = check(
        conn,
        "SELECT entrypoint, paused, max_attempts FROM pgq.settings(%s::text[])",
        (entrypoints,),
        set() if entrypoints_ok(entrypoints) else {"PQ001"},
    )
    if res.ok:
        assert res.rows == [(e, False, DEFAULT_MAX_ATTEMPTS) for e in sorted(set(entrypoints))]


CRON_TOKENS = [
    "*",
    "*/5",
    "1-5",
    "0",
    "7",
    "59",
    "60",
    "mon",
    "JAN",
    "x",
    "",
    "-1",
    "*/0",
    "5/",
    "1-2-3",
    "1,2,,3",
    "9" * 25,
    "\u0663",
    "'",
]
structured_crons = st.lists(st.sampled_from(CRON_TOKENS), min_size=4, max_size=6).flatmap(
    lambda fields: st.sampled_from([" ", "\t", "  "]).map(lambda sep: sep.join(fields))
)


@HYPOTHESIS
@given(
    name=mostly(good_names, maybe_texts),
    cron=mostly(
        st.sampled_from([c for c in CRONS if c[1]]),
        st.one_of(
            st.sampled_from(CRONS),
            structured_crons.map(lambda c: (c, None)),
            maybe_texts.map(lambda c: (c, None)),
        ),
    ),
    entrypoint=maybe_names,
    payload=payloads,
)
def test_schedule_and_unschedule_property(
    conn: psycopg.Connection,
    name: str | None,
    cron: tuple[str | None, bool | None],
    entrypoint: str | None,
    payload: str | None,
) -> None:
    expr, valid = cron
    codes = set()
    if not schedule_name_ok(name) or not entrypoint_ok(entrypoint):
        codes.add("PQ001")
    if payload == OVER_LIMIT:
        codes.add("PQ004")
    if valid is False:
        codes.add("PQ006")
    # A cron of unknown validity: PQ006 or accepted, never anything else.
    problems: set[str] | None = codes
    if valid is None:
        problems = codes | {"PQ006"} if codes else None
    res = check(
        conn, "SELECT pgq.schedule(%s, %s, %s, %s::jsonb)::text", (name, expr, entrypoint, payload), problems
    )
    if res.ok:
        row = conn.execute(
            "SELECT name, cron, entrypoint, payload IS NOT DISTINCT FROM %s::jsonb, next_run::text"
            " FROM pgq.schedules WHERE name = %s",
            (payload, name),
        ).fetchone()
        assert row == (name, expr.strip(" "), entrypoint, True, res.value)
        assert res.value is not None
    scheduled = res.ok
    res = check(conn, "SELECT pgq.unschedule(%s)", (name,), {"PQ001"} if name is None else set())
    if res.ok:
        assert res.value is scheduled


UTC = datetime.timezone.utc
# The times pgq.run_schedules accepts (else PQ001).
FIRST_NOW = datetime.datetime(1970, 1, 1, tzinfo=UTC)
END_OF_9999 = datetime.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


@HYPOTHESIS
@given(
    now=st.one_of(
        st.sampled_from(
            [
                (None, True),
                ("infinity", False),
                ("-infinity", False),
                ("4713-01-01 00:00+00 BC", False),
                ("1970-01-01 00:00+00", True),
                ("9999-12-31 00:00+00", True),
                ("200000-01-01 00:00+00", False),
                ("294276-12-31 23:59:59+00", False),
            ]
        ),
        st.datetimes(timezones=st.just(UTC)).map(lambda d: (str(d), FIRST_NOW <= d <= END_OF_9999)),
    )
)
def test_run_schedules_property(conn: psycopg.Connection, now: tuple[str | None, bool]) -> None:
    text, valid = now
    conn.execute("TRUNCATE pgq._schedules")
    conn.execute("SELECT pgq.schedule('hx_minutely', '* * * * *', 'hx_s')")
    conn.execute("SELECT pgq.schedule('hx_leap', '0 0 29 2 *', 'hx_s', '{\"leap\": true}')")
    res = check(conn, "SELECT pgq.run_schedules(%s::timestamptz)", (text,), set() if valid else {"PQ001"})
    if res.ok:
        due = conn.execute("SELECT count(*) FROM pgq.schedules WHERE last_run IS NOT NULL").fetchone()[0]
        assert res.value == due


@HYPOTHESIS
@given(since=intervals)
def test_stats_property(conn: psycopg.Connection, since: tuple[str | None, float | None]) -> None:
    text, seconds = since
    valid = seconds is not None and 1 <= seconds <= 31 * 86400
    res = check(conn, "SELECT * FROM pgq.stats(%s::interval)", (text,), set() if valid else {"PQ001"})
    if res.ok:
        assert all(r[1] >= 0 for r in res.rows)


def test_reap_and_prune_with_hostile_settings(conn: psycopg.Connection) -> None:
    """The sweeps run over whatever hostile names and extreme settings were accepted."""
    for i, ep in enumerate(["🙂" * 200, "'; DROP TABLE x; --", "\u202e\u05e9\u05dc\u05d5\u05dd", "%I%L"]):
        conn.execute(
            "SELECT pgq.configure(%s, lease => '1 second', timeout => %s::interval,"
            " retention => %s::interval,"
            " backoff_base => '10 years', backoff_max => '10 years', max_attempts => 1000)",
            (ep, ["1 second", "10 years"][i % 2], ["1 minute", "10 years"][i % 2]),
        )
        worker = register(conn, [ep], name=ep)
        enqueue(conn, ep, payload=DEEP)
        claim(conn, worker, [ep])
    conn.execute("UPDATE pgq._workers SET heartbeat_at = now() - interval '1 hour'")
    assert check(conn, "SELECT pgq.reap()", (), set()).value == 4
    assert conn.execute("SELECT count(*) FROM pgq._jobs WHERE status = 'queued'").fetchone()[0] == 4
    assert check(conn, "SELECT pgq.prune()", (), set()).value >= 0
    assert check(conn, "SELECT count(*) FROM pgq.stats('31 days')", (), set()).value >= 0


# --- regressions: bugs found by this module, now fixed -----------------------------------------


def test_dedupe_key_is_limited_in_bytes(conn: psycopg.Connection) -> None:
    """docs/errors.md: dedupe_key is 1-1000 bytes. 1000 multibyte characters are PQ001 (they
    used to pass the check and overflow the btree entry of _jobs_dedupe_idx: 54000), and a
    1000-byte key works next to the longest entrypoint, and dedupes."""
    ep = "🙂" * 200  # 800 bytes, in the same index entry
    for key in (CJK_1000, KEY_1001_BYTES, "é" * 501, "🙂" * 251):
        res = check(conn, "SELECT pgq.enqueue(%s, dedupe_key => %s)", (ep, key), {"PQ001"})
        assert "dedupe_key" in res.message and "bytes" in res.message, res.message
    for key in (KEY_1000_BYTES, "é" * 500, "🙂" * 250, "k" * 1000):
        job = check(conn, "SELECT pgq.enqueue(%s, dedupe_key => %s)", (ep, key), set()).value
        again = check(conn, "SELECT pgq.enqueue(%s, dedupe_key => %s)", (ep, key), set()).value
        assert again == job
        assert conn.execute("SELECT dedupe_key FROM pgq.jobs WHERE id = %s", (job,)).fetchone()[0] == key


def flatten(value: Any) -> Any:
    """The one-dimensional version of (nested lists in) a tuple of parameters."""
    if isinstance(value, tuple):
        return tuple(flatten(v) for v in value)
    if isinstance(value, list):
        return [x for v in value for x in (flatten(v) if isinstance(v, list) else [v])]
    return value


# (name, query, parameters with a multidimensional array): PQ001, while the same call with
# the array flattened to one dimension succeeds.
MULTIDIMENSIONAL: list[tuple[str, str, Params]] = [
    ("cancel", "SELECT pgq.cancel(%s::bigint[])", lambda c: ([[c.queued], [c.dead]],)),
    ("cancel-3d", "SELECT pgq.cancel(%s::bigint[])", lambda c: ([[[c.queued]]],)),
    ("retry", "SELECT pgq.retry(%s::bigint[])", lambda c: ([[c.dead, c.queued]],)),
    ("run-now", "SELECT pgq.run_now(%s::bigint[])", lambda c: ([[c.queued], [c.dead]],)),
    ("complete-ids", COMPLETE, lambda c: (c.worker, [[c.held]])),
    ("complete-results", COMPLETE_RESULTS, lambda c: (c.worker, [c.held, c.queued], [["{}"], ['{"r": 1}']])),
    ("enqueue-depends-on", enq_arg("depends_on", "bigint[]"), lambda c: ([[c.queued], [c.held]],)),
    ("enqueue-batch-payloads", BATCH, ([["{}", "null"], ['{"a": 1}', "[]"]],)),
    ("register-worker-entrypoints", REGISTER_EPS, ([["hx_a", "hx_b"]],)),
    ("claim-entrypoints", CLAIM_EPS, lambda c: (c.worker, [["hx_ctx"]])),
    ("settings-entrypoints", SETTINGS, ([["hx_ctx"], ["hx_dead"]],)),
]


@pytest.mark.parametrize(
    ("query", "params"), [m[1:] for m in MULTIDIMENSIONAL], ids=[m[0] for m in MULTIDIMENSIONAL]
)
def test_multidimensional_arrays_are_invalid_arguments(
    conn: psycopg.Connection, ctx: Ctx, query: str, params: Params
) -> None:
    """They used to reach array_position (0A000) or be read wrongly; now PQ001, and nothing changes."""
    args = params(ctx) if callable(params) else params
    with conn.transaction(force_rollback=True):
        res = check(conn, query, args, {"PQ001"})
    assert "dimensions" in res.message or "one element per job id" in res.message, res.message
    with conn.transaction(force_rollback=True):
        check(conn, query, flatten(args), set())


def shifted(type_: str, lower: int) -> str:
    """SQL for parameter %s as a one-dimensional array of type_ whose first index is lower."""
    upper = f"({lower} - 1 + cardinality(%s::{type_}))::text"
    return f"(('[{lower}:' || {upper} || ']=') || %s::{type_}::text)::{type_}"


def test_complete_pairs_results_by_position_whatever_the_lower_bounds(conn: psycopg.Connection) -> None:
    """job_ids and results built in SQL may start at any index: the k-th result belongs to the
    k-th job id (results used to be looked up by a subscript of job_ids, and dropped)."""
    worker = register(conn, ["hx_lb"])
    for ids_lower, results_lower in [(1, 1), (0, 0), (0, 1), (1, 0), (5, -3), (-2, 7)]:
        jobs = [enqueue(conn, "hx_lb") for _ in range(3)]
        assert sorted(claim(conn, worker, ["hx_lb"], 3)) == jobs
        order = [jobs[2], jobs[0], jobs[1]]
        results = [json.dumps({"job": j, "bounds": [ids_lower, results_lower]}) for j in order]
        query = (
            f"SELECT * FROM pgq.complete(%s, {shifted('bigint[]', ids_lower)},"
            f" {shifted('jsonb[]', results_lower)})"
        )
        done = conn.execute(query, (worker, order, order, results, results)).fetchall()
        assert sorted(r[0] for r in done) == jobs, (ids_lower, results_lower)
        got = dict(
            conn.execute(
                "SELECT job_id, result FROM pgq.outcomes WHERE job_id = ANY(%s) AND outcome = 'succeeded'",
                (jobs,),
            ).fetchall()
        )
        assert got == {j: {"job": j, "bounds": [ids_lower, results_lower]} for j in jobs}


def test_one_dimensional_arrays_with_other_lower_bounds_work(conn: psycopg.Connection) -> None:
    payloads = [json.dumps({"i": i}) for i in range(3)]
    ids = [
        r[0]
        for r in conn.execute(
            f"SELECT * FROM pgq.enqueue_batch('hx_lb1', {shifted('jsonb[]', 0)})", (payloads, payloads)
        )
    ]
    assert len(ids) == 3 and ids == sorted(ids)
    assert conn.execute(
        "SELECT array_agg(payload->>'i' ORDER BY id) FROM pgq.jobs WHERE id = ANY(%s)", (ids,)
    ).fetchone()[0] == ["0", "1", "2"]
    waiting = conn.execute(
        f"SELECT pgq.enqueue('hx_lb1', depends_on => {shifted('bigint[]', -1)})", (ids[:1], ids[:1])
    ).fetchone()[0]
    assert conn.execute("SELECT pgq.job_status(%s)", (waiting,)).fetchone()[0] == "waiting"
    worker = conn.execute(
        f"SELECT pgq.register_worker('w', {shifted('text[]', 3)})", (["hx_lb1"], ["hx_lb1"])
    ).fetchone()[0]
    claimed = conn.execute(
        f"SELECT id FROM pgq.claim(%s, {shifted('text[]', 0)}, 1)", (worker, ["hx_lb1"], ["hx_lb1"])
    ).fetchall()
    assert claimed == [(ids[0],)]
    assert conn.execute(
        f"SELECT entrypoint FROM pgq.settings({shifted('text[]', 9)})", (["hx_lb1"], ["hx_lb1"])
    ).fetchall() == [("hx_lb1",)]
    assert conn.execute(f"SELECT pgq.cancel({shifted('bigint[]', 0)})", (ids[1:], ids[1:])).fetchone()[0] == 2


def test_run_schedules_near_the_ends_of_time(conn: psycopg.Connection) -> None:
    """A finite now near the timestamp maximum used to overflow in pgq._cron_next (22008):
    now must lie from 1970-01-01 to the end of 9999 UTC, else PQ001; near the last accepted
    time the due schedules fire and get a next run."""
    conn.execute("TRUNCATE pgq._schedules")
    conn.execute("SELECT pgq.schedule('hx_end', '* * * * *', 'hx_s')")
    for now in ("294270-01-01 00:00+00", "294276-12-31 23:59:59+00", "10000-01-01 00:00+00"):
        res = check(conn, "SELECT pgq.run_schedules(%s::timestamptz)", (now,), {"PQ001"})
        assert "now" in res.message, res.message
    res = check(conn, "SELECT pgq.run_schedules(%s::timestamptz)", ("9999-12-31 00:00+00",), set())
    assert res.value == 1
    next_run = conn.execute("SELECT next_run FROM pgq.schedules WHERE name = 'hx_end'").fetchone()[0]
    assert next_run == datetime.datetime(9999, 12, 31, 0, 1, tzinfo=datetime.timezone.utc)


@pytest.fixture
def worn_out_job(conn: psycopg.Connection) -> tuple[uuid.UUID, int]:
    """A job that failed 997 times (max_attempts 1000) with a 10-year backoff base and cap."""
    ep = "hx_worn"
    conn.execute(
        "SELECT pgq.configure(%s, max_attempts => 1000,"
        " backoff_base => '10 years', backoff_max => '10 years')",
        (ep,),
    )
    worker = register(conn, [ep])
    job = enqueue(conn, ep)
    conn.execute(
        sql.SQL(
            "DO $$ DECLARE w uuid := {}; j bigint := {}; BEGIN"
            " FOR i IN 1..997 LOOP"
            "   PERFORM * FROM pgq.claim(w, ARRAY['hx_worn']);"
            "   PERFORM pgq.fail(w, j, 'again', interval '0');"
            " END LOOP; END $$"
        ).format(sql.Literal(worker), sql.Literal(job))
    )
    assert conn.execute("SELECT attempt, status FROM pgq._jobs WHERE id = %s", (job,)).fetchone() == (
        997,
        "queued",
    )
    assert claim(conn, worker, [ep]) == [job]
    return worker, job


def assert_backed_off_to_the_cap(conn: psycopg.Connection, job: int) -> None:
    """Queued again after backoff_max (10 years) times the jitter, a factor in [0.5, 1)."""
    status, attempt, ratio = conn.execute(
        "SELECT status, attempt, extract(EPOCH FROM run_at - now()) / extract(EPOCH FROM interval '10 years')"
        " FROM pgq._jobs WHERE id = %s",
        (job,),
    ).fetchone()
    assert (status, attempt) == ("queued", 998)
    assert 0.4999 <= ratio < 1, ratio


def test_fail_backoff_does_not_overflow(
    conn: psycopg.Connection, worn_out_job: tuple[uuid.UUID, int]
) -> None:
    """backoff_base * 2^attempt used to overflow double precision (22003) before the cap."""
    worker, job = worn_out_job
    assert check(conn, "SELECT pgq.fail(%s, %s, 'boom')", (worker, job), set()).value == "queued"
    assert_backed_off_to_the_cap(conn, job)


def test_reap_timeout_backoff_does_not_overflow(
    conn: psycopg.Connection, worn_out_job: tuple[uuid.UUID, int]
) -> None:
    """The same overflow in the reaper's timeout path used to break pgq.reap() and every sweep."""
    _, job = worn_out_job
    conn.execute("UPDATE pgq._jobs SET started_at = now() - interval '20 years' WHERE id = %s", (job,))
    assert check(conn, "SELECT pgq.reap()", (), set()).value == 1
    assert_backed_off_to_the_cap(conn, job)


@pytest.mark.parametrize(
    "dbname",
    ["q", "x" * 42, "x" * 63, "é" * 31 + "x", "🙂" * 15 + "abc", "pgq_h'; select 1; --" + "x" * 43],
    ids=["short", "fits", "63-ascii", "63-e-acute", "63-emoji", "63-hostile"],
)
def test_pg_cron_job_names_fit_63_bytes(dbname: str) -> None:
    """cron.job.jobname is a 63-byte name: longer job names are cut by PostgreSQL, and then two
    databases sharing a long prefix used to share (and overwrite) their jobs."""
    assert len(dbname.encode()) <= 63  # a database name is at most 63 bytes
    twin = dbname[:-1] + ("y" if dbname[-1] != "y" else "z")
    tasks = [n for n, _, _ in migrate.CRON_JOBS] + [migrate.CRON_LOG_JOB[0]]
    for task in tasks:
        job = migrate._job_name(task, dbname)
        assert len(job.encode()) <= 63, job
        assert job.startswith(f"pgq-{task}:"), job
        if len(f"pgq-{task}:{dbname}".encode()) <= 63:
            assert job == f"pgq-{task}:{dbname}"
        assert migrate._job_name(task, twin) != job
    assert len({migrate._job_name(task, dbname) for task in tasks}) == len(tasks)


def all_cron_jobs() -> dict[int, tuple[str, str, str]]:
    with psycopg.connect(ADMIN_DSN, autocommit=True) as c:
        rows = c.execute("SELECT jobid, jobname::text, command, database FROM cron.job").fetchall()
    return {r[0]: r[1:] for r in rows}


@pytest.mark.usefixtures("needs_cron")
def test_pg_cron_jobs_of_long_database_names_stay_apart(hostile_databases: list[str]) -> None:
    """Two databases whose names share their first 57 bytes: each install adds its own jobs,
    and uninstalling one leaves the other's."""
    stem = "pgq_h'; select 1; --" + "x" * 36
    names = [f"{stem}_{uuid.uuid4().hex[:4]}" for _ in range(2)]
    dsns, added = [], []
    for name in names:
        before = all_cron_jobs()
        hostile_databases.append(name)
        dsns.append(create_database(name))
        migrate.install(dsns[-1], cron=True)
        after = all_cron_jobs()
        assert set(before) <= set(after) and all(after[k] == v for k, v in before.items())
        new = {k: v for k, v in after.items() if k not in before}
        assert sorted((v[1], v[2] == name) for v in new.values()) == sorted(
            [(cmd, True) for _, _, cmd in migrate.CRON_JOBS] + [(migrate.CRON_LOG_JOB[2], False)]
        ), f"{name}: {new}"
        assert all(len(v[0].encode()) <= 63 for v in new.values())
        added.append(set(new))
    migrate.uninstall(dsns[0])
    left = set(all_cron_jobs())
    assert not added[0] & left and added[1] <= left
    migrate.uninstall(dsns[1])
    assert not added[1] & set(all_cron_jobs())
