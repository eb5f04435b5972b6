-- pgq.queues at scale: counts through pgq._queue_counts, exact up to the entrypoint's share of
-- pgq.queues_exact_limit, estimated above it (approximate); a low limit keeps the test small.
BEGIN;
SELECT plan(27);

-- Fixture, written straight into the table: qa has due jobs at two priorities (3 at
-- priority 1, 2 at priority 0, the oldest of them at priority 0) and 2 scheduled; qb one
-- due job; qc 3 dead jobs; qd one running and one waiting job.
INSERT INTO pgq._jobs (entrypoint, priority, run_at) VALUES
('qa', 1, now() - interval '1 minute'),
('qa', 1, now() - interval '1 minute'),
('qa', 1, now() - interval '1 minute'),
('qa', 0, now() - interval '10 minutes'),
('qa', 0, now() - interval '2 minutes'),
('qa', 0, now() + interval '1 hour'),
('qa', 5, now() + interval '2 hours'),
('qb', 0, now() - interval '3 minutes');
INSERT INTO pgq._jobs (entrypoint, status) VALUES ('qc', 'dead'), ('qc', 'dead'), ('qc', 'dead');
INSERT INTO pgq._jobs (entrypoint, status, worker_id) VALUES ('qd', 'running', gen_random_uuid());
INSERT INTO pgq._jobs (entrypoint, status, depends_on) VALUES ('qd', 'waiting', ARRAY[1]::bigint[]);
SELECT lives_ok($$SELECT pgq.pause('qe')$$, 'qe has settings and no jobs');

-- What a full scan counts, for comparison.
CREATE TEMP VIEW t_truth AS
SELECT
    j.entrypoint,
    count(*) FILTER (WHERE j.status = 'queued' AND j.run_at <= now()) AS queued,
    count(*) FILTER (WHERE j.status = 'queued' AND j.run_at > now()) AS scheduled,
    count(*) FILTER (WHERE j.status = 'waiting') AS waiting,
    count(*) FILTER (WHERE j.status = 'running') AS running,
    count(*) FILTER (WHERE j.status = 'dead') AS dead,
    now() - min(j.run_at) FILTER (WHERE j.status = 'queued' AND j.run_at <= now()) AS oldest_queued_age,
    FALSE AS approximate
FROM pgq._jobs AS j
WHERE j.entrypoint IN ('qa', 'qb', 'qc', 'qd')
GROUP BY j.entrypoint
UNION ALL
SELECT
    'qe' AS entrypoint,
    0 AS queued,
    0 AS scheduled,
    0 AS waiting,
    0 AS running,
    0 AS dead,
    NULL AS oldest_queued_age,
    FALSE AS approximate;

SELECT results_eq(
    $$
        SELECT q.entrypoint, q.queued, q.scheduled, q.waiting, q.running, q.dead, q.oldest_queued_age, q.approximate
        FROM pgq.queues AS q WHERE q.entrypoint LIKE 'q_' ORDER BY 1
    $$,
    $$SELECT * FROM t_truth ORDER BY 1$$,
    'default limit: every count exact, the oldest due job found across priorities, approximate false'
);

SELECT is(set_config('pgq.queues_exact_limit', '7', TRUE), '7', 'the limit is set to 7');
SELECT results_eq(
    $$
        SELECT q.entrypoint, q.queued, q.scheduled, q.waiting, q.running, q.dead, q.oldest_queued_age, q.approximate
        FROM pgq.queues AS q WHERE q.entrypoint LIKE 'q_' ORDER BY 1
    $$,
    $$SELECT * FROM t_truth ORDER BY 1$$,
    'a limit of 7: 7 queued jobs of an entrypoint (5 due, 2 scheduled, three priorities) are still exact'
);

