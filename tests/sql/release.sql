-- pgq.release: a worker that lost the reply of a claim gives back the jobs it does not know
-- of; the ones in keep stay held; cancellation requests are honoured; PQ001/PQ002/PQ003.
BEGIN;
SELECT plan(15);

\ir fixtures/setup.sql

INSERT INTO t_worker VALUES ('w', pgq.register_worker('w', ARRAY['mail']));
INSERT INTO t_worker VALUES ('other', pgq.register_worker('other', ARRAY['mail']));
INSERT INTO t_job VALUES ('known', pgq.enqueue('mail', '{"n": 1}'));
INSERT INTO t_job VALUES ('lost', pgq.enqueue('mail', '{"n": 2}'));
INSERT INTO t_job VALUES ('lost_canceled', pgq.enqueue('mail', '{"n": 3}'));
INSERT INTO t_job VALUES ('others', pgq.enqueue('mail', '{"n": 4}'));

SELECT is(
    (SELECT count(*) FROM pgq.claim(pg_temp.wid('w'), ARRAY['mail'], 3)), 3::bigint, 'w claims three jobs'
);
SELECT is(
    (SELECT count(*) FROM pgq.claim(pg_temp.wid('other'), ARRAY['mail'], 3)), 1::bigint, 'other claims the fourth'
);
SELECT is(pgq.cancel(ARRAY[pg_temp.jid('lost_canceled')]), 1, 'cancellation of one of w''s jobs is requested');

-- Bad input first: nothing changes.
SELECT throws_ok(
    format($$SELECT pgq.release(%L, NULL)$$, pg_temp.wid('w')), 'PQ001', NULL, 'keep NULL raises PQ001'
);
SELECT throws_ok(
    format($$SELECT pgq.release(%L, ARRAY[1, NULL]::bigint[])$$, pg_temp.wid('w')), 'PQ001', NULL,
    'keep with a NULL raises PQ001'
);
SELECT throws_ok($$SELECT pgq.release(NULL, '{}')$$, 'PQ001', NULL, 'worker_id NULL raises PQ001');
SELECT throws_ok(
    $$SELECT pgq.release(gen_random_uuid(), '{}')$$, 'PQ002', NULL, 'an unknown worker raises PQ002'
);
SELECT is(
    (SELECT count(*) FROM pgq.jobs AS j WHERE j.status = 'running'), 4::bigint, 'the failed calls released nothing'
);

SELECT is(
    pgq.release(pg_temp.wid('w'), ARRAY[pg_temp.jid('known')]), 2, 'release gives back the two unknown jobs'
);
SELECT results_eq(
    $$SELECT j.status, j.worker_id IS NULL, j.deliveries FROM pgq.jobs AS j WHERE j.id = pg_temp.jid('lost')$$,
    $$ VALUES ('queued', TRUE, 1) $$,
    'the unknown job is queued again, its delivery counted'
);
SELECT is(pgq.job_status(pg_temp.jid('lost_canceled')), 'canceled', 'the unknown job to cancel is canceled');
SELECT is(
    (SELECT j.worker_id FROM pgq.jobs AS j WHERE j.id = pg_temp.jid('known')), pg_temp.wid('w'),
    'the job in keep is still held by w'
);
SELECT is(
    (SELECT j.worker_id FROM pgq.jobs AS j WHERE j.id = pg_temp.jid('others')), pg_temp.wid('other'),
    'another worker''s job is untouched'
);

SELECT lives_ok(format($$SELECT pgq.unregister_worker(%L)$$, pg_temp.wid('other')), 'other stops');
SELECT throws_ok(
    format($$SELECT pgq.release(%L, '{}')$$, pg_temp.wid('other')), 'PQ003', NULL, 'a stopped worker raises PQ003'
);

SELECT * FROM finish();
ROLLBACK;
