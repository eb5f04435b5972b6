-- pgq.reap: silent workers are marked dead and their jobs re-queued (re-delivery visible,
-- late calls fenced); per-entrypoint lease; timeouts; cancellation; old worker rows pruned;
-- privileges.
BEGIN;
SELECT plan(54);

\ir fixtures/setup.sql

SELECT is(pgq.reap(), 0, 'reap with nothing to do returns 0');

INSERT INTO t_worker VALUES ('silent', pgq.register_worker('silent', ARRAY['r']));
INSERT INTO t_worker VALUES ('alive', pgq.register_worker('alive', ARRAY['r']));
INSERT INTO t_job VALUES ('a', pgq.enqueue('r', priority => 3));
INSERT INTO t_job VALUES ('b', pgq.enqueue('r', priority => 2));
INSERT INTO t_job VALUES ('c', pgq.enqueue('r', priority => 1));
SELECT is((SELECT count(*) FROM pgq.claim(pg_temp.wid('silent'), ARRAY['r'], 2)), 2::bigint, 'silent claims a and b');
SELECT is(
    (SELECT c.id FROM pgq.claim(pg_temp.wid('alive'), ARRAY['r']) AS c), pg_temp.jid('c'), 'alive claims c'
);

-- A heartbeat within the lease (30 s by default) keeps the worker.
UPDATE pgq._workers SET heartbeat_at = now() - interval '20 seconds' WHERE id = pg_temp.wid('silent');
SELECT is(pgq.reap(), 0, 'a worker silent for less than its lease is not reaped');
SELECT is(
    (SELECT w.state FROM pgq._workers AS w WHERE w.id = pg_temp.wid('silent')), 'alive', 'it stays alive'
);

-- Silent past the lease: dead, jobs re-queued.
UPDATE pgq._workers SET heartbeat_at = now() - interval '1 hour' WHERE id = pg_temp.wid('silent');
SELECT is(pgq.reap(), 2, 'reap returns the number of jobs it re-queued');
SELECT results_eq(
    $$SELECT w.state, w.stopped_at FROM pgq._workers AS w WHERE w.id = pg_temp.wid('silent')$$,
    $$SELECT 'dead', now()$$,
    'the silent worker is marked dead'
);
SELECT results_eq(
    $$
        SELECT j.status, j.worker_id, j.started_at, j.attempt, j.deliveries
        FROM pgq._jobs AS j WHERE j.id IN (pg_temp.jid('a'), pg_temp.jid('b')) ORDER BY j.id
    $$,
    $$ VALUES ('queued', NULL::uuid, NULL::timestamptz, 0, 1), ('queued', NULL, NULL, 0, 1) $$,
    'its jobs are queued again, no attempt counted, deliveries kept'
);
SELECT results_eq(
    $$SELECT j.status, j.worker_id FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('c')$$,
    $$SELECT 'running', pg_temp.wid('alive')$$,
    'a live worker''s job is left alone'
);
SELECT is(pgq.reap(), 0, 'a second sweep finds nothing more');

-- The dead worker is fenced out.
SELECT is_empty(
    format($$SELECT * FROM pgq.complete(%L, ARRAY[%s])$$, pg_temp.wid('silent'), pg_temp.jid('a')),
    'a late complete by the reaped worker completes nothing'
);
SELECT is(pgq.job_status(pg_temp.jid('a')), 'queued', 'the job is still queued after the late complete');
SELECT is(
    (SELECT count(*) FROM pgq.outcomes AS o WHERE o.job_id = pg_temp.jid('a')),
    0::bigint,
    'the late complete logged no outcome'
);
SELECT is(pgq.fail(pg_temp.wid('silent'), pg_temp.jid('b'), 'late'), NULL, 'a late fail by the reaped worker returns NULL');
SELECT throws_ok(
    format($$SELECT pgq.heartbeat(%L)$$, pg_temp.wid('silent')), 'PQ003', NULL,
    'heartbeat of the reaped worker raises PQ003'
);
SELECT throws_ok(
    format($$SELECT * FROM pgq.claim(%L, ARRAY['r'])$$, pg_temp.wid('silent')), 'PQ003', NULL,
    'claim by the reaped worker raises PQ003'
);

