-- pgq.run_now: queued jobs whose run_at is ahead become due now, nothing else about them
-- changes; due, running, waiting, dead and unknown jobs are left alone; validation (PQ001)
-- changes nothing; privileges.
BEGIN;
SELECT plan(12);

CREATE TEMP TABLE t_jobs AS
SELECT
    pgq.enqueue('rn', '{"n": 1}', run_at => now() + interval '1 hour') AS later,
    pgq.enqueue('rn', '{"n": 2}', run_at => now() + interval '1 day', priority => 5) AS later2,
    pgq.enqueue('rn', '{"n": 3}') AS due,
    pgq.enqueue('rn2', '{"n": 4}', run_at => now() + interval '1 hour') AS other;
UPDATE pgq._jobs AS j SET attempt = 1, snoozes = 2 WHERE j.id = (SELECT t.later2 FROM t_jobs AS t);
CREATE TEMP TABLE t_before AS SELECT
    j.id,
    j.run_at
FROM pgq._jobs AS j;

SELECT is(
    pgq.run_now(ARRAY[
        (SELECT t.later FROM t_jobs AS t), (SELECT t.later2 FROM t_jobs AS t),
        (SELECT t.due FROM t_jobs AS t), 999999999
    ]),
    2,
    'two scheduled jobs made due; the due job and an unknown id are not counted'
);
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j INNER JOIN t_jobs AS t ON j.id IN (t.later, t.later2) WHERE j.run_at = now()),
    2::bigint,
    'their run_at is now'
);
SELECT results_eq(
    $$SELECT j.status, j.attempt, j.snoozes, j.priority FROM pgq._jobs AS j
      WHERE j.id = (SELECT t.later2 FROM t_jobs AS t)$$,
    $$VALUES ('queued'::text, 1, 2, 5)$$,
    'status, attempt, snoozes and priority stay'
);
SELECT is(
    (SELECT j.run_at FROM pgq._jobs AS j WHERE j.id = (SELECT t.due FROM t_jobs AS t)),
    (SELECT b.run_at FROM t_before AS b WHERE b.id = (SELECT t.due FROM t_jobs AS t)),
    'a due job keeps its run_at'
);
SELECT is(
    (SELECT j.run_at > now() FROM pgq._jobs AS j WHERE j.id = (SELECT t.other FROM t_jobs AS t)),
    TRUE,
    'a job not named stays scheduled'
);
SELECT is(pgq.run_now(ARRAY[]::bigint[]), 0, 'an empty array moves nothing');

-- A dead job is not made due (pgq.retry re-queues it).
UPDATE pgq._jobs AS j SET status = 'dead', run_at = now() + interval '1 hour'
WHERE j.id = (SELECT t.other FROM t_jobs AS t);
SELECT is(pgq.run_now(ARRAY[(SELECT t.other FROM t_jobs AS t)]), 0, 'a dead job is left alone');

-- Bad input: PQ001 naming the argument, and nothing changes.
CREATE TEMP TABLE t_snap AS SELECT
    j.id,
    j.run_at,
    j.status
FROM pgq._jobs AS j;
SELECT throws_ok(
    $$SELECT pgq.run_now(NULL)$$, 'PQ001', 'pgq: invalid argument job_ids: must not be NULL',
    'job_ids NULL raises PQ001 naming the argument'
);
SELECT throws_ok(
    $$SELECT pgq.run_now(ARRAY[(SELECT t.later FROM t_jobs AS t), NULL])$$, 'PQ001',
    'pgq: invalid argument job_ids: contains NULL',
    'a NULL element raises PQ001'
);
SELECT is_empty(
    $$SELECT j.id, j.run_at, j.status FROM pgq._jobs AS j
      EXCEPT SELECT s.id, s.run_at, s.status FROM t_snap AS s$$,
    'a refused call changed nothing'
);

-- Privileges.
SET ROLE pgq_worker;
SELECT throws_ok($$SELECT pgq.run_now(ARRAY[1::bigint])$$, '42501', NULL, 'pgq_worker cannot run jobs now');
RESET ROLE;
SET ROLE pgq_admin;
SELECT is(pgq.run_now(ARRAY[1::bigint]), 0, 'pgq_admin can');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
