"""The worker reads its claims in binary format, with its own jsonb loader (pgq._wire): the
Job a handler gets must hold exactly what a text-format read of the same job gives."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row

import pgq
from pgq._wire import JsonbLoader, Undecodable
from pgq.testing import drain

PAYLOADS = [
    {"a": [1, 2.5, None, True, False], "nested": {"deep": {"er": []}}},
    {"text": 'caf\u00e9 \u2603 \U0001f600 "quoted" \\ back\nline\ttab \u0001', "": ""},
    {"big": 123456789012345678901234567890, "neg": -9223372036854775809, "tiny": 1e-300},
    {"float": 1.5e300, "exp": 2.5e-7, "zero": 0, "minus_zero": -0.0},
    "just a string",
    [1, "two", {"three": 3}],
    12345678901234567890,
    None,  # no payload (SQL NULL)
    {},
]


@pytest.mark.parametrize("concurrency_key", [None, "key-1"])
def test_a_handler_gets_what_a_text_read_of_the_job_gives(dsn: str, concurrency_key: str | None) -> None:
    ep = f"wire_{concurrency_key or 'plain'}".replace("-", "_")
    with pgq.Client(dsn) as client:
        client.configure(ep, timeout="1 mon 2 days 03:04:05.5")  # a month counts 30 days
        ids = [
            client.enqueue(
                ep,
                payload,
                priority=i,
                headers={"trace": f"t{i}", "n": i, "u": "\u00fc"},
                max_attempts=3 if i % 2 else None,
                concurrency_key=concurrency_key,
            )
            for i, payload in enumerate(PAYLOADS)
        ]
    # A session time zone 5:45 from UTC, for the worker and the text read alike.
    dsn = make_conninfo(dsn, options="-c TimeZone=Asia/Kathmandu")
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        timeout = conn.execute(
            "SELECT s.timeout FROM pgq.settings(entrypoints => ARRAY[%s]) AS s", (ep,)
        ).fetchone()["timeout"]
        text_rows = {
            r["id"]: r
            for r in conn.execute(
                "SELECT j.id, j.payload::text AS payload, j.headers::text AS headers, j.priority, j.attempt,"
                " j.enqueued_at, j.run_at, j.concurrency_key,"
                " coalesce(j.max_attempts, s.max_attempts) AS max_attempts"  # the claim's: effective
                " FROM pgq._jobs AS j, pgq.settings(entrypoints => ARRAY[%s]) AS s WHERE j.id = ANY(%s)",
                (ep, ids),
            )
        }
    seen: dict[int, pgq.Job] = {}
    worker = pgq.Worker(dsn)

    @worker.entrypoint(ep)
    async def record(job: pgq.Job) -> None:
        seen[job.id] = job

    drain(worker, max_jobs=len(ids))
    assert sorted(seen) == sorted(ids)
    for job_id, job in seen.items():
        row = text_rows[job_id]
        want: dict[str, Any] = {
            "payload": None if row["payload"] is None else json.loads(row["payload"]),
            "headers": json.loads(row["headers"]),
            "priority": row["priority"],
            "attempt": row["attempt"] + 1,  # the table counts failures; the claim, runs
            "deliveries": 1,
            "enqueued_at": row["enqueued_at"],
            "run_at": row["run_at"],
            "max_attempts": row["max_attempts"],
            "concurrency_key": row["concurrency_key"],
        }
        got = {name: getattr(job, name) for name in want}
        assert got == want, job_id
        # Same types too: an int stays an int (not a float), a float a float.
        assert json.dumps(got["payload"]) == json.dumps(want["payload"])
        # In the session's time zone, as the text read (== on datetimes compares instants).
        assert job.enqueued_at.utcoffset() == row["enqueued_at"].utcoffset() == timedelta(hours=5, minutes=45)
        assert isinstance(job.enqueued_at, datetime)
        assert job.timeout == timeout == timedelta(days=32, hours=3, minutes=4, seconds=5.5)
        assert job.entrypoint == ep
    # jsonb keeps integers exactly, however large.
    assert seen[ids[2]].payload["big"] == 123456789012345678901234567890


def test_a_worker_reads_non_ascii_payloads_whatever_the_client_encoding(dsn: str) -> None:
    """jsonb arrives in the client encoding: a role, database or PGCLIENTENCODING set to
    LATIN1 must not garble or break a handler's payload (the worker connects in UTF-8)."""
    payload = {"name": "Ren\u00e9e M\u00fcller", "city": "S\u00e3o Paulo"}  # all of it in LATIN1 too
    with pgq.Client(dsn) as client:
        job_id = client.enqueue("wire_latin1", payload, headers={"h": "\u00e9t\u00e9"})
    seen: list[pgq.Job] = []
    worker = pgq.Worker(make_conninfo(dsn, client_encoding="LATIN1"))

    @worker.entrypoint("wire_latin1")
    async def record(job: pgq.Job) -> None:
        seen.append(job)

    drain(worker, max_jobs=1)
    assert [(j.id, j.payload, j.headers) for j in seen] == [(job_id, payload, {"h": "\u00e9t\u00e9"})]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(value=JSON, pad=st.sampled_from(["", " ", "\n ", "x", "]"]))
def test_the_jsonb_loader_gives_json_loads_value_or_error(value: Any, pad: str) -> None:
    """The loader scans jsonb's text without decode's whitespace checks: for any JSON text,
    with or without whitespace or junk after it, the value json.loads gives, or an
    Undecodable where json.loads raises."""
    text = json.dumps(value, ensure_ascii=False) + pad
    got = JsonbLoader(0).load(b"\x01" + text.encode())
    try:
        want = json.loads(text)
    except ValueError:
        assert isinstance(got, Undecodable)
    else:
        assert json.dumps(got) == json.dumps(want)


def test_jsonb_that_is_not_utf8_is_undecodable() -> None:
    """A SQL_ASCII database keeps any bytes in jsonb strings and sends them unconverted: the
    job fails alone (Undecodable), instead of the claim that read it, again and again."""
    got = JsonbLoader(0).load(b'\x01"\xe9"')
    assert isinstance(got, Undecodable) and "utf-8" in got.error


@given(raw=st.binary(max_size=40) | st.text(max_size=20).map(lambda t: json.dumps(t).encode()))
def test_the_jsonb_loader_never_raises_on_any_bytes(raw: bytes) -> None:
    """Whatever bytes jsonb's text arrives as, a value json.loads gives or an Undecodable:
    never an exception, which would fail the claim that read them."""
    got = JsonbLoader(0).load(b"\x01" + raw)
    try:
        want = json.loads(raw.decode("utf-8"))
    except ValueError:
        assert isinstance(got, Undecodable)
    else:
        assert json.dumps(got) == json.dumps(want)