-- Re-delivery, and the late complete cannot touch the new delivery.
SELECT results_eq(
    format($$SELECT c.id, c.deliveries FROM pgq.claim(%L, ARRAY['r'], 10) AS c ORDER BY c.id$$, pg_temp.wid('alive')),
    $$ VALUES (pg_temp.jid('a'), 2), (pg_temp.jid('b'), 2) $$,
    'the re-delivered jobs have deliveries 2'
);
SELECT is_empty(
    format($$SELECT * FROM pgq.complete(%L, ARRAY[%s, %s])$$, pg_temp.wid('silent'), pg_temp.jid('a'), pg_temp.jid('b')),
    'a late complete of re-delivered jobs completes nothing'
);
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.worker_id = pg_temp.wid('alive') AND j.status = 'running'),
    3::bigint,
    'the new holder keeps all three jobs'
);

-- The lease comes from the entrypoint's settings (the shortest of the worker's).
SELECT lives_ok($$SELECT pgq.configure('slow', lease => '2 hours')$$, 'slow gets a lease of 2 hours');
INSERT INTO t_worker VALUES ('slow', pgq.register_worker('slow', ARRAY['slow']));
INSERT INTO t_worker VALUES ('mixed', pgq.register_worker('mixed', ARRAY['slow', 'r']));
UPDATE pgq._workers SET heartbeat_at = now() - interval '1 hour'
WHERE id IN (pg_temp.wid('slow'), pg_temp.wid('mixed'));
SELECT is(pgq.reap(), 0, 'the sweep re-queues nothing (neither worker holds jobs)');
SELECT is(
    (SELECT w.state FROM pgq._workers AS w WHERE w.id = pg_temp.wid('slow')),
    'alive',
    'a worker silent for 1 hour with a lease of 2 hours stays alive'
);
SELECT is(
    (SELECT w.state FROM pgq._workers AS w WHERE w.id = pg_temp.wid('mixed')),
    'dead',
    'a worker is held to the shortest lease of its entrypoints'
);

-- A job whose cancellation was requested ends canceled when its worker is reaped.
INSERT INTO t_worker VALUES ('doomed', pgq.register_worker('doomed', ARRAY['rc']));
INSERT INTO t_job VALUES ('cancel', pgq.enqueue('rc'));
SELECT is(
    (SELECT c.id FROM pgq.claim(pg_temp.wid('doomed'), ARRAY['rc']) AS c), pg_temp.jid('cancel'), 'doomed claims a job'
);
SELECT is(pgq.cancel(ARRAY[pg_temp.jid('cancel')]), 1, 'its cancellation is requested');
UPDATE pgq._workers SET heartbeat_at = now() - interval '1 hour' WHERE id = pg_temp.wid('doomed');
SELECT is(pgq.reap(), 1, 'the sweep counts the canceled job among the jobs it acted on');
SELECT is(pgq.job_status(pg_temp.jid('cancel')), 'canceled', 'the job is canceled, not re-queued');

-- Timeouts: a job running longer than timeout + lease fails, even under a live worker.
SELECT lives_ok($$SELECT pgq.configure('rt', timeout => '1 minute')$$, 'rt gets a timeout of 1 minute');
INSERT INTO t_worker VALUES ('busy', pgq.register_worker('busy', ARRAY['rt']));
INSERT INTO t_job VALUES ('long', pgq.enqueue('rt'));
INSERT INTO t_job VALUES ('short', pgq.enqueue('rt'));
SELECT is((SELECT count(*) FROM pgq.claim(pg_temp.wid('busy'), ARRAY['rt'], 2)), 2::bigint, 'busy claims two jobs');
UPDATE pgq._jobs SET started_at = now() - interval '2 minutes' WHERE id = pg_temp.jid('long');
UPDATE pgq._jobs SET started_at = now() - interval '80 seconds' WHERE id = pg_temp.jid('short');
SELECT is(pgq.reap(), 1, 'reap fails the job past timeout + lease');
SELECT results_eq(
    $$SELECT j.status, j.attempt, j.worker_id FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('long')$$,
    $$ VALUES ('queued', 1, NULL::uuid) $$,
    'the timed-out job is queued for a retry with attempt 1'
);
SELECT matches(
    (SELECT o.error FROM pgq.outcomes AS o WHERE o.job_id = pg_temp.jid('long') AND o.outcome = 'failed'),
    '^timeout',
    'a failed outcome with a timeout error is logged'
);
SELECT results_eq(
    $$SELECT j.status, j.worker_id FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('short')$$,
    $$SELECT 'running', pg_temp.wid('busy')$$,
    'a job within timeout + lease keeps running'
);
SELECT is(
    (SELECT w.state FROM pgq._workers AS w WHERE w.id = pg_temp.wid('busy')),
    'alive',
    'the worker of the timed-out job stays alive'
);

