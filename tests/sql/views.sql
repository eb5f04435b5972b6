-- Views for psql administration: pgq.queues, pgq.workers, pgq.jobs, pgq.outcomes,
-- pgq.schedules. Their content, and who may read them (pgq_admin all five, pgq_worker queues
-- and workers).
BEGIN;
SELECT plan(45);

\ir fixtures/setup.sql

SELECT has_view('pgq', 'queues', 'view pgq.queues exists');
SELECT has_view('pgq', 'workers', 'view pgq.workers exists');
SELECT has_view('pgq', 'jobs', 'view pgq.jobs exists');
SELECT has_column('pgq', 'jobs', 'depends_on', 'pgq.jobs shows the jobs a waiting job waits for');
SELECT has_view('pgq', 'outcomes', 'view pgq.outcomes exists');
SELECT has_view('pgq', 'schedules', 'view pgq.schedules exists');

-- Fixture: entrypoint vq with jobs in every state, vq_paused with settings only.
SELECT lives_ok($$SELECT pgq.configure('vq', max_attempts => 8, concurrency => 3)$$, 'vq is configured');
SELECT lives_ok($$SELECT pgq.pause('vq_paused')$$, 'vq_paused is paused');
INSERT INTO t_worker VALUES ('alive', pgq.register_worker('alive', ARRAY['vq']));
INSERT INTO t_worker VALUES ('dead', pgq.register_worker('dead', ARRAY['vq']));
INSERT INTO t_worker VALUES ('stopped', pgq.register_worker('stopped', ARRAY['vq']));
INSERT INTO t_job VALUES ('running', pgq.enqueue('vq', priority => 9));
INSERT INTO t_job VALUES ('dead', pgq.enqueue('vq', priority => 8, max_attempts => 1));
INSERT INTO t_job VALUES ('done', pgq.enqueue('vq', priority => 7));
INSERT INTO t_job VALUES ('queued_old', pgq.enqueue('vq'));
INSERT INTO t_job VALUES ('queued_new', pgq.enqueue('vq'));
INSERT INTO t_job VALUES ('scheduled', pgq.enqueue('vq', run_at => now() + interval '1 hour'));
INSERT INTO t_job VALUES ('plain', pgq.enqueue('vq_plain'));
SELECT is((SELECT count(*) FROM pgq.claim(pg_temp.wid('alive'), ARRAY['vq'], 3)), 3::bigint, 'alive claims three jobs');
SELECT is(pgq.fail(pg_temp.wid('alive'), pg_temp.jid('dead'), 'fatal'), 'dead', 'one job dies');
SELECT is(
    (SELECT count(*) FROM pgq.complete(pg_temp.wid('alive'), ARRAY[pg_temp.jid('done')], ARRAY['{"r": 1}']::jsonb[])),
    1::bigint,
    'one job succeeds'
);
INSERT INTO t_job VALUES ('waiting', pgq.enqueue('vq', depends_on => ARRAY[pg_temp.jid('running')]));
UPDATE pgq._jobs SET run_at = now() - interval '5 minutes' WHERE id = pg_temp.jid('queued_old');
UPDATE pgq._workers SET heartbeat_at = now() - interval '1 hour' WHERE id = pg_temp.wid('dead');
SELECT is(pgq.reap(), 0, 'the silent worker is reaped');
SELECT is(pgq.unregister_worker(pg_temp.wid('stopped')), 0, 'one worker unregisters');

