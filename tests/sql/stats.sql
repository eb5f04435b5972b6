-- pgq.stats(since): per-entrypoint counts (succeeded, failed attempts, dead, canceled),
-- succeeded per second and the 50th/95th/99th percentiles of wait (started - enqueued) and
-- run (finished - started) of the succeeded jobs, over the outcomes finished in the last
-- `since`; validation (PQ001); privileges.
BEGIN;
SELECT plan(19);

\ir fixtures/setup.sql

-- An outcome row: finished `ago` before now, after waiting `wait` and running `run`.
CREATE PROCEDURE pg_temp.outcome(
    entrypoint text, outcome text, ago interval, wait interval, run interval, fatal boolean DEFAULT FALSE
)
LANGUAGE sql AS $$
    INSERT INTO pgq._outcomes (
        job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, started_at, finished_at, fatal
    )
    VALUES (
        (SELECT coalesce(max(o.job_id), 0) + 1 FROM pgq._outcomes AS o), entrypoint, outcome, 0, 0, 1,
        now() - ago - run - wait, now() - ago - run, now() - ago, fatal
    )
$$;

SELECT is_empty($$SELECT * FROM pgq.stats()$$, 'an empty log: no rows');

-- Entrypoint st: four successes in the last 5 minutes (waits 1-4 s, runs 10-40 s), one
-- 10 minutes ago (wait and run 100 s); failed attempts, one of them fatal; a cancellation;
-- a dead job discarded (its fatal failure was counted when it died).
CALL pg_temp.outcome('st', 'succeeded', '1 minute', '1 second', '10 seconds');
CALL pg_temp.outcome('st', 'succeeded', '2 minutes', '4 seconds', '40 seconds');
CALL pg_temp.outcome('st', 'succeeded', '30 seconds', '3 seconds', '20 seconds');
CALL pg_temp.outcome('st', 'succeeded', '4 minutes 59 seconds', '2 seconds', '30 seconds');
CALL pg_temp.outcome('st', 'succeeded', '10 minutes', '100 seconds', '100 seconds');
CALL pg_temp.outcome('st', 'failed', '1 minute', '1 second', '1 second');
CALL pg_temp.outcome('st', 'failed', '2 minutes', '500 seconds', '1 second');
CALL pg_temp.outcome('st', 'failed', '3 minutes', '1 second', '1 second', TRUE);
CALL pg_temp.outcome('st', 'canceled', '1 minute', '0', '0');
CALL pg_temp.outcome('st', 'dead', '1 minute', '0', '0');
-- Entrypoint st_dead: one fatal failure only. Entrypoint st_old: outcomes 6 minutes ago only.
CALL pg_temp.outcome('st_dead', 'failed', '10 seconds', '1 second', '1 second', TRUE);
CALL pg_temp.outcome('st_old', 'succeeded', '6 minutes', '1 second', '1 second');
-- Entrypoint st_real: a job completed through the API (in this transaction: no wait, no run).
INSERT INTO t_worker VALUES ('w1', pgq.register_worker('w1', ARRAY['st_real']));
SELECT isnt(pgq.enqueue('st_real'), NULL, 'a st_real job is enqueued');
CREATE TEMP TABLE t_claimed AS SELECT c.id FROM pgq.claim(pg_temp.wid('w1'), ARRAY['st_real']) AS c;
SELECT is(
    (SELECT count(*) FROM pgq.complete(pg_temp.wid('w1'), (SELECT array_agg(t.id) FROM t_claimed AS t))),
    1::bigint,
    'it is claimed and completed'
);