SELECT is(set_config('pgq.queues_exact_limit', '2', TRUE), '2', 'the limit is set to 2');
SELECT results_eq(
    $$SELECT q.entrypoint, q.approximate FROM pgq.queues AS q WHERE q.entrypoint LIKE 'q_' ORDER BY 1$$,
    $$VALUES ('qa', TRUE), ('qb', FALSE), ('qc', TRUE), ('qd', FALSE), ('qe', FALSE)$$,
    'a limit of 2: the rows with a count over it are approximate'
);
SELECT ok(
    (SELECT q.queued > 2 FROM pgq.queues AS q WHERE q.entrypoint = 'qa'),
    'an estimated count is above the limit (never below what was counted)'
);
SELECT results_eq(
    $$
        SELECT q.waiting, q.running, q.oldest_queued_age
        FROM pgq.queues AS q WHERE q.entrypoint = 'qa'
    $$,
    $$SELECT t.waiting, t.running, t.oldest_queued_age FROM t_truth AS t WHERE t.entrypoint = 'qa'$$,
    'in an approximate row, running, waiting and the oldest age stay exact'
);
SELECT results_eq(
    $$SELECT q.queued, q.dead FROM pgq.queues AS q WHERE q.entrypoint = 'qb'$$,
    $$VALUES (1::bigint, 0::bigint)$$,
    'an entrypoint within the limit is exact beside approximate ones'
);

-- With fresh statistics the estimate is the index's job count less the exact counts.
ANALYZE pgq._jobs;
SELECT results_eq(
    $$SELECT q.entrypoint, q.queued, q.dead FROM pgq.queues AS q WHERE q.entrypoint IN ('qa', 'qc') ORDER BY 1$$,
    $$VALUES ('qa', 5::bigint, 0::bigint), ('qc', 0, 3)$$,
    'fresh statistics: the estimates are the queued and dead jobs the indexes hold, less the exact counts'
);

-- Exact zero and non-zero, whatever the limit.
SELECT is(set_config('pgq.queues_exact_limit', '0', TRUE), '0', 'the limit is set to 0');
SELECT results_eq(
    $$
        SELECT q.entrypoint, q.queued > 0, q.scheduled > 0, q.dead > 0, q.approximate
        FROM pgq.queues AS q WHERE q.entrypoint LIKE 'q_' ORDER BY 1
    $$,
    $$
        VALUES ('qa', TRUE, TRUE, FALSE, TRUE), ('qb', TRUE, FALSE, FALSE, TRUE), ('qc', FALSE, FALSE, TRUE, TRUE),
               ('qd', FALSE, FALSE, FALSE, FALSE), ('qe', FALSE, FALSE, FALSE, FALSE)
    $$,
    'a limit of 0: every count is still zero exactly when there are no such jobs'
);

-- The limit is per entrypoint and state, not shared: with a limit of 120, qf's 150 queued
-- jobs are over it and estimated, qg's 100 are exact, whatever the others hold.
INSERT INTO pgq._jobs (entrypoint) SELECT 'qf' FROM generate_series(1, 150);
INSERT INTO pgq._jobs (entrypoint) SELECT 'qg' FROM generate_series(1, 100);
SELECT is(set_config('pgq.queues_exact_limit', '120', TRUE), '120', 'the limit is set to 120');
SELECT results_eq(
    $$SELECT q.entrypoint, q.approximate FROM pgq.queues AS q WHERE q.entrypoint IN ('qa', 'qf', 'qg') ORDER BY 1$$,
    $$VALUES ('qa', FALSE), ('qf', TRUE), ('qg', FALSE)$$,
    'the limit holds per entrypoint and state: 150 is over 120, 100 is not, beside the others'
);
SELECT is(
    (SELECT q.queued FROM pgq.queues AS q WHERE q.entrypoint = 'qg'), 100::bigint, 'a count within the limit is exact'
);
SELECT is(
    (SELECT q.queued FROM pgq._queue_counts(1000) AS q WHERE q.entrypoint = 'qf'), 150::bigint,
    'the limit as an argument wins over the setting'
);
-- The default: 12,000 queued and 10,001 dead jobs of one entrypoint beside the others are
-- counted exactly (up to 100,000 per entrypoint and state).
SELECT is(set_config('pgq.queues_exact_limit', '', TRUE), '', 'the limit is reset');
INSERT INTO pgq._jobs (entrypoint) SELECT 'qh' FROM generate_series(1, 12000);
INSERT INTO pgq._jobs (entrypoint, status)
SELECT
    'qh' AS entrypoint,
    'dead' AS status
