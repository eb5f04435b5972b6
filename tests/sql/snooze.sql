-- pgq.snooze: back to queued after the delay with attempt unchanged; a 'snoozed' outcome;
-- fenced (NULL for a non-holder or another delivery); max_snoozes (past it the job fails);
-- a job whose cancellation was requested is canceled; validation (PQ001); privileges.
BEGIN;
SELECT plan(20);

SELECT pgq.register_worker('w', ARRAY['sz']) AS w \gset
SELECT pgq.register_worker('other', ARRAY['sz']) AS other \gset
SELECT pgq.enqueue('sz', '{"n": 1}') AS j \gset
SELECT
    id,
    deliveries
FROM pgq.claim(:'w', ARRAY['sz']) \gset c_

SELECT is(pgq.snooze(:'other', :j, interval '1 minute'), NULL, 'another worker cannot snooze the job');
SELECT is(
    pgq.snooze(:'w', :j, interval '1 minute', delivery => :c_deliveries + 1), NULL,
    'another delivery cannot snooze the job'
);
SELECT is(pgq.snooze(:'w', :j, interval '1 minute', delivery => :c_deliveries), 'snoozed', 'the holder snoozes it');
SELECT results_eq(
    $$SELECT j.status, j.attempt, j.snoozes, j.worker_id IS NULL, j.run_at = now() + interval '1 minute'
      FROM pgq._jobs AS j WHERE j.id = $$ || :j,
    $$VALUES ('queued', 0, 1, TRUE, TRUE)$$,
    'queued again after the delay, attempt unchanged, one snooze counted'
);
SELECT results_eq(
    $$SELECT o.outcome, o.attempt, o.deliveries, o.error FROM pgq._outcomes AS o WHERE o.job_id = $$ || :j,
    $$VALUES ('snoozed', 1, 1, 'snoozed for 00:01:00')$$,
    'the outcome log records the snooze'
);
SELECT is(pgq.snooze(:'w', :j, interval '1 minute'), NULL, 'a snoozed job is no longer held');
SELECT is((SELECT count(*) FROM pgq.claim(:'w', ARRAY['sz'])), 0::bigint, 'it is not due before the delay');

-- max_snoozes: past it the snooze fails the job (an attempt spent).
SELECT pgq.configure('sz', max_snoozes => 1);
UPDATE pgq._jobs SET run_at = now() WHERE id = :j;
SELECT is((SELECT c.id FROM pgq.claim(:'w', ARRAY['sz']) AS c), :j::bigint, 'claimed again after the delay');
SELECT is(pgq.snooze(:'w', :j, interval '0'), 'queued', 'past max_snoozes the snooze fails the job');
SELECT results_eq(
    $$SELECT j.attempt, j.last_error FROM pgq._jobs AS j WHERE j.id = $$ || :j,
    $$VALUES (1, 'snoozed 2 times (max_snoozes 1): a job may not snooze forever')$$,
    'the failure spent an attempt and says why'
);

-- pgq.retry gives a dead job a fresh start, its snoozes too: one that died of them could
-- otherwise never snooze again.
UPDATE pgq._jobs SET status = 'dead', run_at = now() WHERE id = :j;
SELECT is(pgq.retry(ARRAY[:j]::bigint[]), 1, 'the dead job is retried');
SELECT is((SELECT c.id FROM pgq.claim(:'w', ARRAY['sz']) AS c), :j::bigint, 'and claimed');
SELECT is(pgq.snooze(:'w', :j, interval '0'), 'snoozed', 'and snoozed again, not failed');
SELECT results_eq(
    $$SELECT j.attempt, j.snoozes FROM pgq._jobs AS j WHERE j.id = $$ || :j,
    $$VALUES (0, 1)$$,
    'a snooze, not a failure: attempt 0, snoozes 1'
);

-- A job whose cancellation was requested is canceled instead.
SELECT pgq.enqueue('sz', NULL) AS k \gset
UPDATE pgq._jobs SET run_at = now() - interval '1 hour' WHERE id = :k;
SELECT is((SELECT c.id FROM pgq.claim(:'w', ARRAY['sz']) AS c), :k::bigint, 'the second job is claimed');
SELECT pgq.cancel(ARRAY[:k]::bigint[]);
SELECT is(pgq.snooze(:'w', :k, interval '1 minute'), 'canceled', 'a job whose cancel was requested is canceled');

SELECT throws_ok(
    format('SELECT pgq.snooze(NULL, %s, interval ''1 s'')', :j), 'PQ001',
    'pgq: invalid argument worker_id: must not be NULL', 'worker_id NULL raises PQ001'
);
SELECT throws_ok(
    format('SELECT pgq.snooze(%L, NULL, interval ''1 s'')', :'w'), 'PQ001',
    'pgq: invalid argument job_id: must not be NULL', 'job_id NULL raises PQ001'
);
SELECT throws_ok(
    format('SELECT pgq.snooze(%L, %s, NULL)', :'w', :j), 'PQ001',
    'pgq: invalid argument delay: must not be NULL', 'delay NULL raises PQ001'
);
SELECT throws_ok(
    format('SELECT pgq.snooze(%L, %s, interval ''-1 s'')', :'w', :j), 'PQ001',
    'pgq: invalid argument delay: -00:00:01 is out of range', 'a negative delay raises PQ001'
);

SELECT * FROM finish();
ROLLBACK;
