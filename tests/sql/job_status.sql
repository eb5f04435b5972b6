-- pgq.job_status: live jobs (queued, waiting, running, dead), finished jobs (succeeded,
-- canceled, dead when discarded), NULL for an unknown id; PQ001 for NULL; privileges.
BEGIN;
SELECT plan(22);

\ir fixtures/setup.sql

INSERT INTO t_worker VALUES ('w1', pgq.register_worker('w1', ARRAY['js']));
INSERT INTO t_job VALUES ('queued', pgq.enqueue('js', priority => -1));
INSERT INTO t_job VALUES ('scheduled', pgq.enqueue('js', run_at => now() + interval '1 hour'));
INSERT INTO t_job VALUES ('running', pgq.enqueue('js', priority => 4));
INSERT INTO t_job VALUES ('succeeded', pgq.enqueue('js', priority => 3));
INSERT INTO t_job VALUES ('retrying', pgq.enqueue('js', priority => 2));
INSERT INTO t_job VALUES ('dead', pgq.enqueue('js', priority => 1, max_attempts => 1));
INSERT INTO t_job VALUES ('canceled', pgq.enqueue('js', priority => -2));
SELECT is((SELECT count(*) FROM pgq.claim(pg_temp.wid('w1'), ARRAY['js'], 4)), 4::bigint, 'w1 claims four jobs');
SELECT is(
    (SELECT count(*) FROM pgq.complete(pg_temp.wid('w1'), ARRAY[pg_temp.jid('succeeded')])),
    1::bigint,
    'one job succeeds'
);
SELECT is(pgq.fail(pg_temp.wid('w1'), pg_temp.jid('retrying'), 'x'), 'queued', 'one job fails and waits for a retry');
SELECT is(pgq.fail(pg_temp.wid('w1'), pg_temp.jid('dead'), 'x'), 'dead', 'one job dies');
SELECT is(pgq.cancel(ARRAY[pg_temp.jid('canceled')]), 1, 'one job is canceled');
INSERT INTO t_job VALUES ('waiting', pgq.enqueue('js', depends_on => ARRAY[pg_temp.jid('running')]));
INSERT INTO t_job VALUES ('born_canceled', pgq.enqueue('js', depends_on => ARRAY[pg_temp.jid('canceled')]));

SELECT is(pgq.job_status(pg_temp.jid('queued')), 'queued', 'a queued job is queued');
SELECT is(pgq.job_status(pg_temp.jid('scheduled')), 'queued', 'a job scheduled for later is queued');
SELECT is(pgq.job_status(pg_temp.jid('running')), 'running', 'a claimed job is running');
SELECT is(pgq.job_status(pg_temp.jid('succeeded')), 'succeeded', 'a completed job is succeeded');
SELECT is(pgq.job_status(pg_temp.jid('retrying')), 'queued', 'a failed job with attempts left is queued, not failed');
SELECT is(pgq.job_status(pg_temp.jid('dead')), 'dead', 'a job out of attempts is dead');
SELECT is(pgq.job_status(pg_temp.jid('canceled')), 'canceled', 'a canceled job is canceled');
SELECT is(pgq.job_status(pg_temp.jid('waiting')), 'waiting', 'a job waiting for a running dependency is waiting');
SELECT is(
    pgq.job_status(pg_temp.jid('born_canceled')), 'canceled', 'a job enqueued after its dependency was canceled is canceled'
);
SELECT is(pgq.cancel(ARRAY[pg_temp.jid('dead')]), 1, 'the dead job is discarded');
SELECT is(pgq.job_status(pg_temp.jid('dead')), 'dead', 'a discarded dead job is still dead');
SELECT is(pgq.job_status(-1), NULL, 'an unknown id is NULL');
SELECT is(
    pgq.job_status((SELECT max(t.id) + 1000 FROM t_job AS t)), NULL, 'an id not yet used is NULL'
);
SELECT throws_ok($$SELECT pgq.job_status(NULL)$$, 'PQ001', NULL, 'job_id NULL raises PQ001');

-- Privileges: producers and workers may follow jobs.
SET ROLE pgq_producer;
SELECT is(pgq.job_status(pg_temp.jid('running')), 'running', 'pgq_producer can call job_status');
RESET ROLE;
SET ROLE pgq_worker;
SELECT is(pgq.job_status(pg_temp.jid('succeeded')), 'succeeded', 'pgq_worker can call job_status');
RESET ROLE;
SET ROLE pgq_admin;
SELECT is(pgq.job_status(pg_temp.jid('canceled')), 'canceled', 'pgq_admin can call job_status');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