-- Rows of workers gone for over a day are deleted (once they hold nothing).
INSERT INTO t_worker VALUES ('old', pgq.register_worker('old', ARRAY['r']));
SELECT is(pgq.unregister_worker(pg_temp.wid('old')), 0, 'old unregisters');
UPDATE pgq._workers SET stopped_at = now() - interval '2 days' WHERE id = pg_temp.wid('old');
SELECT is(pgq.reap(), 0, 'the sweep runs');
SELECT is(
    (SELECT count(*) FROM pgq._workers AS w WHERE w.id = pg_temp.wid('old')),
    0::bigint,
    'a worker stopped over a day ago is deleted'
);
SELECT throws_ok(
    format($$SELECT pgq.heartbeat(%L)$$, pg_temp.wid('old')), 'PQ002', NULL,
    'its id is then unknown: PQ002'
);
SELECT is(
    (SELECT count(*) FROM pgq._workers AS w WHERE w.id = pg_temp.wid('silent')),
    1::bigint,
    'a worker dead for less than a day is kept'
);

-- Workers gone are looked up until none of their jobs is left (released_at), then never
-- again; a heartbeat's sweep does the same, and fails timed-out jobs too.
SELECT isnt(
    (SELECT w.released_at FROM pgq._workers AS w WHERE w.id = pg_temp.wid('silent')), NULL,
    'the dead worker whose jobs all went back is marked released'
);
INSERT INTO t_worker VALUES ('quitter', pgq.register_worker('quitter', ARRAY['hb']));
INSERT INTO t_worker VALUES ('beater', pgq.register_worker('beater', ARRAY['hb']));
INSERT INTO t_job VALUES ('left', pgq.enqueue('hb'));
SELECT is(
    (SELECT c.id FROM pgq.claim(pg_temp.wid('quitter'), ARRAY['hb']) AS c), pg_temp.jid('left'), 'quitter claims a job'
);
-- Stopped without pgq.unregister_worker giving the job back (as if that had failed).
UPDATE pgq._workers SET state = 'stopped', stopped_at = now() WHERE id = pg_temp.wid('quitter');
SELECT is(
    (SELECT w.released_at FROM pgq._workers AS w WHERE w.id = pg_temp.wid('quitter')), NULL,
    'a worker that stopped is not marked released before a sweep'
);
SELECT lives_ok(format($$SELECT pgq.heartbeat(%L)$$, pg_temp.wid('beater')), 'beater heartbeats');
SELECT results_eq(
    $$SELECT j.status, j.worker_id, j.deliveries FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('left')$$,
    $$ VALUES ('queued', NULL::uuid, 1) $$,
    'the heartbeat''s sweep gives back the job of the stopped worker'
);
SELECT isnt(
    (SELECT w.released_at FROM pgq._workers AS w WHERE w.id = pg_temp.wid('quitter')), NULL,
    'and marks it released'
);
-- A running job whose worker is marked released (or whose row is gone) is found only by
-- the whole sweep (pgq.reap, pg_cron's), which walks every running job.
SELECT is(
    (SELECT c.id FROM pgq.claim(pg_temp.wid('beater'), ARRAY['hb']) AS c), pg_temp.jid('left'), 'beater claims it'
);
UPDATE pgq._jobs SET worker_id = pg_temp.wid('quitter') WHERE id = pg_temp.jid('left');
SELECT lives_ok(format($$SELECT pgq.heartbeat(%L)$$, pg_temp.wid('beater')), 'beater heartbeats again');
SELECT is(pgq.job_status(pg_temp.jid('left')), 'running', 'a heartbeat''s sweep does not walk every running job');
SELECT is(pgq.reap(), 1, 'pgq.reap gives the orphan back');
SELECT is(
    (SELECT c.id FROM pgq.claim(pg_temp.wid('beater'), ARRAY['hb']) AS c), pg_temp.jid('left'), 'beater claims it again'
);
UPDATE pgq._jobs SET started_at = now() - interval '2 hours' WHERE id = pg_temp.jid('left');
SELECT lives_ok(format($$SELECT pgq.heartbeat(%L)$$, pg_temp.wid('beater')), 'beater heartbeats, its job past the timeout');
SELECT results_eq(
    $$SELECT j.status, j.attempt, j.last_error ~ '^timeout' FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('left')$$,
    $$ VALUES ('queued', 1, TRUE) $$,
    'the heartbeat''s sweep fails the job past its timeout plus lease'
);

-- Privileges.
SET ROLE pgq_worker;
SELECT lives_ok($$SELECT pgq.reap()$$, 'pgq_worker can reap');
RESET ROLE;
SET ROLE pgq_producer;
SELECT throws_ok($$SELECT pgq.reap()$$, '42501', NULL, 'pgq_producer cannot reap');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
