-- pgq.complete: batch completion, fenced to the worker that holds the job; outcome rows;
-- results; jobs waiting for completed jobs are queued when all their dependencies have
-- succeeded (chains); validation (PQ001); privileges.
BEGIN;
SELECT plan(43);

\ir fixtures/setup.sql

INSERT INTO t_worker VALUES ('w1', pgq.register_worker('w1', ARRAY['done']));
INSERT INTO t_worker VALUES ('w2', pgq.register_worker('w2', ARRAY['done']));
INSERT INTO t_job VALUES ('a', pgq.enqueue('done', priority => 9));
INSERT INTO t_job VALUES ('b', pgq.enqueue('done', priority => 8));
INSERT INTO t_job VALUES ('c', pgq.enqueue('done', priority => 7));
INSERT INTO t_job VALUES ('d', pgq.enqueue('done', priority => 6));
INSERT INTO t_job VALUES ('queued', pgq.enqueue('done', priority => -1));
SELECT is((SELECT count(*) FROM pgq.claim(pg_temp.wid('w1'), ARRAY['done'], 3)), 3::bigint, 'w1 claims a, b, c');
SELECT is(
    (SELECT c.id FROM pgq.claim(pg_temp.wid('w2'), ARRAY['done']) AS c), pg_temp.jid('d'), 'w2 claims d'
);

-- Complete two of three, plus an unknown id.
SELECT set_eq(
    format($$SELECT * FROM pgq.complete(%L, ARRAY[%s, %s, -1])$$, pg_temp.wid('w1'), pg_temp.jid('a'), pg_temp.jid('b')),
    ARRAY[pg_temp.jid('a'), pg_temp.jid('b')],
    'complete returns the ids it completed; an unknown id is left out'
);
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.id IN (pg_temp.jid('a'), pg_temp.jid('b'))),
    0::bigint,
    'completed jobs leave the hot table'
);
SELECT results_eq(
    $$
        SELECT o.outcome, o.entrypoint, o.priority, o.attempt, o.deliveries, o.enqueued_at, o.started_at,
               o.finished_at BETWEEN now() AND clock_timestamp(), o.worker_id, o.error, o.result
        FROM pgq.outcomes AS o WHERE o.job_id = pg_temp.jid('a')
    $$,
    $$
        SELECT 'succeeded', 'done', 9, 1, 1, now(), now(), TRUE, pg_temp.wid('w1'), NULL::text, NULL::jsonb
    $$,
    'a succeeded outcome is logged with the job''s times, counters and worker'
);
SELECT is(pgq.job_status(pg_temp.jid('b')), 'succeeded', 'job_status reports succeeded');
SELECT is(pgq.job_status(pg_temp.jid('c')), 'running', 'the job not in the call is still running');

-- Fenced: a job another worker holds is left alone.
SELECT is_empty(
    format($$SELECT * FROM pgq.complete(%L, ARRAY[%s])$$, pg_temp.wid('w2'), pg_temp.jid('c')),
    'w2 cannot complete w1''s job: nothing is returned'
);
SELECT results_eq(
    $$SELECT j.status, j.worker_id FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('c')$$,
    $$SELECT 'running', pg_temp.wid('w1')$$,
    'the job is still running under w1'
);
SELECT is(
    (SELECT count(*) FROM pgq.outcomes AS o WHERE o.job_id = pg_temp.jid('c')),
    0::bigint,
    'no outcome is logged for the fenced call'
);
SELECT is_empty(
    format($$SELECT * FROM pgq.complete(%L, ARRAY[%s])$$, pg_temp.wid('w1'), pg_temp.jid('queued')),
    'a queued job that nobody holds cannot be completed'
);
SELECT is_empty(
    format($$SELECT * FROM pgq.complete(%L, ARRAY[%s])$$, pg_temp.wid('w1'), pg_temp.jid('a')),
    'completing a job again returns nothing'
);
SELECT is(
    (SELECT count(*) FROM pgq.outcomes AS o WHERE o.job_id = pg_temp.jid('a')),
    1::bigint,
    'a job has one succeeded outcome'
);
SELECT is_empty(
    format($$SELECT * FROM pgq.complete(%L, '{}')$$, pg_temp.wid('w1')),
    'an empty array completes nothing'
);
SELECT is_empty(
    format($$SELECT * FROM pgq.complete('00000000-0000-0000-0000-000000000000', ARRAY[%s])$$, pg_temp.jid('c')),
    'an unknown worker completes nothing'
);

