-- pgq.claim_v3: the 0.3.0 claim. attempt counts runs from 1 (a snooze spends none, a failure
-- one, pgq.retry starts again at 1); reason says why the job is delivered (first, retry,
-- snooze, lost); the older forms of pgq.claim keep counting failures from 0; validation.
-- The claim itself (order, limits, keys) is tested through pgq.claim (claim.sql).
BEGIN;
SELECT plan(16);

CREATE TEMP TABLE t_w (id uuid NOT NULL);
INSERT INTO t_w SELECT pgq.register_worker('v3', ARRAY['v3']);
CREATE TEMP TABLE t_j (id bigint NOT NULL);
INSERT INTO t_j SELECT pgq.enqueue('v3', max_attempts => 2);
SELECT lives_ok(
    $$SELECT pgq.configure('v3', backoff_base => '0 seconds', backoff_max => '0 seconds')$$, 'no backoff'
);

SELECT results_eq(
    $$SELECT attempt, deliveries, reason FROM pgq.claim_v3((SELECT id FROM t_w), ARRAY['v3'])$$,
    $$VALUES (1, 1, 'first')$$,
    'a first run is attempt 1, reason first'
);
SELECT is(pgq.snooze((SELECT id FROM t_w), (SELECT id FROM t_j), '0 seconds'), 'snoozed', 'snoozed');
SELECT results_eq(
    $$SELECT attempt, deliveries, reason FROM pgq.claim_v3((SELECT id FROM t_w), ARRAY['v3'])$$,
    $$VALUES (1, 2, 'snooze')$$,
    'after a snooze: the same attempt, reason snooze'
);
SELECT is(pgq.fail((SELECT id FROM t_w), (SELECT id FROM t_j), 'boom', '0 seconds'), 'queued', 'failed');
SELECT results_eq(
    $$SELECT attempt, deliveries, reason FROM pgq.claim_v3((SELECT id FROM t_w), ARRAY['v3'])$$,
    $$VALUES (2, 3, 'retry')$$,
    'after a failure: the next attempt, reason retry'
);
SELECT is(pgq.release((SELECT id FROM t_w), '{}'), 1, 'released while it ran');
SELECT results_eq(
    $$SELECT attempt, deliveries FROM pgq.claim(worker_id => (SELECT id FROM t_w), entrypoints => ARRAY['v3'],
        batch_size => 1, protocol => 2)$$,
    $$VALUES (1, 4)$$,
    'protocol => 2 counts failures from 0 (its worker expects that)'
);
SELECT is(pgq.release((SELECT id FROM t_w), '{}'), 1, 'released again');
SELECT results_eq(
    $$SELECT attempt, deliveries, reason FROM pgq.claim_v3((SELECT id FROM t_w), ARRAY['v3'])$$,
    $$VALUES (2, 5, 'lost')$$,
    'after a delivery given back unsettled: reason lost'
);
SELECT is(pgq.fail((SELECT id FROM t_w), (SELECT id FROM t_j), 'boom'), 'dead', 'max_attempts 2: dead after two runs');
SELECT results_eq(
    $$SELECT status, attempt FROM pgq.jobs WHERE id = (SELECT id FROM t_j)$$,
    $$VALUES ('dead', 2)$$,
    'pgq.jobs: a dead job shows its last attempt'
);
SELECT is(pgq.retry(ARRAY[(SELECT id FROM t_j)]), 1, 'retried');
SELECT results_eq(
    $$SELECT attempt, deliveries, reason FROM pgq.claim_v3((SELECT id FROM t_w), ARRAY['v3'])$$,
    $$VALUES (1, 6, 'retry')$$,
    'pgq.retry: attempt 1 again, reason retry'
);

SELECT throws_ok(
    format($$SELECT * FROM pgq.claim_v3(%L, ARRAY['v3'], 0)$$, (SELECT id FROM t_w)), 'PQ001', NULL,
    'batch_size 0 raises PQ001'
);
SELECT throws_ok(
    $$SELECT * FROM pgq.claim_v3('00000000-0000-0000-0000-000000000000', ARRAY['v3'])$$, 'PQ002', NULL,
    'an unknown worker raises PQ002'
);

SELECT * FROM finish();
ROLLBACK;
