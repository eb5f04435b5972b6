-- pgq.fail: retry with backoff while attempts remain ('queued'), else 'dead'; retry_in;
-- fenced (NULL for a non-holder); cancellation; outcome rows (fatal marks the failure that
-- left a job dead); a dead job cancels the jobs waiting for it; validation (PQ001); privileges.
BEGIN;
SELECT plan(66);

\ir fixtures/setup.sql

-- Make a job due again and claim it for a worker; returns the claimed id.
CREATE FUNCTION pg_temp.reclaim(worker text, job text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
BEGIN
    UPDATE pgq._jobs AS j SET run_at = now() - interval '1 second' WHERE j.id = pg_temp.jid(job);
    SELECT c.id INTO v_id FROM pgq.claim(pg_temp.wid(worker), ARRAY[(
        SELECT j.entrypoint FROM pgq._jobs AS j WHERE j.id = pg_temp.jid(job)
    )]) AS c;
    RETURN v_id;
END
$$;

INSERT INTO t_worker VALUES ('w1', pgq.register_worker('w1', ARRAY['f', 'f2', 'f3', 'f4', 'f5', 'f6']));
INSERT INTO t_worker VALUES ('w2', pgq.register_worker('w2', ARRAY['f', 'f2', 'f3', 'f4', 'f5', 'f6']));

-- First failure: queued again with backoff (default base 1 s: delay in [0.5 s, 1 s)).
INSERT INTO t_job VALUES ('a', pgq.enqueue('f'));
SELECT is(pg_temp.reclaim('w1', 'a'), pg_temp.jid('a'), 'w1 claims a');
SELECT is(pgq.fail(pg_temp.wid('w1'), pg_temp.jid('a'), 'boom 1'), 'queued', 'fail with attempts left returns queued');
SELECT results_eq(
    $$
        SELECT j.status, j.attempt, j.deliveries, j.worker_id, j.started_at, j.last_error
        FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('a')
    $$,
    $$ VALUES ('queued', 1, 1, NULL::uuid, NULL::timestamptz, 'boom 1') $$,
    'the job is queued, attempt 1, released by the worker, last_error kept'
);
SELECT ok(
    (
        SELECT j.run_at >= now() + interval '0.5 seconds' AND j.run_at < now() + interval '1 second'
        FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('a')
    ),
    'first retry runs after the backoff: between 0.5 s and 1 s from now'
);
SELECT is_empty(
    format($$SELECT * FROM pgq.claim(%L, ARRAY['f'])$$, pg_temp.wid('w2')),
    'the job is not claimable during its backoff'
);
SELECT results_eq(
    $$
        SELECT o.outcome, o.attempt, o.deliveries, o.worker_id, o.started_at, o.error
        FROM pgq.outcomes AS o WHERE o.job_id = pg_temp.jid('a')
    $$,
    $$SELECT 'failed', 1, 1, pg_temp.wid('w1'), now(), 'boom 1'$$,
    'a failed outcome is logged for the attempt'
);

-- Second failure: the backoff doubles.
SELECT is(pg_temp.reclaim('w2', 'a'), pg_temp.jid('a'), 'w2 claims a again');
SELECT is(pgq.fail(pg_temp.wid('w2'), pg_temp.jid('a'), 'boom 2'), 'queued', 'the second failure returns queued');
SELECT ok(
    (
        SELECT j.attempt = 2 AND j.run_at >= now() + interval '1 second' AND j.run_at < now() + interval '2 seconds'
        FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('a')
    ),
    'attempt 2; second retry between 1 s and 2 s from now'
);

-- backoff_max caps the delay.
SELECT lives_ok(
    $$SELECT pgq.configure('f3', backoff_base => '10 seconds', backoff_max => '15 seconds')$$,
    'f3 gets backoff_base 10 s, backoff_max 15 s'
);
INSERT INTO t_job VALUES ('capped', pgq.enqueue('f3'));
UPDATE pgq._jobs SET attempt = 2 WHERE id = pg_temp.jid('capped');
SELECT is(pg_temp.reclaim('w1', 'capped'), pg_temp.jid('capped'), 'w1 claims the capped job');
SELECT is(pgq.fail(pg_temp.wid('w1'), pg_temp.jid('capped'), 'boom'), 'queued', 'the third failure returns queued');
SELECT ok(
    (
        SELECT j.run_at >= now() + interval '7.5 seconds' AND j.run_at < now() + interval '15 seconds'
        FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('capped')
    ),
    'the delay (40 s uncapped) is capped at backoff_max 15 s, with jitter: between 7.5 s and 15 s'
);

-- retry_in replaces the backoff.
INSERT INTO t_job VALUES ('retry_in', pgq.enqueue('f'));
SELECT is(pg_temp.reclaim('w1', 'retry_in'), pg_temp.jid('retry_in'), 'w1 claims retry_in');
SELECT is(
    pgq.fail(pg_temp.wid('w1'), pg_temp.jid('retry_in'), 'later', retry_in => '42 seconds'),
    'queued',
    'fail with retry_in returns queued'
);
SELECT is(
    (SELECT j.run_at FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('retry_in')),
    now() + interval '42 seconds',
    'retry_in is honoured exactly'
);
SELECT is(
    (SELECT c.id FROM pgq.claim(pg_temp.wid('w1'), ARRAY['f']) AS c),
    NULL,
    'nothing of f is due'
);
UPDATE pgq._jobs SET run_at = now() - interval '1 second' WHERE id = pg_temp.jid('retry_in');
SELECT is(pg_temp.reclaim('w1', 'retry_in'), pg_temp.jid('retry_in'), 'w1 claims retry_in again');
SELECT is(
    pgq.fail(pg_temp.wid('w1'), pg_temp.jid('retry_in'), 'now', retry_in => '0'),
    'queued',
    'fail with retry_in 0 returns queued'
);
SELECT is(
    (SELECT c.id FROM pgq.claim(pg_temp.wid('w2'), ARRAY['f']) AS c),
    pg_temp.jid('retry_in'),
    'with retry_in 0 the job is claimable at once'
);

-- Dead after max_attempts (the job's own, else the entrypoint's).
INSERT INTO t_job VALUES ('two', pgq.enqueue('f2', max_attempts => 2));
SELECT is(pg_temp.reclaim('w1', 'two'), pg_temp.jid('two'), 'w1 claims two');
SELECT is(pgq.fail(pg_temp.wid('w1'), pg_temp.jid('two'), 'first'), 'queued', 'max_attempts 2: first failure is queued');
SELECT is(pg_temp.reclaim('w1', 'two'), pg_temp.jid('two'), 'w1 claims two again');
SELECT is(
    pgq.fail(pg_temp.wid('w1'), pg_temp.jid('two'), 'second', retry_in => '1 second'),
    'dead',
    'max_attempts 2: second failure is dead, even with retry_in'
);
SELECT results_eq(
    $$SELECT j.status, j.attempt, j.worker_id, j.last_error FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('two')$$,
    $$ VALUES ('dead', 2, NULL::uuid, 'second') $$,
    'the dead job stays in the table with attempt 2 and its last error'
);
SELECT is(pgq.job_status(pg_temp.jid('two')), 'dead', 'job_status reports dead');
SELECT results_eq(
    $$SELECT o.outcome, o.attempt FROM pgq.outcomes AS o WHERE o.job_id = pg_temp.jid('two') ORDER BY o.attempt$$,
    $$ VALUES ('failed', 1), ('failed', 2) $$,
    'one failed outcome per attempt'
);
SELECT results_eq(
    $$SELECT o.attempt, o.fatal FROM pgq._outcomes AS o WHERE o.job_id = pg_temp.jid('two') ORDER BY o.attempt$$,
    $$ VALUES (1, FALSE), (2, TRUE) $$,
    'only the failure that left the job dead is fatal'
);
SELECT lives_ok($$SELECT pgq.configure('f4', max_attempts => 1)$$, 'f4 gets max_attempts 1');
INSERT INTO t_job VALUES ('once', pgq.enqueue('f4'));
SELECT is(pg_temp.reclaim('w1', 'once'), pg_temp.jid('once'), 'w1 claims once');
SELECT is(pgq.fail(pg_temp.wid('w1'), pg_temp.jid('once'), 'x'), 'dead', 'the entrypoint''s max_attempts 1 applies');
INSERT INTO t_job VALUES ('default_five', pgq.enqueue('f'));
UPDATE pgq._jobs SET attempt = 4 WHERE id = pg_temp.jid('default_five');
SELECT is(pg_temp.reclaim('w1', 'default_five'), pg_temp.jid('default_five'), 'w1 claims default_five');
SELECT is(
    pgq.fail(pg_temp.wid('w1'), pg_temp.jid('default_five'), 'x'),
    'dead',
    'by default the fifth failure is dead'
);

-- Fenced: only the holder can fail the job.
INSERT INTO t_job VALUES ('held', pgq.enqueue('f5'));
SELECT is(pg_temp.reclaim('w1', 'held'), pg_temp.jid('held'), 'w1 claims held');
SELECT is(pgq.fail(pg_temp.wid('w2'), pg_temp.jid('held'), 'not mine'), NULL, 'fail by a non-holder returns NULL');
SELECT results_eq(
    $$SELECT j.status, j.worker_id, j.attempt FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('held')$$,
    $$SELECT 'running', pg_temp.wid('w1'), 0$$,
    'the job is untouched by the non-holder'
);
SELECT is(
    (SELECT count(*) FROM pgq.outcomes AS o WHERE o.job_id = pg_temp.jid('held')),
    0::bigint,
    'no outcome is logged for the fenced call'
);
SELECT is(pgq.fail(pg_temp.wid('w1'), -1, 'unknown'), NULL, 'fail of an unknown job returns NULL');
SELECT is(
    pgq.fail(pg_temp.wid('w1'), pg_temp.jid('held'), repeat('e', 70000)),
    'queued',
    'the holder fails it with a long error'
);
SELECT is(
    (SELECT length(j.last_error) FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('held')),
    65536,
    'the error is kept up to 64 KiB'
);
SELECT is(pgq.fail(pg_temp.wid('w1'), pg_temp.jid('held'), 'again'), NULL, 'failing it again returns NULL');

-- A job whose cancellation was requested ends canceled.
INSERT INTO t_job VALUES ('cancel', pgq.enqueue('f5'));
SELECT is(pg_temp.reclaim('w1', 'cancel'), pg_temp.jid('cancel'), 'w1 claims cancel');
SELECT is(pgq.cancel(ARRAY[pg_temp.jid('cancel')]), 1, 'cancellation is requested');
SELECT is(pgq.fail(pg_temp.wid('w1'), pg_temp.jid('cancel'), 'stopped'), 'canceled', 'fail returns canceled');
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('cancel')),
    0::bigint,
    'the canceled job leaves the hot table'
);
SELECT is(pgq.job_status(pg_temp.jid('cancel')), 'canceled', 'job_status reports canceled');
SELECT results_eq(
    $$
        SELECT o.outcome, o.attempt, o.worker_id, o.error, o.fatal
        FROM pgq._outcomes AS o WHERE o.job_id = pg_temp.jid('cancel')
    $$,
    $$SELECT 'canceled', 1, pg_temp.wid('w1'), 'stopped', FALSE$$,
    'only a canceled outcome is logged, with the error; no failed row'
);

