-- pgq.unregister_worker: graceful exit releases the worker's jobs at once, the worker can no
-- longer claim, heartbeat, complete or fail; idempotent; PQ001/PQ002; privileges.
BEGIN;
SELECT plan(23);

\ir fixtures/setup.sql

INSERT INTO t_worker VALUES ('leaving', pgq.register_worker('leaving', ARRAY['mail']));
INSERT INTO t_worker VALUES ('staying', pgq.register_worker('staying', ARRAY['mail']));
INSERT INTO t_job VALUES ('a', pgq.enqueue('mail', '{"n": 1}'));
INSERT INTO t_job VALUES ('b', pgq.enqueue('mail', '{"n": 2}'));
INSERT INTO t_job VALUES ('c', pgq.enqueue('mail', '{"n": 3}'));
INSERT INTO t_job VALUES ('d', pgq.enqueue('mail', '{"n": 4}'));

SELECT is(
    (SELECT count(*) FROM pgq.claim(pg_temp.wid('leaving'), ARRAY['mail'], 3)),
    3::bigint,
    'the leaving worker claims three jobs'
);
SELECT is(
    (SELECT count(*) FROM pgq.claim(pg_temp.wid('staying'), ARRAY['mail'], 3)),
    1::bigint,
    'the staying worker claims the fourth'
);
SELECT is(pgq.cancel(ARRAY[pg_temp.jid('c')]), 1, 'cancellation of one of the leaving worker''s jobs is requested');

SELECT is(pgq.unregister_worker(pg_temp.wid('leaving')), 3, 'unregister_worker returns the number of jobs released or canceled');
SELECT results_eq(
    $$SELECT w.state, w.stopped_at = now() FROM pgq._workers AS w WHERE w.id = pg_temp.wid('leaving')$$,
    $$ VALUES ('stopped', TRUE) $$,
    'the worker is stopped now'
);
SELECT results_eq(
    $$
        SELECT j.status, j.worker_id, j.started_at, j.deliveries, j.attempt, j.run_at <= now()
        FROM pgq._jobs AS j WHERE j.id IN (pg_temp.jid('a'), pg_temp.jid('b')) ORDER BY j.id
    $$,
    $$ VALUES ('queued', NULL::uuid, NULL::timestamptz, 1, 0, TRUE), ('queued', NULL, NULL, 1, 0, TRUE) $$,
    'its jobs are queued again at once, deliveries kept, no attempt counted'
);
SELECT is(pgq.job_status(pg_temp.jid('c')), 'canceled', 'its job whose cancellation was requested is canceled');
SELECT is(
    (SELECT o.outcome FROM pgq.outcomes AS o WHERE o.job_id = pg_temp.jid('c')),
    'canceled',
    'the canceled job has a canceled outcome'
);
SELECT results_eq(
    $$SELECT j.status, j.worker_id FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('d')$$,
    $$ SELECT 'running', pg_temp.wid('staying') $$,
    'another worker''s job is left alone'
);

-- The stopped worker is fenced out.
SELECT is_empty(
    format($$SELECT pgq.complete(%L, ARRAY[%s])$$, pg_temp.wid('leaving'), pg_temp.jid('a')),
    'a late complete by the stopped worker completes nothing'
);
SELECT is(
    pgq.fail(pg_temp.wid('leaving'), pg_temp.jid('b'), 'late'),
    NULL,
    'a late fail by the stopped worker returns NULL'
);
SELECT is(pgq.job_status(pg_temp.jid('a')), 'queued', 'the released job is still queued');
SELECT throws_ok(
    format($$SELECT pgq.claim(%L, ARRAY['mail'])$$, pg_temp.wid('leaving')), 'PQ003', NULL,
    'claim by the stopped worker raises PQ003'
);
SELECT throws_ok(
    format($$SELECT pgq.heartbeat(%L)$$, pg_temp.wid('leaving')), 'PQ003', NULL,
    'heartbeat by the stopped worker raises PQ003'
);

-- Idempotent.
SELECT is(pgq.unregister_worker(pg_temp.wid('leaving')), 0, 'unregistering again releases nothing and does not raise');
SELECT is(
    (SELECT w.state FROM pgq._workers AS w WHERE w.id = pg_temp.wid('leaving')),
    'stopped',
    'the worker stays stopped'
);

-- The released jobs are re-delivered, and the re-delivery is visible.
SELECT results_eq(
    format($$SELECT c.id, c.deliveries FROM pgq.claim(%L, ARRAY['mail'], 10) AS c ORDER BY c.id$$, pg_temp.wid('staying')),
    $$ VALUES (pg_temp.jid('a'), 2), (pg_temp.jid('b'), 2) $$,
    'another worker claims the released jobs with deliveries 2'
);

-- A worker with nothing running.
INSERT INTO t_worker VALUES ('idle', pgq.register_worker('idle', ARRAY['mail']));
SELECT is(pgq.unregister_worker(pg_temp.wid('idle')), 0, 'an idle worker releases nothing');

-- Bad input.
SELECT throws_ok($$SELECT pgq.unregister_worker(NULL)$$, 'PQ001', NULL, 'worker_id NULL raises PQ001');
SELECT throws_ok(
    $$SELECT pgq.unregister_worker('00000000-0000-0000-0000-000000000000')$$, 'PQ002', NULL,
    'an unknown worker_id raises PQ002'
);
SELECT is(
    (SELECT count(*) FROM pgq._workers AS w WHERE w.state = 'alive'),
    1::bigint,
    'the failed calls stopped nobody'
);

-- Privileges.
SET ROLE pgq_worker;
SELECT lives_ok(
    format($$SELECT pgq.unregister_worker(%L)$$, pg_temp.wid('staying')), 'pgq_worker can unregister'
);
RESET ROLE;
SET ROLE pgq_producer;
SELECT throws_ok(
    format($$SELECT pgq.unregister_worker(%L)$$, pg_temp.wid('staying')), '42501', NULL,
    'pgq_producer cannot unregister a worker'
);
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
