"""`make demo`: the real thing on a throwaway database.

Creates the database `pgq_demo` (dropped first if it exists), installs pgq, and produces a
mixed workload from plain SQL: a trigger on an `orders` table enqueues one job per order,
receipts go in with pgq.enqueue_batch, reminders are scheduled seconds ahead. Some orders
fail once and are retried; a few always fail and end dead. Two `pgq worker` processes
drain the queue while a progress bar follows pgq.queues; then the queues view and a
summary are printed. The cluster keeps running for exploration with psql.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time

import click
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from .. import migrate
from ..job import Job
from ..worker import Worker

DEMO_DB = "pgq_demo"
ORDERS = 5000
RECEIPTS = 2000
REMINDERS = 200

# --- the application the workers run (`pgq worker pgq.cli.demo:worker`) ---------------------

worker = Worker(concurrency=50, batch_size=50)


class PaymentDeclined(Exception):
    pass


@worker.entrypoint("process_order")
async def process_order(job: Job) -> None:
    order = job.payload
    await asyncio.sleep(random.uniform(0.001, 0.004))  # a call to a payment service
    if order["id"] % 97 == 0:
        raise PaymentDeclined(f"order {order['id']}: card declined")
    if order["id"] % 10 == 0 and job.attempt == 1:
        raise ConnectionError(f"order {order['id']}: payment service timed out")


@worker.entrypoint("send_receipt")
def send_receipt(job: Job) -> None:
    time.sleep(random.uniform(0.0005, 0.002))  # a blocking SMTP client, run in a thread


@worker.entrypoint("send_reminder")
async def send_reminder(job: Job) -> None:
    await asyncio.sleep(0.001)


# --- the orchestration (`python -m pgq.cli.demo`) ------------------------------------------

SETUP = f"""
CREATE TABLE orders (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    customer text NOT NULL,
    amount numeric(10, 2) NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TRIGGER orders_enqueue AFTER INSERT ON orders
    FOR EACH ROW EXECUTE FUNCTION pgq.enqueue_trigger('process_order');
SELECT pgq.configure('process_order', max_attempts => 3, backoff_base => '200 milliseconds');

INSERT INTO orders (customer, amount)
SELECT 'customer-' || (i % 300), round((random() * 200)::numeric, 2)
FROM generate_series(1, {ORDERS}) AS i;

SELECT count(*) FROM pgq.enqueue_batch(
    'send_receipt',
    ARRAY(SELECT jsonb_build_object('order_id', i) FROM generate_series(1, {RECEIPTS}) AS i)
);

SELECT pgq.enqueue('send_reminder', jsonb_build_object('n', i),
                   run_at => now() + make_interval(secs => 1 + i % 4))
FROM generate_series(1, {REMINDERS}) AS i;
"""


# Exact counts of the demo's jobs (pgq.jobs, a few thousand rows): pgq.queues estimates a
# count above its exact limit, which would print more jobs than were enqueued.
ENQUEUED = "SELECT entrypoint, count(*)::int FROM pgq.jobs GROUP BY entrypoint"
REMAINING = "SELECT count(*)::int FROM pgq.jobs WHERE status <> 'dead'"


def _table(rows: list[tuple], headers: list[str]) -> str:
    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=False))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=False)).rstrip() for r in cells]
    return "\n".join(out)


def main() -> None:
    admin = os.environ.get("PGQ_DEMO_DSN", "postgresql://postgres@127.0.0.1:54329/postgres")
    dsn = make_conninfo(admin, dbname=DEMO_DB)
    with psycopg.connect(admin, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DEMO_DB,)).fetchone():
            # The previous run's pg_cron job too; cascade: its own orders trigger depends on pgq.
            migrate.uninstall(dsn, cascade=True)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DEMO_DB)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DEMO_DB)))
    for line in migrate.install(dsn):
        click.echo(line)

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SETUP)
        enqueued = dict(conn.execute(ENQUEUED).fetchall())
    total = sum(enqueued.values())
    click.echo(
        f"enqueued {total} jobs from SQL: {enqueued.get('process_order', 0)} orders through a trigger,"
        f" {enqueued.get('send_receipt', 0)} receipts in one enqueue_batch,"
        f" {enqueued.get('send_reminder', 0)} reminders 1-4 s ahead"
    )

    env = {**os.environ, "PGQ_DSN": dsn}
    cmd = [sys.executable, "-m", "pgq", "worker", "pgq.cli.demo:worker"]
    workers = [subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL) for _ in range(2)]
    click.echo(f"started 2 workers (pids {', '.join(str(p.pid) for p in workers)})")
    started = time.monotonic()
    try:
        with (
            psycopg.connect(dsn, autocommit=True) as conn,
            click.progressbar(length=total, label="draining", show_pos=True) as bar,
        ):
            left = total
            while left > 0:
                time.sleep(0.2)
                left = conn.execute(REMAINING).fetchone()[0]
                bar.update(total - left - bar.pos)
                if any(p.poll() is not None for p in workers):
                    raise click.ClickException(
                        "a worker exited early; run `pgq worker pgq.cli.demo:worker` to see why"
                    )
        elapsed = time.monotonic() - started
    finally:
        for p in workers:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        codes = [p.wait(timeout=60) for p in workers]

    with psycopg.connect(dsn, autocommit=True) as conn:
        queues = conn.execute(
            "SELECT entrypoint, queued, scheduled, running, dead, max_attempts FROM pgq.queues"
        ).fetchall()
        succeeded, retries, dead = conn.execute(
            "SELECT count(*) FILTER (WHERE outcome = 'succeeded'),"
            " count(*) FILTER (WHERE outcome = 'failed'),"
            " (SELECT count(*) FROM pgq.jobs WHERE status = 'dead')"
            " FROM pgq.outcomes"
        ).fetchone()
    click.echo()
    click.echo(_table(queues, ["entrypoint", "queued", "scheduled", "running", "dead", "max_attempts"]))
    click.echo()
    click.echo(
        f"{succeeded} jobs succeeded in {elapsed:.1f} s ({succeeded / elapsed:.0f} jobs/s, with"
        f" reminders waiting up to 4 s); {retries} failed attempts retried or ended dead;"
        f" {dead} jobs dead (retry them with: SELECT pgq.retry(ARRAY(SELECT id FROM pgq.jobs"
        " WHERE status = 'dead')))"
    )
    click.echo(f"workers exited with {codes} after SIGTERM")
    params = conninfo_to_dict(dsn)
    click.echo(
        f"\nThe cluster is still running. Explore: psql -h {params.get('host')} -p {params.get('port')}"
        f" -U {params.get('user')} {DEMO_DB}   (then: SELECT * FROM pgq.queues;)"
    )
    if any(codes):
        sys.exit(1)


if __name__ == "__main__":
    main()
