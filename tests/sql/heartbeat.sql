-- pgq.heartbeat: refreshes the worker (and so the leases of all its jobs), reports the
-- jobs whose cancellation was requested, sweeps (silent workers, due schedules; never a
-- prune), releases held jobs the worker does not run, PQ001/PQ002/PQ003, privileges.
BEGIN;
SELECT plan(31);

\ir fixtures/setup.sql

INSERT INTO t_worker VALUES ('w1', pgq.register_worker('w1', ARRAY['hb']));
INSERT INTO t_worker VALUES ('w2', pgq.register_worker('w2', ARRAY['hb']));
INSERT INTO t_job VALUES ('a', pgq.enqueue('hb'));
INSERT INTO t_job VALUES ('b', pgq.enqueue('hb'));
INSERT INTO t_job VALUES ('c', pgq.enqueue('hb'));
SELECT is((SELECT count(*) FROM pgq.claim(pg_temp.wid('w1'), ARRAY['hb'], 2)), 2::bigint, 'w1 claims two jobs');
SELECT is((SELECT count(*) FROM pgq.claim(pg_temp.wid('w2'), ARRAY['hb'], 2)), 1::bigint, 'w2 claims the third');

-- A heartbeat refreshes the worker row: one lease for all its jobs.
UPDATE pgq._workers SET heartbeat_at = now() - interval '20 seconds' WHERE id = pg_temp.wid('w1');
SELECT is_empty(
    format($$SELECT * FROM pgq.heartbeat(%L)$$, pg_temp.wid('w1')),
    'heartbeat returns an empty set when no cancellation was requested'
);
SELECT results_eq(
    $$SELECT w.state, w.heartbeat_at FROM pgq._workers AS w WHERE w.id = pg_temp.wid('w1')$$,
    $$SELECT 'alive', now()$$,
    'heartbeat sets heartbeat_at to now; the worker stays alive'
);

-- A worker silent past its lease is still alive if it heartbeats before the sweep.
UPDATE pgq._workers SET heartbeat_at = now() - interval '1 hour' WHERE id = pg_temp.wid('w1');
SELECT is_empty(
    format($$SELECT * FROM pgq.heartbeat(%L)$$, pg_temp.wid('w1')),
    'a late heartbeat still succeeds while no sweep has run'
);
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.worker_id = pg_temp.wid('w1') AND j.status = 'running'),
    2::bigint,
    'the heartbeating worker keeps its jobs'
);

-- Cancellation requests are reported to the worker that holds the job.
SELECT is(pgq.cancel(ARRAY[pg_temp.jid('a')]), 1, 'cancellation of a running job is requested');
SELECT results_eq(
    format($$SELECT * FROM pgq.heartbeat(%L)$$, pg_temp.wid('w1')),
    $$SELECT pg_temp.jid('a')$$,
    'heartbeat returns the id of the job to cancel'
);
SELECT results_eq(
    format($$SELECT * FROM pgq.heartbeat(%L)$$, pg_temp.wid('w1')),
    $$SELECT pg_temp.jid('a')$$,
    'it keeps returning it until the job ends'
);
SELECT is_empty(
    format($$SELECT * FROM pgq.heartbeat(%L)$$, pg_temp.wid('w2')),
    'another worker is not told'
);
SELECT is(pgq.job_status(pg_temp.jid('a')), 'running', 'the job keeps running until its worker stops it');

-- A heartbeat sweeps: another worker's silence is detected without pg_cron.
UPDATE pgq._workers SET heartbeat_at = now() - interval '1 hour' WHERE id = pg_temp.wid('w2');
SELECT lives_ok(format($$SELECT pgq.heartbeat(%L)$$, pg_temp.wid('w1')), 'w1 heartbeats');
SELECT is(
    (SELECT w.state FROM pgq._workers AS w WHERE w.id = pg_temp.wid('w2')),
    'dead',
    'the silent worker w2 is marked dead by w1''s heartbeat'
);
SELECT results_eq(
    $$SELECT j.status, j.worker_id FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('c')$$,
    $$ VALUES ('queued', NULL::uuid) $$,
    'the silent worker''s job is queued again'
);

-- The sweep fires due schedules, without pg_cron.
SELECT isnt(pgq.schedule('hb-sched', '* * * * *', 'hb_sched', '{"from": "schedule"}'), NULL, 'a schedule is created');
UPDATE pgq._schedules SET next_run = date_trunc('minute', now()) WHERE name = 'hb-sched';
SELECT lives_ok(format($$SELECT pgq.heartbeat(%L)$$, pg_temp.wid('w1')), 'w1 heartbeats once the schedule is due');
SELECT results_eq(
    $$SELECT j.entrypoint, j.payload, j.headers ->> 'schedule' FROM pgq._jobs AS j WHERE j.entrypoint = 'hb_sched'$$,
    $$ VALUES ('hb_sched', '{"from": "schedule"}'::jsonb, 'hb-sched') $$,
    'the heartbeat enqueued the due schedule''s job'
);