FROM generate_series(1, 10001);
SELECT results_eq(
    $$SELECT q.queued, q.dead, q.approximate FROM pgq.queues AS q WHERE q.entrypoint = 'qh'$$,
    $$VALUES (12000::bigint, 10001::bigint, FALSE)$$,
    'the default limit counts 12,000 queued and 10,001 dead jobs of one entrypoint exactly'
);

-- The budget of a read: 2 x the limit queued jobs, the smallest entrypoints (by the table's
-- statistics) first, then 1,000 each. With a limit of 5,000 (budget 10,000): qj's 4,000 and
-- qk's 4,500 are counted exactly; what is left for ql (4,800) is under its size: estimated.
INSERT INTO pgq._jobs (entrypoint) SELECT 'qj' FROM generate_series(1, 4000);
INSERT INTO pgq._jobs (entrypoint) SELECT 'qk' FROM generate_series(1, 4500);
INSERT INTO pgq._jobs (entrypoint) SELECT 'ql' FROM generate_series(1, 4800);
ANALYZE pgq._jobs;
SELECT is(set_config('pgq.queues_exact_limit', '5000', TRUE), '5000', 'the limit is set to 5000');
SELECT results_eq(
    $$SELECT q.entrypoint, q.queued, q.approximate FROM pgq.queues AS q WHERE q.entrypoint IN ('qj', 'qk') ORDER BY 1$$,
    $$VALUES ('qj', 4000::bigint, FALSE), ('qk', 4500::bigint, FALSE)$$,
    'within the budget, the smaller entrypoints are counted exactly'
);
SELECT results_eq(
    $$SELECT q.approximate, q.queued > 1000 FROM pgq.queues AS q WHERE q.entrypoint = 'ql'$$,
    $$VALUES (TRUE, TRUE)$$,
    'once the budget is spent, a larger entrypoint is estimated (above what was counted)'
);
SELECT is(set_config('pgq.queues_exact_limit', '', TRUE), '', 'the limit is reset again');

-- Validation.
SELECT is(set_config('pgq.queues_exact_limit', 'lots', TRUE), 'lots', 'the limit is set to lots');
SELECT throws_ok(
    $$SELECT * FROM pgq.queues$$, 'PQ001',
    'pgq: invalid argument pgq.queues_exact_limit: ''lots'' is not a whole number from 0 to 999999999',
    'a setting that is not a count is refused (PQ001), naming the setting'
);
SELECT is(set_config('pgq.queues_exact_limit', '', TRUE), '', 'the limit is reset');
SELECT throws_ok(
    $$SELECT * FROM pgq._queue_counts(-1)$$, 'PQ001', 'pgq: invalid argument exact_limit: -1 is negative',
    'a negative limit is refused (PQ001)'
);

-- The readers of pgq.queues run the counting function, the producer does not.
SELECT results_eq(
    $$
        SELECT r.rolname FROM pg_catalog.pg_roles AS r
        WHERE r.rolname IN ('pgq_producer', 'pgq_worker', 'pgq_admin')
          AND has_function_privilege(r.oid, 'pgq._queue_counts(integer)', 'EXECUTE')
        ORDER BY r.rolname
    $$,
    $$VALUES ('pgq_admin'::name), ('pgq_worker')$$,
    'pgq_worker and pgq_admin may run pgq._queue_counts, pgq_producer may not'
);

SELECT * FROM finish();
ROLLBACK;