-- The default window: the last 5 minutes.
SELECT results_eq(
    $$SELECT s.entrypoint FROM pgq.stats() AS s$$,
    ARRAY['st', 'st_dead', 'st_real'],
    'one row per entrypoint with outcomes in the last 5 minutes, by name'
);
SELECT results_eq(
    $$
        SELECT s.succeeded, s.failed, s.dead, s.canceled, round(s.per_second, 6)
        FROM pgq.stats() AS s WHERE s.entrypoint = 'st'
    $$,
    $$ VALUES (4::bigint, 3::bigint, 1::bigint, 1::bigint, 0.013333) $$,
    'counts: 4 succeeded, 3 failed attempts, 1 dead, 1 canceled; per second: 4 / 300 s'
);
SELECT results_eq(
    $$SELECT s.wait_p50, s.wait_p95, s.wait_p99 FROM pgq.stats() AS s WHERE s.entrypoint = 'st'$$,
    $$ VALUES (interval '2.5 seconds', interval '3.85 seconds', interval '3.97 seconds') $$,
    'wait percentiles of the succeeded jobs (1, 2, 3, 4 s), interpolated'
);
SELECT results_eq(
    $$SELECT s.run_p50, s.run_p95, s.run_p99 FROM pgq.stats() AS s WHERE s.entrypoint = 'st'$$,
    $$ VALUES (interval '25 seconds', interval '38.5 seconds', interval '39.7 seconds') $$,
    'run percentiles of the succeeded jobs (10, 20, 30, 40 s), interpolated'
);
SELECT results_eq(
    $$SELECT s.* FROM pgq.stats() AS s WHERE s.entrypoint = 'st_dead'$$,
    $$
        VALUES ('st_dead', 0::bigint, 1::bigint, 1::bigint, 0::bigint, 0::numeric, NULL::interval,
                NULL::interval, NULL::interval, NULL::interval, NULL::interval, NULL::interval)
    $$,
    'an entrypoint with a fatal failure only: no successes, no latency'
);
SELECT results_eq(
    $$
        SELECT s.succeeded, s.failed, s.wait_p50, s.wait_p99, s.run_p50 < interval '1 minute', s.run_p99 >= interval '0'
        FROM pgq.stats() AS s WHERE s.entrypoint = 'st_real'
    $$,
    $$ VALUES (1::bigint, 0::bigint, interval '0', interval '0', TRUE, TRUE) $$,
    'a job completed through pgq.complete is counted, with its wait and run'
);

-- A longer window takes the older outcomes in.
SELECT results_eq(
    $$
        SELECT s.succeeded, round(s.per_second, 6), s.wait_p50, s.wait_p95, s.wait_p99, s.run_p50, s.run_p95, s.run_p99
        FROM pgq.stats('1 hour') AS s WHERE s.entrypoint = 'st'
    $$,
    $$
        VALUES (5::bigint, 0.001389, interval '3 seconds', interval '80.8 seconds', interval '96.16 seconds',
                interval '30 seconds', interval '88 seconds', interval '97.6 seconds')
    $$,
    'since => 1 hour: 5 succeeded, 5 / 3600 s, percentiles over 5 jobs'
);
SELECT results_eq(
    $$SELECT s.entrypoint, s.succeeded FROM pgq.stats(since => '1 hour') AS s WHERE s.entrypoint = 'st_old'$$,
    $$ VALUES ('st_old', 1::bigint) $$,
    'since => 1 hour includes an entrypoint whose outcomes are 6 minutes old'
);
SELECT results_eq(
    $$SELECT s.entrypoint, s.succeeded, s.failed FROM pgq.stats('45 seconds') AS s$$,
    $$ VALUES ('st', 1::bigint, 0::bigint), ('st_dead', 0, 1), ('st_real', 1, 0) $$,
    'since => 45 seconds: only what finished in the last 45 s'
);

-- Bad input: PQ001.
SELECT throws_ok(
    $$SELECT * FROM pgq.stats(NULL)$$, 'PQ001', 'pgq: invalid argument since: NULL is out of range',
    'since NULL raises PQ001 naming the argument'
);
SELECT throws_ok($$SELECT * FROM pgq.stats('0')$$, 'PQ001', NULL, 'since 0 raises PQ001');
SELECT throws_ok($$SELECT * FROM pgq.stats('-5 minutes')$$, 'PQ001', NULL, 'a negative since raises PQ001');
SELECT throws_ok($$SELECT * FROM pgq.stats('32 days')$$, 'PQ001', NULL, 'since over 31 days raises PQ001');

-- Privileges.
SET ROLE pgq_producer;
SELECT throws_ok($$SELECT * FROM pgq.stats()$$, '42501', NULL, 'pgq_producer cannot read stats');
RESET ROLE;
SET ROLE pgq_worker;
SELECT lives_ok($$SELECT * FROM pgq.stats()$$, 'pgq_worker can read stats (pgq status)');
RESET ROLE;
SET ROLE pgq_admin;
SELECT results_eq(
    $$SELECT s.entrypoint, s.succeeded FROM pgq.stats('31 days') AS s$$,
    $$ VALUES ('st', 5::bigint), ('st_dead', 0::bigint), ('st_old', 1::bigint), ('st_real', 1::bigint) $$,
    'pgq_admin can read stats (since 31 days is accepted)'
);
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
