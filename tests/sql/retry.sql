-- pgq.retry: dead jobs go back to queued now with attempt reset; other ids ignored; a dead
-- job whose dedupe_key is taken stays dead; validation (PQ001); privileges.
BEGIN;
SELECT plan(24);

\ir fixtures/setup.sql

-- Claim a job and fail it until it is dead; returns the last fail result.
CREATE FUNCTION pg_temp.kill(job text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_result text;
BEGIN
    LOOP
        UPDATE pgq._jobs AS j SET run_at = now() - interval '1 second' WHERE j.id = pg_temp.jid(job);
        PERFORM 1 FROM pgq.claim(pg_temp.wid('w1'), ARRAY['rt'], 10000);
        v_result := pgq.fail(pg_temp.wid('w1'), pg_temp.jid(job), 'boom');
        EXIT WHEN v_result IS DISTINCT FROM 'queued';
    END LOOP;
    RETURN v_result;
END
$$;

INSERT INTO t_worker VALUES ('w1', pgq.register_worker('w1', ARRAY['rt']));
INSERT INTO t_job VALUES ('dead', pgq.enqueue('rt', max_attempts => 2));
INSERT INTO t_job VALUES ('queued', pgq.enqueue('rt', run_at => now() + interval '1 hour'));
SELECT is(pg_temp.kill('dead'), 'dead', 'a job fails until it is dead');
SELECT results_eq(
    $$SELECT j.status, j.attempt, j.deliveries FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('dead')$$,
    $$ VALUES ('dead', 2, 2) $$,
    'the dead job has attempt 2 after 2 deliveries'
);

SELECT is(pgq.retry(ARRAY[pg_temp.jid('dead'), pg_temp.jid('queued'), -1]), 1, 'retry returns the number re-queued');
SELECT results_eq(
    $$SELECT j.status, j.attempt, j.run_at, j.deliveries FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('dead')$$,
    $$ VALUES ('queued', 0, now(), 2) $$,
    'the dead job is queued now, attempt reset to 0, deliveries kept'
);
SELECT is(
    (SELECT j.run_at FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('queued')),
    now() + interval '1 hour',
    'a queued job passed to retry is left alone'
);
SELECT results_eq(
    format($$SELECT c.id, c.attempt, c.deliveries FROM pgq.claim(%L, ARRAY['rt']) AS c$$, pg_temp.wid('w1')),
    $$SELECT pg_temp.jid('dead'), 0, 3$$,
    'the retried job is claimable at once'
);
SELECT is(pgq.retry(ARRAY[pg_temp.jid('dead')]), 0, 'retry of a running job does nothing');
SELECT is(pgq.job_status(pg_temp.jid('dead')), 'running', 'the running job stays running');
SELECT is(
    pgq.fail(pg_temp.wid('w1'), pg_temp.jid('dead'), 'again', retry_in => '1 hour'),
    'queued',
    'after a retry the job has its full attempts again'
);
SELECT is(pgq.retry('{}'), 0, 'an empty array retries nothing');

-- A dead job whose dedupe_key is taken by a live job stays dead.
INSERT INTO t_job VALUES ('dedupe_dead', pgq.enqueue('rt', dedupe_key => 'k', max_attempts => 1));
SELECT is(pg_temp.kill('dedupe_dead'), 'dead', 'the deduplicated job dies');
INSERT INTO t_job VALUES ('dedupe_live', pgq.enqueue('rt', dedupe_key => 'k', run_at => now() + interval '1 hour'));
SELECT isnt(pg_temp.jid('dedupe_live'), pg_temp.jid('dedupe_dead'), 'a new live job takes the key');
SELECT is(pgq.retry(ARRAY[pg_temp.jid('dedupe_dead')]), 0, 'the dead job is not retried');
SELECT is(pgq.job_status(pg_temp.jid('dedupe_dead')), 'dead', 'it stays dead');

-- Two dead jobs with the same dedupe_key retried in one call: only the newest is re-queued.
INSERT INTO t_job VALUES ('twin_1', pgq.enqueue('rt', dedupe_key => 'twin', max_attempts => 1));
SELECT is(pg_temp.kill('twin_1'), 'dead', 'the first twin dies');
INSERT INTO t_job VALUES ('twin_2', pgq.enqueue('rt', dedupe_key => 'twin', max_attempts => 1));
SELECT is(pg_temp.kill('twin_2'), 'dead', 'the second twin dies');
SELECT is(
    pg_temp.try(format($$SELECT pgq.retry(ARRAY[%s, %s])$$, pg_temp.jid('twin_1'), pg_temp.jid('twin_2'))),
    '1',
    'retry of two dead jobs with the same dedupe_key re-queues one and returns 1'
);

-- Bad input: PQ001, and nothing changes.
SELECT throws_ok($$SELECT pgq.retry(NULL)$$, 'PQ001', NULL, 'job_ids NULL raises PQ001');
SELECT throws_ok(
    format($$SELECT pgq.retry(ARRAY[%s, NULL])$$, pg_temp.jid('twin_1')), 'PQ001', NULL,
    'job_ids containing NULL raise PQ001'
);
SELECT throws_ok(
    format(
        $$SELECT pgq.retry(array_append(ARRAY(SELECT -g::bigint FROM generate_series(1, 10000) AS g), %s))$$,
        pg_temp.jid('twin_1')
    ),
    'PQ001', NULL,
    '10001 job ids raise PQ001'
);
SELECT is(pgq.job_status(pg_temp.jid('twin_1')), 'dead', 'the failed calls retried nothing');

-- Privileges.
SET ROLE pgq_producer;
SELECT throws_ok(
    format($$SELECT pgq.retry(ARRAY[%s])$$, pg_temp.jid('twin_1')), '42501', NULL, 'pgq_producer cannot retry'
);
RESET ROLE;
SET ROLE pgq_worker;
SELECT throws_ok(
    format($$SELECT pgq.retry(ARRAY[%s])$$, pg_temp.jid('twin_1')), '42501', NULL, 'pgq_worker cannot retry'
);
RESET ROLE;
SET ROLE pgq_admin;
SELECT is(pgq.retry(ARRAY[pg_temp.jid('twin_2')]), 0, 'pgq_admin can call retry (twin_2 is live already)');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