-- Results are stored with the outcome, one per job id.
SELECT results_eq(
    format(
        $$SELECT * FROM pgq.complete(%L, ARRAY[%s, %s], ARRAY['{"sent": 3}', NULL]::jsonb[])$$,
        pg_temp.wid('w2'), pg_temp.jid('c'), pg_temp.jid('d')
    ),
    $$SELECT pg_temp.jid('d')$$,
    'with results, only the held job is completed'
);
SELECT is(
    (SELECT o.result FROM pgq.outcomes AS o WHERE o.job_id = pg_temp.jid('d')),
    NULL,
    'the result at the job''s position (NULL) is stored'
);
SELECT results_eq(
    format(
        $$SELECT * FROM pgq.complete(%L, ARRAY[%s], ARRAY['{"sent": 3}']::jsonb[])$$,
        pg_temp.wid('w1'), pg_temp.jid('c')
    ),
    $$SELECT pg_temp.jid('c')$$,
    'w1 completes c with a result'
);
SELECT is(
    (SELECT o.result FROM pgq.outcomes AS o WHERE o.job_id = pg_temp.jid('c')),
    '{"sent": 3}'::jsonb,
    'the result is stored in the outcome'
);

-- A cancellation request does not stop a completion.
INSERT INTO t_job VALUES ('cancel_me', pgq.enqueue('done'));
SELECT is(
    (SELECT c.id FROM pgq.claim(pg_temp.wid('w1'), ARRAY['done']) AS c), pg_temp.jid('cancel_me'),
    'w1 claims cancel_me (priority 0)'
);
SELECT is(
    (SELECT c.id FROM pgq.claim(pg_temp.wid('w1'), ARRAY['done']) AS c), pg_temp.jid('queued'),
    'w1 claims the job of priority -1'
);
SELECT is(pgq.cancel(ARRAY[pg_temp.jid('cancel_me')]), 1, 'cancellation is requested');
SELECT results_eq(
    format($$SELECT * FROM pgq.complete(%L, ARRAY[%s])$$, pg_temp.wid('w1'), pg_temp.jid('cancel_me')),
    $$SELECT pg_temp.jid('cancel_me')$$,
    'a handler that finishes anyway completes its job'
);
SELECT is(pgq.job_status(pg_temp.jid('cancel_me')), 'succeeded', 'the job ends succeeded');