-- Pruning is never part of a heartbeat (pgq.sweep does it, in its own transaction).
INSERT INTO pgq._outcomes (job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, finished_at)
VALUES (-1, 'hb', 'succeeded', 0, 0, 1, now() - interval '8 days', now() - interval '8 days');
SELECT lives_ok(format($$SELECT pgq.heartbeat(%L)$$, pg_temp.wid('w1')), 'w1 heartbeats with no prune ever run');
SELECT results_eq(
    $$
        SELECT (SELECT count(*) FROM pgq._outcomes AS o WHERE o.job_id = -1),
               (SELECT count(*) FROM pgq._maintenance AS m WHERE m.task = 'prune')
    $$,
    $$SELECT 1::bigint, 0::bigint$$,
    'heartbeats never prune: the expired outcome is still there'
);

-- A reaped or stopped worker must register again.
SELECT throws_ok(
    format($$SELECT pgq.heartbeat(%L)$$, pg_temp.wid('w2')), 'PQ003', NULL,
    'heartbeat of a reaped worker raises PQ003'
);
SELECT is(
    (SELECT w.heartbeat_at FROM pgq._workers AS w WHERE w.id = pg_temp.wid('w2')),
    now() - interval '1 hour',
    'the reaped worker''s heartbeat_at is not refreshed'
);
INSERT INTO t_worker VALUES ('w3', pgq.register_worker('w3', ARRAY['hb']));
SELECT is(pgq.unregister_worker(pg_temp.wid('w3')), 0, 'w3 unregisters');
SELECT throws_ok(
    format($$SELECT pgq.heartbeat(%L)$$, pg_temp.wid('w3')), 'PQ003', NULL,
    'heartbeat of a stopped worker raises PQ003'
);

-- running: the jobs the worker runs; held jobs not in it are released at once.
INSERT INTO t_worker VALUES ('w4', pgq.register_worker('w4', ARRAY['hb_rec']));
INSERT INTO t_job VALUES ('r1', pgq.enqueue('hb_rec'));
INSERT INTO t_job VALUES ('r2', pgq.enqueue('hb_rec'));
SELECT is((SELECT count(*) FROM pgq.claim(pg_temp.wid('w4'), ARRAY['hb_rec'], 2)), 2::bigint, 'w4 claims two jobs');
SELECT is_empty(
    format($$SELECT * FROM pgq.heartbeat(%L, running => ARRAY[%s]::bigint[])$$, pg_temp.wid('w4'), pg_temp.jid('r1')),
    'w4 heartbeats with the one job it runs'
);
SELECT results_eq(
    $$SELECT j.id, j.status, j.deliveries, j.worker_id FROM pgq._jobs AS j WHERE j.entrypoint = 'hb_rec' ORDER BY j.id$$,
    format(
        $$VALUES (%s::bigint, 'running', 1, %L::uuid), (%s::bigint, 'queued', 1, NULL::uuid)$$,
        pg_temp.jid('r1'), pg_temp.wid('w4'), pg_temp.jid('r2')
    ),
    'the job it does not run is queued again at once, its delivery kept'
);
SELECT throws_ok(
    format($$SELECT pgq.heartbeat(%L, running => ARRAY[NULL]::bigint[])$$, pg_temp.wid('w4')), 'PQ001', NULL,
    'a NULL id in running raises PQ001'
);

-- Bad input.
SELECT throws_ok($$SELECT pgq.heartbeat(NULL)$$, 'PQ001', NULL, 'worker_id NULL raises PQ001');
SELECT throws_ok(
    $$SELECT pgq.heartbeat('00000000-0000-0000-0000-000000000000')$$, 'PQ002', NULL,
    'an unknown worker_id raises PQ002'
);

-- Privileges.
SET ROLE pgq_worker;
SELECT lives_ok(format($$SELECT pgq.heartbeat(%L)$$, pg_temp.wid('w1')), 'pgq_worker can heartbeat');
RESET ROLE;
SET ROLE pgq_producer;
SELECT throws_ok(
    format($$SELECT pgq.heartbeat(%L)$$, pg_temp.wid('w1')), '42501', NULL, 'pgq_producer cannot heartbeat'
);
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
