-- pgq.sweep: the workers' maintenance beside their heartbeats: reap, due schedules, and a
-- prune when the last one is over two hours old; a failing task does not fail the call;
-- privileges.
BEGIN;
SELECT plan(10);

\ir fixtures/setup.sql

INSERT INTO t_worker VALUES ('w1', pgq.register_worker('w1', ARRAY['sw']));
SELECT is((SELECT count(*) FROM pgq.claim(pg_temp.wid('w1'), ARRAY['sw'])), 0::bigint, 'nothing to claim yet');
SELECT pgq.enqueue('sw');
SELECT is((SELECT count(*) FROM pgq.claim(pg_temp.wid('w1'), ARRAY['sw'])), 1::bigint, 'w1 claims the job');

-- The sweep reaps a silent worker and returns how many jobs it released.
UPDATE pgq._workers SET heartbeat_at = now() - interval '1 hour' WHERE id = pg_temp.wid('w1');
SELECT is(pgq.sweep(), 1, 'the sweep releases the silent worker''s job');
SELECT results_eq(
    $$SELECT w.state, (SELECT j.status FROM pgq._jobs AS j WHERE j.entrypoint = 'sw') FROM pgq._workers AS w
      WHERE w.id = pg_temp.wid('w1')$$,
    $$ VALUES ('dead', 'queued') $$,
    'the worker is dead, its job queued again'
);

-- It prunes the outcome log when the last prune is over two hours old.
INSERT INTO pgq._outcomes (job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, finished_at)
VALUES (-1, 'sw', 'succeeded', 0, 0, 1, now() - interval '8 days', now() - interval '8 days');
UPDATE pgq._maintenance SET last_run = now() - interval '1 hour' WHERE task = 'prune';
SELECT lives_ok($$SELECT pgq.sweep()$$, 'a sweep an hour after the last prune');
SELECT is(
    (SELECT count(*) FROM pgq._outcomes AS o WHERE o.job_id = -1),
    1::bigint,
    'an outcome past its retention is kept: the last prune is recent'
);
UPDATE pgq._maintenance SET last_run = now() - interval '3 hours' WHERE task = 'prune';
SELECT lives_ok($$SELECT pgq.sweep()$$, 'a sweep three hours after the last prune');
SELECT results_eq(
    $$
        SELECT (SELECT count(*) FROM pgq._outcomes AS o WHERE o.job_id = -1),
               (SELECT m.last_run FROM pgq._maintenance AS m WHERE m.task = 'prune')
    $$,
    $$SELECT 0::bigint, now()$$,
    'the overdue prune ran: the old outcome is gone'
);

-- Privileges.
SET ROLE pgq_worker;
SELECT lives_ok($$SELECT pgq.sweep()$$, 'pgq_worker can sweep');
RESET ROLE;
SET ROLE pgq_producer;
SELECT throws_ok($$SELECT pgq.sweep()$$, '42501', NULL, 'pgq_producer cannot sweep');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
