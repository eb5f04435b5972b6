// A pgq worker in Node.js, written from docs/protocol.md alone: an example that proves the
// contract (`pgq conformance --worker "node examples/node/worker.js"`), not a library.
// Its handlers are the conformance suite's test ops; put your own in `handlers`.
//
//   PGQ_DSN=postgresql://... PGQ_ENTRYPOINTS=a,b node worker.js
'use strict';
const os = require('os');
const { Client, Pool } = require('pg');

const DSN = process.env.PGQ_DSN;
const ENTRYPOINTS = (process.env.PGQ_ENTRYPOINTS || '').split(',').map((s) => s.trim()).filter(Boolean);
const CONCURRENCY = 10;
const POLL_MS = 500; // a missed NOTIFY costs at most this much
const GRACE_MS = 10000; // after SIGTERM, running jobs get this long to finish

class Snooze extends Error {
  constructor(seconds) { super(`snooze ${seconds} s`); this.seconds = seconds; }
}

// The conformance suite's handler contract (docs/protocol.md, "The conformance suite").
const handlers = {
  result: async (p) => p.value,
  fail: async (p, job) => {
    if (job.deliveries <= (p.times ?? 1)) throw new Error(`failing delivery ${job.deliveries} as asked`);
    return p.value;
  },
  sleep: (p, job, signal) => new Promise((resolve, reject) => {
    const timer = setTimeout(() => resolve(p.value), p.seconds * 1000);
    signal.addEventListener('abort', () => { clearTimeout(timer); reject(signal.reason); });
  }),
  snooze: async (p, job) => {
    if (job.deliveries <= (p.times ?? 1)) throw new Snooze(p.seconds);
    return p.value;
  },
};

// bigint ids arrive as strings: they stay strings (keys of `running`, parameters).
// Intervals are turned into seconds in SQL, so no interval parsing here.
const pool = new Pool({ connectionString: DSN, max: 4 });
const sql = async (text, values) => (await pool.query(text, values)).rows;
const log = (...args) => console.error(new Date().toISOString(), ...args);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let workerId = null;
let leaseSeconds = 30;
let stopping = false;
let claiming = false; // a claim in flight: the heartbeat then sends no running list
let registering = null;
const running = new Map(); // job id -> { job, abort, cancelRequested }

async function register() {
  const name = `node:${os.hostname()}:${process.pid}`;
  [{ id: workerId }] = await sql('SELECT pgq.register_worker($1, $2::text[]) AS id', [name, ENTRYPOINTS]);
  // The lease that paces the heartbeat: the shortest of the entrypoints served.
  [{ lease: leaseSeconds }] = await sql(
    'SELECT min(extract(epoch FROM lease))::float8 AS lease FROM pgq.settings($1::text[], protocol => 2)',
    [ENTRYPOINTS]);
  log(`registered ${workerId} for ${ENTRYPOINTS.join(', ')} (lease ${leaseSeconds} s)`);
}

// PQ002 / PQ003: this worker is unknown or was declared dead. Its jobs are re-delivered:
// stop their handlers (their settlements would be fenced anyway) and register again, once.
function registerAgain(err) {
  if (!registering) {
    log(`worker ${workerId}: ${err.message}; registering again`);
    for (const entry of running.values()) entry.abort.abort(new Error('worker declared dead'));
    registering = register().finally(() => { registering = null; });
  }
  return registering;
}
const gone = (err) => err.code === 'PQ002' || err.code === 'PQ003';

let wake = null;
const poke = () => { if (wake) { const w = wake; wake = null; w(); } };
const nap = (ms) => new Promise((r) => { const t = setTimeout(r, ms); wake = () => { clearTimeout(t); r(); }; });