-- pgq.queues
SELECT results_eq(
    $$
        SELECT q.queued, q.scheduled, q.waiting, q.running, q.dead, q.oldest_queued_age, q.paused, q.concurrency,
               q.rate, q.max_attempts, q.lease, q.timeout, q.backoff_base, q.backoff_max, q.retention
        FROM pgq.queues AS q WHERE q.entrypoint = 'vq'
    $$,
    $$
        VALUES (2::bigint, 1::bigint, 1::bigint, 1::bigint, 1::bigint, interval '5 minutes', FALSE, 3,
                NULL::numeric, 8, interval '30 seconds', interval '1 hour', interval '1 second', interval '1 hour',
                interval '7 days')
    $$,
    'queues: counts by state, age of the oldest due job, limits and effective settings'
);
SELECT results_eq(
    $$
        SELECT q.queued, q.running, q.dead, q.oldest_queued_age, q.paused, q.max_attempts
        FROM pgq.queues AS q WHERE q.entrypoint = 'vq_paused'
    $$,
    $$ VALUES (0::bigint, 0::bigint, 0::bigint, NULL::interval, TRUE, 5) $$,
    'queues: an entrypoint with settings but no jobs shows zeros, paused and defaults'
);
SELECT results_eq(
    $$SELECT q.queued, q.paused, q.concurrency, q.max_attempts FROM pgq.queues AS q WHERE q.entrypoint = 'vq_plain'$$,
    $$ VALUES (1::bigint, FALSE, NULL::integer, 5) $$,
    'queues: an entrypoint without settings shows its jobs and the defaults'
);
SELECT results_eq(
    $$SELECT q.entrypoint FROM pgq.queues AS q$$,
    ARRAY['vq', 'vq_paused', 'vq_plain'],
    'queues: one row per entrypoint, ordered by name'
);

-- pgq.workers
SELECT results_eq(
    $$
        SELECT w.name, w.state, w.jobs_held, w.heartbeat_age, w.stopped_at IS NULL, w.entrypoints
        FROM pgq.workers AS w ORDER BY w.name
    $$,
    $$
        VALUES ('alive', 'alive', 1::bigint, interval '0', TRUE, ARRAY['vq']),
               ('dead', 'dead', 0, interval '1 hour', FALSE, ARRAY['vq']),
               ('stopped', 'stopped', 0, interval '0', FALSE, ARRAY['vq'])
    $$,
    'workers: state, jobs held, heartbeat age, stop time'
);
SELECT results_eq(
    $$SELECT w.state = 'alive' FROM pgq.workers AS w$$,
    ARRAY[TRUE, FALSE, FALSE],
    'workers: alive workers are listed first'
);

-- pgq.jobs
SELECT set_eq(
    $$SELECT j.id FROM pgq.jobs AS j$$,
    $$SELECT t.id FROM t_job AS t WHERE t.label <> 'done'$$,
    'jobs: every live job (queued, scheduled, waiting, running, dead), not the finished one'
);
SELECT is(
    (SELECT j.status FROM pgq.jobs AS j WHERE j.id = pg_temp.jid('waiting')),
    'waiting',
    'jobs: a job with a live dependency is waiting'
);
SELECT results_eq(
    $$
        SELECT j.status, j.attempt, j.deliveries, j.max_attempts, j.worker_id, j.last_error
        FROM pgq.jobs AS j WHERE j.id = pg_temp.jid('dead')
    $$,
    $$ VALUES ('dead', 1, 1, 1, NULL::uuid, 'fatal') $$,
    'jobs: a dead job with its own max_attempts and last error'
);
SELECT results_eq(
    $$SELECT j.status, j.max_attempts, j.worker_id FROM pgq.jobs AS j WHERE j.id = pg_temp.jid('running')$$,
    $$SELECT 'running', 8, pg_temp.wid('alive')$$,
    'jobs: a running job with the entrypoint''s max_attempts and its worker'
);
SELECT is(
    (SELECT j.max_attempts FROM pgq.jobs AS j WHERE j.id = pg_temp.jid('plain')),
    5,
    'jobs: the default max_attempts when nothing is configured'
);