-- Dependencies: a waiting job is queued when its last dependency succeeds.
INSERT INTO t_worker VALUES ('w3', pgq.register_worker('w3', ARRAY['chain']));
INSERT INTO t_job VALUES ('ca', pgq.enqueue('chain', priority => 2));
INSERT INTO t_job VALUES ('cb', pgq.enqueue('chain', priority => 1));
INSERT INTO t_job VALUES ('after_ab', pgq.enqueue('chain', depends_on => ARRAY[pg_temp.jid('ca'), pg_temp.jid('cb')]));
INSERT INTO t_job VALUES ('after_after', pgq.enqueue('chain', depends_on => ARRAY[pg_temp.jid('after_ab')]));
INSERT INTO t_job VALUES (
    'later', pgq.enqueue('chain', run_at => now() + interval '1 hour', depends_on => ARRAY[pg_temp.jid('ca')])
);
SELECT set_eq(
    format($$SELECT c.id FROM pgq.claim(%L, ARRAY['chain'], 10) AS c$$, pg_temp.wid('w3')),
    ARRAY[pg_temp.jid('ca'), pg_temp.jid('cb')],
    'only the jobs without dependencies are claimed'
);
SELECT results_eq(
    format($$SELECT * FROM pgq.complete(%L, ARRAY[%s])$$, pg_temp.wid('w3'), pg_temp.jid('ca')),
    $$SELECT pg_temp.jid('ca')$$,
    'the first dependency completes'
);
SELECT results_eq(
    $$
        SELECT t.label, j.status, j.run_at FROM pgq._jobs AS j INNER JOIN t_job AS t ON j.id = t.id
        WHERE t.label IN ('after_ab', 'after_after', 'later') ORDER BY t.id
    $$,
    $$
        VALUES ('after_ab', 'waiting', now()), ('after_after', 'waiting', now()),
               ('later', 'queued', now() + interval '1 hour')
    $$,
    'a job with a dependency left keeps waiting; one whose only dependency succeeded is queued, run_at kept'
);
SELECT results_eq(
    format($$SELECT * FROM pgq.complete(%L, ARRAY[%s])$$, pg_temp.wid('w3'), pg_temp.jid('cb')),
    $$SELECT pg_temp.jid('cb')$$,
    'the last dependency completes'
);
SELECT results_eq(
    $$
        SELECT t.label, j.status FROM pgq._jobs AS j INNER JOIN t_job AS t ON j.id = t.id
        WHERE t.label IN ('after_ab', 'after_after') ORDER BY t.id
    $$,
    $$ VALUES ('after_ab', 'queued'), ('after_after', 'waiting') $$,
    'the job is queued once all its dependencies succeeded; the next in the chain still waits'
);
SELECT results_eq(
    format($$SELECT c.id, c.attempt, c.deliveries FROM pgq.claim(%L, ARRAY['chain'], 10) AS c$$, pg_temp.wid('w3')),
    $$SELECT pg_temp.jid('after_ab'), 0, 1$$,
    'the released job is claimed (the scheduled one is not due yet)'
);
SELECT results_eq(
    format($$SELECT * FROM pgq.complete(%L, ARRAY[%s])$$, pg_temp.wid('w3'), pg_temp.jid('after_ab')),
    $$SELECT pg_temp.jid('after_ab')$$,
    'the middle of the chain completes'
);
SELECT results_eq(
    format($$SELECT c.id FROM pgq.claim(%L, ARRAY['chain'], 10) AS c$$, pg_temp.wid('w3')),
    $$SELECT pg_temp.jid('after_after')$$,
    'the end of the chain A -> B -> C is released and claimed'
);
INSERT INTO t_job VALUES ('d1', pgq.enqueue('chain'));
INSERT INTO t_job VALUES ('d2', pgq.enqueue('chain'));
INSERT INTO t_job VALUES ('after_both', pgq.enqueue('chain', depends_on => ARRAY[pg_temp.jid('d1'), pg_temp.jid('d2')]));
SELECT is((SELECT count(*) FROM pgq.claim(pg_temp.wid('w3'), ARRAY['chain'], 10)), 2::bigint, 'w3 claims d1 and d2');
SELECT is(
    (SELECT count(*) FROM pgq.complete(pg_temp.wid('w3'), ARRAY[pg_temp.jid('d2'), pg_temp.jid('d1')])),
    2::bigint,
    'both dependencies complete in one call'
);
SELECT is(pgq.job_status(pg_temp.jid('after_both')), 'queued', 'their dependent is queued');

-- Bad input: PQ001, and nothing changes.
SELECT throws_ok(
    format($$SELECT * FROM pgq.complete(NULL, ARRAY[%s])$$, pg_temp.jid('queued')), 'PQ001', NULL,
    'worker_id NULL raises PQ001'
);
SELECT throws_ok(
    format($$SELECT * FROM pgq.complete(%L, NULL)$$, pg_temp.wid('w1')), 'PQ001', NULL,
    'job_ids NULL raises PQ001'
);
SELECT throws_ok(
    format($$SELECT * FROM pgq.complete(%L, ARRAY[%s, NULL])$$, pg_temp.wid('w1'), pg_temp.jid('queued')),
    'PQ001', NULL,
    'job_ids containing NULL raise PQ001'
);
SELECT throws_ok(
    format(
        $$SELECT * FROM pgq.complete(%L, ARRAY(SELECT g::bigint FROM generate_series(1, 10001) AS g))$$,
        pg_temp.wid('w1')
    ),
    'PQ001', NULL,
    '10001 job ids raise PQ001'
);
SELECT throws_ok(
    format(
        $$SELECT * FROM pgq.complete(%L, ARRAY[%s], ARRAY['{}', '{}']::jsonb[])$$,
        pg_temp.wid('w1'), pg_temp.jid('queued')
    ),
    'PQ001', NULL,
    'results of another length than job_ids raise PQ001'
);
SELECT results_eq(
    $$SELECT j.status, j.worker_id FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('queued')$$,
    $$SELECT 'running', pg_temp.wid('w1')$$,
    'the failed calls completed nothing'
);

-- Privileges.
SET ROLE pgq_producer;
SELECT throws_ok(
    format($$SELECT * FROM pgq.complete(%L, ARRAY[%s])$$, pg_temp.wid('w1'), pg_temp.jid('queued')),
    '42501', NULL,
    'pgq_producer cannot complete'
);
RESET ROLE;
SET ROLE pgq_worker;
SELECT results_eq(
    format($$SELECT * FROM pgq.complete(%L, ARRAY[%s])$$, pg_temp.wid('w1'), pg_temp.jid('queued')),
    $$SELECT pg_temp.jid('queued')$$,
    'pgq_worker can complete'
);
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
