"""A worker that speaks the protocol badly, for test_conformance.py: `pgq conformance` must
fail it, naming the scenario. BROKEN (environment) picks the fault:
- no-heartbeat: never calls pgq.heartbeat (its long jobs are re-delivered);
- stale-settle: fails a run at its timeout but lets it go on, then completes it without
  naming its delivery (so the late end of one run settles the next delivery).
- stale-settle-slow: the same, and it claims again only CLAIM_DELAY s (default 0.8) after a
  timeout (a worker that polls once a second and missed the notification): the stale end
  still settles the next delivery if that was claimed before it.
- no-stop: never stops a handler, neither for a cancel (the ids its heartbeat returns are
  ignored) nor at a timeout; so do the modes above.
Otherwise it does what docs/protocol.md asks, in the simplest way (one thread per job)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

DSN = os.environ["PGQ_DSN"]
ENTRYPOINTS = os.environ["PGQ_ENTRYPOINTS"].split(",")
BROKEN = os.environ["BROKEN"]
STALE = BROKEN in ("stale-settle", "stale-settle-slow")
# When the main loop may claim again (monotonic seconds): stale-settle-slow pushes it back.
claim_after = 0.0


def sql(query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(DSN, autocommit=True) as conn:
        return conn.execute(query, params).fetchall()


WORKER = sql("SELECT pgq.register_worker('broken', %s)", (ENTRYPOINTS,))[0][0]


def run(job: dict[str, Any]) -> None:
    p, jid, delivery = job["payload"], job["id"], job["deliveries"]
    if p["op"] == "fail" and delivery <= p["times"]:
        sql("SELECT pgq.fail(%s, %s, 'failed as asked', delivery => %s)", (WORKER, jid, delivery))
        return
    if p["op"] == "snooze" and delivery <= p["times"]:
        sql("SELECT pgq.snooze(%s, %s, make_interval(secs => %s), %s)", (WORKER, jid, p["seconds"], delivery))
        return
    if p["op"] == "sleep":
        limit = job["timeout"].total_seconds()
        if STALE and limit < p["seconds"]:
            time.sleep(limit)
            if BROKEN == "stale-settle-slow":
                global claim_after
                claim_after = time.monotonic() + float(os.environ.get("CLAIM_DELAY", "0.8"))
            sql("SELECT pgq.fail(%s, %s, 'timeout', delivery => %s)", (WORKER, jid, delivery))
            time.sleep(p["seconds"] - limit)  # the run goes on...
        else:
            time.sleep(p["seconds"])
    # ...and completes whatever delivery the worker holds now.
    sql("SELECT pgq.complete(%s, %s, %s)", (WORKER, [jid], [Jsonb(p.get("value"))]))


def beat() -> None:
    while BROKEN != "no-heartbeat":
        time.sleep(0.4)
        sql("SELECT pgq.heartbeat(%s)", (WORKER,))


def stop(*_: Any) -> None:
    sql("SELECT pgq.unregister_worker(%s)", (WORKER,))
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
threading.Thread(target=beat, daemon=True).start()
COLUMNS = ("id", "payload", "deliveries", "timeout")
while True:
    time.sleep(max(0.0, claim_after - time.monotonic()))
    try:
        rows = sql(
            "SELECT id, payload, deliveries, timeout FROM pgq.claim(%s, %s, 10, protocol => 2)",
            (WORKER, ENTRYPOINTS),
        )
    except psycopg.Error as exc:  # declared dead (PQ003): it just keeps trying, never exiting
        print(exc, file=sys.stderr)
        rows = []
    for row in rows:
        threading.Thread(target=run, args=(dict(zip(COLUMNS, row, strict=True)),), daemon=True).start()
    time.sleep(0.2)
