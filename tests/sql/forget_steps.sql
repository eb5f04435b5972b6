-- pgq.forget_steps: pgq.retry of a dead job keeps its steps (a retry resumes);
-- forget_steps makes the next run start over; a running job's steps stay; PQ001 changes
-- nothing; only pgq_admin may call it. pgq.prune removes steps and progress of jobs whose
-- outcome is gone, never those of a live job.
BEGIN;
SELECT plan(11);

\ir fixtures/setup.sql

INSERT INTO t_worker VALUES ('w1', pgq.register_worker('w1', ARRAY['fs']));
INSERT INTO t_job VALUES ('dead', pgq.enqueue('fs', priority => 2, max_attempts => 1));
INSERT INTO t_job VALUES ('running', pgq.enqueue('fs', priority => 1));
SELECT is((SELECT count(*) FROM pgq.claim(pg_temp.wid('w1'), ARRAY['fs'], 2)), 2::bigint, 'both jobs are claimed');
SELECT pgq.record_step(pg_temp.wid('w1'), pg_temp.jid('dead'), 1, 'charge', '"ch_1"');
SELECT pgq.record_step(pg_temp.wid('w1'), pg_temp.jid('running'), 1, 'charge', '"ch_2"');
SELECT is(pgq.fail(pg_temp.wid('w1'), pg_temp.jid('dead'), 'boom'), 'dead', 'one job dies after its first step');
SELECT is(pgq.retry(ARRAY[pg_temp.jid('dead')]), 1, 'it is retried');
SELECT is(
    jsonb_array_length(pgq.job(pg_temp.jid('dead')) -> 'steps'), 1, 'the retried job keeps its step: the retry resumes'
);
SELECT is(
    pgq.forget_steps(ARRAY[pg_temp.jid('dead'), pg_temp.jid('running'), -1]), 1::bigint,
    'forget_steps forgets the queued job''s step, not the running job''s, and ignores unknown ids'
);
SELECT is(jsonb_array_length(pgq.job(pg_temp.jid('running')) -> 'steps'), 1, 'the running job keeps its step');
SELECT throws_ok($$SELECT pgq.forget_steps(ARRAY[NULL]::bigint[])$$, 'PQ001', NULL, 'a NULL id raises PQ001');
SET ROLE pgq_worker;
SELECT throws_ok(
    format('SELECT pgq.forget_steps(ARRAY[%s]::bigint[])', pg_temp.jid('running')), '42501', NULL,
    'pgq_worker cannot forget steps'
);
RESET ROLE;

-- Pruning: a job long gone (no live row, no outcome) loses its steps and progress; a live
-- job keeps them however old.
INSERT INTO pgq._steps (job_id, name, result, delivery, recorded_at)
VALUES (-7, 'gone', NULL, 1, now() - interval '30 days');
INSERT INTO pgq._progress (job_id, value, delivery, updated_at) VALUES (-7, 1, 1, now() - interval '30 days');
UPDATE pgq._steps AS s SET recorded_at = now() - interval '30 days' WHERE s.job_id = pg_temp.jid('running');
SELECT ok(pgq.prune() >= 0, 'pgq.prune runs');
SELECT is(
    (SELECT count(*) FROM pgq._steps AS s WHERE s.job_id = -7) + (SELECT count(*) FROM pgq._progress AS p WHERE p.job_id = -7),
    0::bigint, 'the gone job''s steps and progress are pruned'
);
SELECT is(
    (SELECT count(*) FROM pgq._steps AS s WHERE s.job_id = pg_temp.jid('running')), 1::bigint,
    'the live job''s old step stays'
);

SELECT * FROM finish();
ROLLBACK;