-- Dependencies: a failure with attempts left keeps the dependents waiting; a dead
-- dependency cancels them, and theirs in turn, naming the dead job.
INSERT INTO t_job VALUES ('parent', pgq.enqueue('f6', max_attempts => 2));
INSERT INTO t_job VALUES ('child', pgq.enqueue('f6', depends_on => ARRAY[pg_temp.jid('parent')]));
INSERT INTO t_job VALUES ('grandchild', pgq.enqueue('f6', depends_on => ARRAY[pg_temp.jid('child')]));
INSERT INTO t_job VALUES ('unrelated', pgq.enqueue('f6', run_at => now() + interval '1 day'));
INSERT INTO t_job VALUES ('half', pgq.enqueue('f6', depends_on => ARRAY[pg_temp.jid('unrelated'), pg_temp.jid('parent')]));
SELECT is(pg_temp.reclaim('w1', 'parent'), pg_temp.jid('parent'), 'w1 claims the dependency');
SELECT is(pgq.fail(pg_temp.wid('w1'), pg_temp.jid('parent'), 'first'), 'queued', 'its first failure is queued');
SELECT results_eq(
    $$
        SELECT pgq.job_status(t.id) FROM t_job AS t
        WHERE t.label IN ('child', 'grandchild', 'half') ORDER BY t.id
    $$,
    ARRAY['waiting', 'waiting', 'waiting'],
    'the dependents keep waiting while the dependency has attempts left'
);
SELECT is(pg_temp.reclaim('w1', 'parent'), pg_temp.jid('parent'), 'w1 claims the dependency again');
SELECT is(pgq.fail(pg_temp.wid('w1'), pg_temp.jid('parent'), 'second'), 'dead', 'the dependency is dead');
SELECT results_eq(
    $$
        SELECT t.label, o.outcome, o.error FROM pgq.outcomes AS o INNER JOIN t_job AS t ON o.job_id = t.id
        WHERE t.label IN ('child', 'grandchild', 'half') ORDER BY t.id
    $$,
    format(
        $$ VALUES ('child', 'canceled', %1$L), ('grandchild', 'canceled', %1$L), ('half', 'canceled', %1$L) $$,
        format('dependency %s is dead', pg_temp.jid('parent'))
    ),
    'its dependents, theirs, and a job with another live dependency are canceled: dependency N is dead'
);
SELECT results_eq(
    $$
        SELECT pgq.job_status(t.id) FROM t_job AS t
        WHERE t.label IN ('parent', 'child', 'grandchild', 'unrelated', 'half') ORDER BY t.id
    $$,
    ARRAY['dead', 'canceled', 'canceled', 'queued', 'canceled'],
    'the dead job stays dead, its dependents are canceled, the other dependency is untouched'
);

