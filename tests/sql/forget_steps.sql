-- pgq.forget_steps: pgq.retry of a dead job keeps its steps (a retry resumes);
-- forget_steps makes the next run start over; a running job's steps stay; PQ001 changes
-- nothing; only pgq_admin may call it.
BEGIN;
SELECT plan(8);

CREATE TEMP TABLE t_job (label text PRIMARY KEY, id bigint NOT NULL);
CREATE TEMP TABLE t_worker (label text PRIMARY KEY, id uuid NOT NULL);
GRANT SELECT ON t_job, t_worker TO public;
CREATE FUNCTION pg_temp.jid(label text) RETURNS bigint
LANGUAGE sql STABLE AS $$ SELECT t.id FROM pg_temp.t_job AS t WHERE t.label = $1 $$;
CREATE FUNCTION pg_temp.wid(label text) RETURNS uuid
LANGUAGE sql STABLE AS $$ SELECT t.id FROM pg_temp.t_worker AS t WHERE t.label = $1 $$;

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

SELECT * FROM finish();
ROLLBACK;