-- pgq.outcomes
SELECT results_eq(
    $$
        SELECT o.outcome, o.entrypoint, o.priority, o.attempt, o.deliveries, o.worker_id, o.result
        FROM pgq.outcomes AS o WHERE o.job_id = pg_temp.jid('done')
    $$,
    $$SELECT 'succeeded', 'vq', 7, 1, 1, pg_temp.wid('alive'), '{"r": 1}'::jsonb$$,
    'outcomes: the succeeded row with its result'
);
SELECT results_eq(
    $$SELECT o.outcome, o.attempt, o.error FROM pgq.outcomes AS o WHERE o.job_id = pg_temp.jid('dead')$$,
    $$ VALUES ('failed', 1, 'fatal') $$,
    'outcomes: one failed row for the dead job''s attempt'
);

-- pgq.schedules
SELECT isnt(pgq.schedule('vs', '@hourly', 'vq', '{"s": 1}'), NULL, 'schedule vs is created');
SELECT isnt(pgq.schedule('va', '0 3 * * *', 'vq_plain'), NULL, 'schedule va is created');
SELECT results_eq(
    $$SELECT s.name, s.cron, s.entrypoint, s.payload, s.last_run, s.next_run, s.created_at FROM pgq.schedules AS s$$,
    $$
        VALUES ('va', '0 3 * * *', 'vq_plain', NULL::jsonb, NULL::timestamptz, pgq._cron_next('0 3 * * *', now()), now()),
               ('vs', '@hourly', 'vq', '{"s": 1}'::jsonb, NULL, pgq._cron_next('@hourly', now()), now())
    $$,
    'schedules: one row per schedule, by name, with cron, entrypoint, payload, last and next run'
);

-- Privileges.
-- pgq.queues and pgq.jobs read pgq._default_settings and pgq._jobs as their owner; pgq.queues
-- also calls pgq._queue_counts, checked against the querying role.
SET ROLE pgq_admin;
SELECT lives_ok($$SELECT * FROM pgq.queues$$, 'pgq_admin can read pgq.queues');
SELECT lives_ok($$SELECT * FROM pgq.jobs$$, 'pgq_admin can read pgq.jobs');
SELECT lives_ok($$SELECT * FROM pgq.workers$$, 'pgq_admin can read pgq.workers');
SELECT lives_ok($$SELECT * FROM pgq.outcomes$$, 'pgq_admin can read pgq.outcomes');
SELECT lives_ok($$SELECT * FROM pgq.schedules$$, 'pgq_admin can read pgq.schedules');
SELECT throws_ok($$SELECT * FROM pgq._jobs$$, '42501', NULL, 'pgq_admin cannot read the table pgq._jobs');
RESET ROLE;
SET ROLE pgq_worker;
SELECT lives_ok($$SELECT * FROM pgq.queues$$, 'pgq_worker can read pgq.queues');
SELECT lives_ok($$SELECT * FROM pgq.workers$$, 'pgq_worker can read pgq.workers');
SELECT throws_ok($$SELECT * FROM pgq.jobs$$, '42501', NULL, 'pgq_worker cannot read pgq.jobs');
SELECT throws_ok($$SELECT * FROM pgq.outcomes$$, '42501', NULL, 'pgq_worker cannot read pgq.outcomes');
SELECT throws_ok($$SELECT * FROM pgq.schedules$$, '42501', NULL, 'pgq_worker cannot read pgq.schedules');
RESET ROLE;
SET ROLE pgq_producer;
SELECT throws_ok($$SELECT * FROM pgq.queues$$, '42501', NULL, 'pgq_producer cannot read pgq.queues');
SELECT throws_ok($$SELECT * FROM pgq.workers$$, '42501', NULL, 'pgq_producer cannot read pgq.workers');
SELECT throws_ok($$SELECT * FROM pgq.jobs$$, '42501', NULL, 'pgq_producer cannot read pgq.jobs');
SELECT throws_ok($$SELECT * FROM pgq.outcomes$$, '42501', NULL, 'pgq_producer cannot read pgq.outcomes');
SELECT throws_ok($$SELECT * FROM pgq.schedules$$, '42501', NULL, 'pgq_producer cannot read pgq.schedules');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