async function execute(job) {
  const entry = { job, abort: new AbortController(), cancelRequested: false };
  running.set(job.id, entry);
  const timer = setTimeout(
    () => entry.abort.abort(new Error(`timeout: ran longer than ${job.timeout_s} s`)), job.timeout_s * 1000);
  const held = [job.worker, job.id];
  try {
    try {
      const handler = handlers[job.payload && job.payload.op];
      if (!handler) throw new Error(`no handler for payload ${JSON.stringify(job.payload)}`);
      const value = await handler(job.payload, job, entry.abort.signal);
      if (entry.abort.signal.aborted) throw entry.abort.signal.reason; // too late: not a success
      const result = value === undefined || value === null ? null : JSON.stringify(value);
      const done = await sql(
        'SELECT pgq.complete($1, ARRAY[$2]::bigint[], results => ARRAY[$3]::jsonb[],'
        + ' deliveries => ARRAY[$4]::int[]) AS id', [...held, result, job.deliveries]);
      if (done.length === 0) log(`job ${job.id}: delivery ${job.deliveries} no longer held; not completed`);
    } catch (err) {
      let outcome;
      if (entry.cancelRequested) {
        [{ outcome }] = await sql('SELECT pgq.confirm_cancel($1, $2, delivery => $3) AS outcome',
          [...held, job.deliveries]);
      } else if (err instanceof Snooze) {
        [{ outcome }] = await sql('SELECT pgq.snooze($1, $2, make_interval(secs => $3::float8), delivery => $4)'
          + ' AS outcome', [...held, err.seconds, job.deliveries]);
      } else {
        [{ outcome }] = await sql('SELECT pgq.fail($1, $2, $3, delivery => $4) AS outcome',
          [...held, String(err.stack || err), job.deliveries]);
      }
      log(`job ${job.id}: ${outcome === null ? 'no longer held' : outcome} (${err.message})`);
    }
  } catch (err) {
    log(`job ${job.id}: could not settle: ${err.message}`); // the heartbeat's running list gives it back
  } finally {
    clearTimeout(timer);
    running.delete(job.id);
    poke();
  }
}

async function claimLoop() {
  while (!stopping) {
    const free = CONCURRENCY - running.size;
    let rows = [];
    if (free > 0 && !registering) {
      claiming = true;
      const worker = workerId;
      try {
        rows = await sql(
          'SELECT id, entrypoint, payload, headers, attempt, deliveries,'
          + ' extract(epoch FROM timeout)::float8 AS timeout_s'
          + ' FROM pgq.claim($1, $2::text[], $3, protocol => 2)', [worker, ENTRYPOINTS, free]);
      } catch (err) {
        if (gone(err)) await registerAgain(err); else log(`claim: ${err.message}`);
      } finally {
        claiming = false;
      }
      for (const row of rows) execute({ ...row, worker });
      if (rows.length > 0 && rows.length === free) continue; // there may be more
    }
    await nap(POLL_MS);
  }
}

async function heartbeat() {
  if (registering) return;
  // Only jobs of this registration, and only when no claim is in flight (its jobs would
  // be released); NULL releases nothing.
  const ids = claiming ? null : [...running.values()].filter((e) => e.job.worker === workerId).map((e) => e.job.id);
  try {
    const rows = await sql('SELECT pgq.heartbeat($1, $2::bigint[]) AS id', [workerId, ids]);
    for (const { id } of rows) {
      const entry = running.get(id);
      if (entry && entry.job.worker === workerId && !entry.cancelRequested) {
        entry.cancelRequested = true;
        entry.abort.abort(new Error('canceled'));
      }
    }
  } catch (err) {
    if (gone(err)) await registerAgain(err); else log(`heartbeat: ${err.message}`);
  }
}

async function heartbeatLoop() {
  for (;;) {
    await sleep(Math.min(leaseSeconds / 5, 10) * 1000); // lease/5, at most 10 s
    await heartbeat();
  }
}

// NOTIFY pgq: an entrypoint name wakes the claim loop; `cancel:<worker id>` asks for a
// heartbeat now (it returns the ids to cancel). Anything else is ignored.
async function listen() {
  for (;;) {
    const client = new Client({ connectionString: DSN });
    try {
      await client.connect();
      client.on('notification', (msg) => {
        if (ENTRYPOINTS.includes(msg.payload)) poke();
        else if (msg.payload === `cancel:${workerId}`) heartbeat();
      });
      await client.query('LISTEN pgq');
      await new Promise((resolve) => { client.on('error', resolve); client.on('end', resolve); });
    } catch (err) {
      log(`listen: ${err.message}`);
    }
    client.end().catch(() => {});
    await sleep(1000); // polling covers the gap
  }
}

async function shutdown() {
  if (stopping) return;
  stopping = true;
  poke();
  log(`SIGTERM: finishing ${running.size} jobs (at most ${GRACE_MS / 1000} s)`);
  const deadline = Date.now() + GRACE_MS;
  while (running.size > 0 && Date.now() < deadline) await sleep(50);
  try {
    await sql('SELECT pgq.unregister_worker($1)', [workerId]); // unfinished jobs go back now
  } catch (err) {
    log(`could not unregister: ${err.message}; the lease gives its jobs back`);
  }
  process.exit(0);
}

async function main() {
  if (!DSN || ENTRYPOINTS.length === 0) throw new Error('set PGQ_DSN and PGQ_ENTRYPOINTS');
  await register();
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
  listen();
  heartbeatLoop();
  await claimLoop();
}

main().catch((err) => { log(err); process.exit(1); });
