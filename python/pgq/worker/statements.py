"""The SQL text of every statement the worker sends: pgq's functions called with named
arguments and explicit casts, each with the columns it reads.

What it is for: one place to read what the worker asks of the database (and which form of
a function it calls: pgq.claim_v3, pgq.settings' protocol 2). What it must never do: run a
statement, or hold anything but text (worker.protocol sends them).
"""

from __future__ import annotations

from ..job import CLAIM_FIELDS

# pgq.fail of one delivery: the worker's failures, and a completion its result cannot make.
FAIL = (
    "SELECT pgq.fail(worker_id => %s::uuid, job_id => %s::bigint, error => %s::text,"
    " delivery => %s::int) AS status"
)
# A job whose cancellation was requested: canceled, no attempt spent (pgq.fail would spend one).
CONFIRM_CANCEL = (
    "SELECT pgq.confirm_cancel(worker_id => %s::uuid, job_id => %s::bigint, delivery => %s::int) AS status"
)
SNOOZE = (
    "SELECT pgq.snooze(worker_id => %s::uuid, job_id => %s::bigint,"
    " delay => make_interval(secs => %s::float8), delivery => %s::int) AS status"
)
# One row holding an array, not a row per job: cheaper to read.
COMPLETE = (
    "SELECT coalesce(array_agg(c.id), '{}') AS ids FROM pgq.complete(worker_id => %s::uuid,"
    " job_ids => %s::bigint[], results => %s::jsonb[], deliveries => %s::int[]) AS c (id)"
)
# A transactional handler's job, completed in the handler's own transaction.
COMPLETE_IN_TRANSACTION = (
    "SELECT pgq.complete(worker_id => %s::uuid, job_ids => %s::bigint[],"
    " results => %s::jsonb[], deliveries => %s::int[])"
)
# What the worker claims: the columns Job's claim rows carry, in its order, by name, so a
# column a later release adds is never read. pgq.claim_v3 is the form whose rows count
# attempts from 1 and carry the delivery's reason; pgq.claim keeps the rows of 0.1.0 and
# 0.2.0 for their workers.
CLAIM = (
    "SELECT "
    + ", ".join(f"c.{name}" for name in CLAIM_FIELDS)
    + " FROM pgq.claim_v3(worker_id => %s::uuid, entrypoints => %s::text[], batch_size => %s::int) AS c"
)
REGISTER = "SELECT pgq.register_worker(name => %s::text, entrypoints => %s::text[]) AS id"
HEARTBEAT = "SELECT pgq.heartbeat(worker_id => %s::uuid, running => %s::bigint[]) AS id"
UNREGISTER = "SELECT pgq.unregister_worker(worker_id => %s::uuid) AS released"
SETTINGS = (
    "SELECT extract(epoch FROM min(lease))::float8 AS lease, max(rate)::float8 AS rate,"
    " bool_or(concurrency IS NOT NULL OR key_concurrency IS NOT NULL) AS limited"
    " FROM pgq.settings(entrypoints => %s::text[], protocol => 2)"
)
# What the LISTEN session needs whatever the role's or database's defaults say: it sits
# idle for as long as no job is enqueued, so idle_session_timeout would close it (and the
# NOTIFYs sent until it is back are lost); it runs no transaction, but a setting that ends
# idle transactions must not end it either. Settings the server does not know are skipped.
LISTEN_SETTINGS = (
    "SELECT pg_catalog.set_config(n.name, '0', false) FROM unnest(%s::text[]) AS n (name)"
    " WHERE n.name IN (SELECT s.name FROM pg_catalog.pg_settings AS s)"
)
LISTEN_ZERO = ["idle_session_timeout", "idle_in_transaction_session_timeout", "transaction_timeout"]