-- The backoff is capped before it can overflow, however many failures a job has.
SELECT lives_ok($$SELECT pgq.configure('f5', max_attempts => 100)$$, 'f5 gets max_attempts 100');
INSERT INTO t_job VALUES ('many', pgq.enqueue('f5'));
UPDATE pgq._jobs SET attempt = 50 WHERE id = pg_temp.jid('many');
SELECT is(pg_temp.reclaim('w1', 'many'), pg_temp.jid('many'), 'w1 claims a job with 50 failures');
SELECT is(
    pg_temp.try(format($$SELECT pgq.fail(%L, %s, 'again')$$, pg_temp.wid('w1'), pg_temp.jid('many'))),
    'queued',
    'fail at attempt 51 of 100 returns queued with the capped backoff'
);

-- Bad input: PQ001, and nothing changes.
INSERT INTO t_job VALUES ('bad', pgq.enqueue('f5'));
SELECT is(pg_temp.reclaim('w1', 'bad'), pg_temp.jid('bad'), 'w1 claims bad');
SELECT throws_ok(
    format($$SELECT pgq.fail(NULL, %s, 'e')$$, pg_temp.jid('bad')), 'PQ001', NULL, 'worker_id NULL raises PQ001'
);
SELECT throws_ok(
    format($$SELECT pgq.fail(%L, NULL, 'e')$$, pg_temp.wid('w1')), 'PQ001', NULL, 'job_id NULL raises PQ001'
);
SELECT throws_ok(
    format($$SELECT pgq.fail(%L, %s, NULL)$$, pg_temp.wid('w1'), pg_temp.jid('bad')), 'PQ001', NULL,
    'error NULL raises PQ001'
);
SELECT throws_ok(
    format($$SELECT pgq.fail(%L, %s, 'e', retry_in => '-1 second')$$, pg_temp.wid('w1'), pg_temp.jid('bad')),
    'PQ001', NULL,
    'a negative retry_in raises PQ001'
);
SELECT throws_ok(
    format($$SELECT pgq.fail(%L, %s, 'e', retry_in => '11 years')$$, pg_temp.wid('w1'), pg_temp.jid('bad')),
    'PQ001', NULL,
    'retry_in over 10 years raises PQ001'
);
SELECT results_eq(
    $$SELECT j.status, j.worker_id, j.attempt FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('bad')$$,
    $$SELECT 'running', pg_temp.wid('w1'), 0$$,
    'the failed calls changed nothing'
);

-- Privileges.
SET ROLE pgq_producer;
SELECT throws_ok(
    format($$SELECT pgq.fail(%L, %s, 'e')$$, pg_temp.wid('w1'), pg_temp.jid('bad')), '42501', NULL,
    'pgq_producer cannot fail a job'
);
RESET ROLE;
SET ROLE pgq_worker;
SELECT is(
    pgq.fail(pg_temp.wid('w1'), pg_temp.jid('bad'), 'e'),
    'queued',
    'pgq_worker can fail a job'
);
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
