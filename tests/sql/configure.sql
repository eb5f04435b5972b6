-- pgq.configure: per-entrypoint settings; NULL leaves a setting as it is; concurrency => 0
-- and rate => 0 remove the limit; a new rate starts with a full bucket; every argument
-- validated (PQ001, nothing changes); privileges.
BEGIN;
SELECT plan(68);

\ir fixtures/setup.sql

-- The stored settings of an entrypoint, as one text value for comparisons.
CREATE FUNCTION pg_temp.row_of(ep text) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT row(q.paused, q.max_attempts, q.backoff_base, q.backoff_max, q.lease, q.timeout,
               q.concurrency, q.rate, q.retention)::text
    FROM pgq._queues AS q WHERE q.entrypoint = ep
$$;

SELECT is(
    (SELECT count(*) FROM pgq._queues AS q WHERE q.entrypoint = 'cf'), 0::bigint, 'an unconfigured entrypoint has no row'
);
SELECT lives_ok($$SELECT pgq.configure('cf', max_attempts => 3)$$, 'configure one setting by name');
SELECT results_eq(
    $$
        SELECT q.paused, q.max_attempts, q.backoff_base, q.backoff_max, q.lease, q.timeout, q.concurrency,
               q.rate, q.retention
        FROM pgq._queues AS q WHERE q.entrypoint = 'cf'
    $$,
    $$
        VALUES (FALSE, 3, NULL::interval, NULL::interval, NULL::interval, NULL::interval, NULL::integer,
                NULL::numeric, NULL::interval)
    $$,
    'only max_attempts is set; the other settings stay NULL (= default)'
);

SELECT lives_ok(
    $$
        SELECT pgq.configure(
            'cf', backoff_base => '2 seconds', backoff_max => '10 minutes', lease => '1 minute',
            timeout => '5 minutes', concurrency => 4, retention => '3 days'
        )
    $$,
    'configure every other setting'
);
SELECT results_eq(
    $$
        SELECT q.max_attempts, q.backoff_base, q.backoff_max, q.lease, q.timeout, q.concurrency, q.retention
        FROM pgq._queues AS q WHERE q.entrypoint = 'cf'
    $$,
    $$
        VALUES (3, interval '2 seconds', interval '10 minutes', interval '1 minute', interval '5 minutes', 4,
                interval '3 days')
    $$,
    'the new settings are stored and max_attempts (passed as NULL) is unchanged'
);
SELECT lives_ok($$SELECT pgq.configure('cf')$$, 'configure with only the entrypoint');
SELECT is(
    pg_temp.row_of('cf'),
    '(f,3,00:00:02,00:10:00,00:01:00,00:05:00,4,,"3 days")',
    'configure with every argument NULL changes nothing'
);
SELECT lives_ok($$SELECT pgq.configure('cf', concurrency => 0)$$, 'concurrency => 0');
SELECT is(
    (SELECT q.concurrency FROM pgq._queues AS q WHERE q.entrypoint = 'cf'),
    NULL,
    'concurrency => 0 removes the limit'
);
SELECT lives_ok($$SELECT pgq.configure('cf_new', concurrency => 0)$$, 'concurrency => 0 on a new entrypoint');
SELECT is(
    (SELECT q.concurrency FROM pgq._queues AS q WHERE q.entrypoint = 'cf_new'),
    NULL,
    'a new entrypoint with concurrency 0 has no limit'
);
SELECT lives_ok($$SELECT pgq.pause('cf')$$, 'cf is paused');
SELECT lives_ok($$SELECT pgq.configure('cf', max_attempts => 4)$$, 'a paused entrypoint is configured');
SELECT is(
    (SELECT q.paused FROM pgq._queues AS q WHERE q.entrypoint = 'cf'), TRUE, 'configure does not resume'
);

-- Boundaries that are accepted.
SELECT lives_ok(
    $$
        SELECT pgq.configure(
            'cf_edge', max_attempts => 1000, backoff_base => '0', backoff_max => '0', lease => '1 second',
            timeout => '1 second', concurrency => 1000000, retention => '1 minute'
        )
    $$,
    'lower bounds and max_attempts 1000, concurrency 1000000 are accepted'
);
SELECT lives_ok(
    $$
        SELECT pgq.configure(
            'cf_edge', max_attempts => 1, lease => '1 day', timeout => '10 years', backoff_max => '10 years',
            retention => '10 years'
        )
    $$,
    'upper bounds are accepted'
);

-- Rate limits: 0.001 to 1000000 jobs per second; 0 removes the limit.
SELECT lives_ok($$SELECT pgq.configure('cf_rate', rate => 10)$$, 'rate => 10 is accepted');
SELECT is(
    (SELECT q.rate FROM pgq._queues AS q WHERE q.entrypoint = 'cf_rate'), 10::numeric, 'the rate is stored'
);
SELECT lives_ok($$SELECT pgq.configure('cf_rate', max_attempts => 2)$$, 'another setting is changed');
SELECT is(
    (SELECT q.rate FROM pgq._queues AS q WHERE q.entrypoint = 'cf_rate'), 10::numeric, 'rate => NULL keeps the rate'
);
UPDATE pgq._queues SET rate_tokens = 0.5, rate_refilled_at = now() WHERE entrypoint = 'cf_rate';
SELECT lives_ok($$SELECT pgq.configure('cf_rate', lease => '1 minute')$$, 'a setting other than rate is changed');
SELECT results_eq(
    $$SELECT q.rate_tokens, q.rate_refilled_at FROM pgq._queues AS q WHERE q.entrypoint = 'cf_rate'$$,
    $$SELECT 0.5::double precision, now()$$,
    'the token bucket is kept when the rate is not passed'
);
SELECT lives_ok($$SELECT pgq.configure('cf_rate', rate => 2.5)$$, 'the rate is changed to 2.5');
SELECT results_eq(
    $$SELECT q.rate, q.rate_tokens, q.rate_refilled_at FROM pgq._queues AS q WHERE q.entrypoint = 'cf_rate'$$,
    $$SELECT 2.5::numeric, NULL::double precision, NULL::timestamptz$$,
    'a new rate starts with a full bucket (no stored tokens)'
);
SELECT lives_ok($$SELECT pgq.configure('cf_rate', rate => 0)$$, 'rate => 0');
SELECT is(
    (SELECT q.rate FROM pgq._queues AS q WHERE q.entrypoint = 'cf_rate'), NULL, 'rate => 0 removes the limit'
);
SELECT lives_ok($$SELECT pgq.configure('cf_rate_new', rate => 0)$$, 'rate => 0 on a new entrypoint');
SELECT is(
    (SELECT q.rate FROM pgq._queues AS q WHERE q.entrypoint = 'cf_rate_new'), NULL, 'a new entrypoint with rate 0 has no limit'
);
SELECT lives_ok($$SELECT pgq.configure('cf_rate', rate => 0.001)$$, 'rate 0.001 is accepted');
SELECT lives_ok($$SELECT pgq.configure('cf_rate', rate => 1000000)$$, 'rate 1000000 is accepted');
SELECT results_eq(
    $$SELECT s.rate, s.max_attempts FROM pgq.settings(ARRAY['cf_rate']) AS s$$,
    $$ VALUES (1000000::numeric, 2) $$,
    'pgq.settings reports the rate'
);

-- Settings take effect: claim reports the timeout.
INSERT INTO t_worker VALUES ('w1', pgq.register_worker('w1', ARRAY['cf_new']));
SELECT lives_ok($$SELECT pgq.configure('cf_new', timeout => '90 seconds')$$, 'cf_new gets a timeout');
SELECT is(pgq.enqueue('cf_new') > 0, TRUE, 'a cf_new job is enqueued');
SELECT is(
    (SELECT c.timeout FROM pgq.claim(pg_temp.wid('w1'), ARRAY['cf_new']) AS c),
    interval '90 seconds',
    'claim returns the configured timeout'
);

-- Bad input: PQ001, and nothing changes.
CREATE TEMP TABLE t_before AS SELECT pg_temp.row_of('cf') AS r;
SELECT throws_ok($$SELECT pgq.configure(NULL, max_attempts => 3)$$, 'PQ001', NULL, 'entrypoint NULL raises PQ001');
SELECT throws_ok($$SELECT pgq.configure('', max_attempts => 3)$$, 'PQ001', NULL, 'empty entrypoint raises PQ001');
SELECT throws_ok(
    $$SELECT pgq.configure(E'c\nf', max_attempts => 3)$$, 'PQ001', NULL,
    'an entrypoint with a control character raises PQ001'
);
SELECT throws_ok($$SELECT pgq.configure('cf', max_attempts => 0)$$, 'PQ001', NULL, 'max_attempts 0 raises PQ001');
SELECT throws_ok($$SELECT pgq.configure('cf', max_attempts => 1001)$$, 'PQ001', NULL, 'max_attempts 1001 raises PQ001');
SELECT throws_ok(
    $$SELECT pgq.configure('cf', backoff_base => '-1 second')$$, 'PQ001', NULL, 'a negative backoff_base raises PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.configure('cf', backoff_max => '-1 second')$$, 'PQ001', NULL, 'a negative backoff_max raises PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.configure('cf', backoff_base => '1 minute', backoff_max => '10 seconds')$$, 'PQ001', NULL,
    'backoff_max below backoff_base raises PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.configure('cf', backoff_max => '1 second')$$, 'PQ001', NULL,
    'backoff_max below the stored backoff_base (2 s) raises PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.configure('cf_other', backoff_base => '2 hours')$$, 'PQ001', NULL,
    'backoff_base above the default backoff_max (1 hour) raises PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.configure('cf', backoff_base => '11 years', backoff_max => '11 years')$$, 'PQ001', NULL,
    'backoff over 10 years raises PQ001'
);
SELECT throws_ok($$SELECT pgq.configure('cf', lease => '-1 second')$$, 'PQ001', NULL, 'a negative lease raises PQ001');
SELECT throws_ok($$SELECT pgq.configure('cf', lease => '0.5 seconds')$$, 'PQ001', NULL, 'a lease under 1 s raises PQ001');
SELECT throws_ok($$SELECT pgq.configure('cf', lease => '25 hours')$$, 'PQ001', NULL, 'a lease over 1 day raises PQ001');
SELECT throws_ok($$SELECT pgq.configure('cf', timeout => '0')$$, 'PQ001', NULL, 'a timeout of 0 raises PQ001');
SELECT throws_ok(
    $$SELECT pgq.configure('cf', timeout => '-1 minute')$$, 'PQ001', NULL, 'a negative timeout raises PQ001'
);
SELECT throws_ok($$SELECT pgq.configure('cf', concurrency => -1)$$, 'PQ001', NULL, 'concurrency -1 raises PQ001');
SELECT throws_ok(
    $$SELECT pgq.configure('cf', concurrency => 1000001)$$, 'PQ001', NULL, 'concurrency 1000001 raises PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.configure('cf', rate => 0.0009)$$, 'PQ001', NULL, 'rate 0.0009 (under 0.001) raises PQ001'
);
SELECT throws_ok($$SELECT pgq.configure('cf', rate => 1000001)$$, 'PQ001', NULL, 'rate 1000001 raises PQ001');
SELECT throws_ok($$SELECT pgq.configure('cf', rate => -1)$$, 'PQ001', NULL, 'a negative rate raises PQ001');
SELECT throws_ok($$SELECT pgq.configure('cf', rate => 'NaN')$$, 'PQ001', NULL, 'rate NaN raises PQ001');
SELECT throws_ok(
    $$SELECT pgq.configure('cf', retention => '30 seconds')$$, 'PQ001', NULL, 'retention under 1 minute raises PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.configure('cf', retention => '-1 day')$$, 'PQ001', NULL, 'a negative retention raises PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.configure('cf', max_attempts => 9, lease => '0 seconds')$$, 'PQ001', NULL,
    'one bad argument rejects the whole call'
);
SELECT is(pg_temp.row_of('cf'), (SELECT b.r FROM t_before AS b), 'the failed calls changed no setting');
SELECT is(
    (SELECT count(*) FROM pgq._queues AS q WHERE q.entrypoint = 'cf_other'),
    0::bigint,
    'the failed calls created no settings row'
);

-- Privileges.
SET ROLE pgq_producer;
SELECT throws_ok($$SELECT pgq.configure('cf', max_attempts => 2)$$, '42501', NULL, 'pgq_producer cannot configure');
RESET ROLE;
SET ROLE pgq_worker;
SELECT throws_ok($$SELECT pgq.configure('cf', max_attempts => 2)$$, '42501', NULL, 'pgq_worker cannot configure');
RESET ROLE;
SET ROLE pgq_admin;
SELECT lives_ok($$SELECT pgq.configure('cf', max_attempts => 2)$$, 'pgq_admin can configure');
RESET ROLE;
SELECT is(
    (SELECT q.max_attempts FROM pgq._queues AS q WHERE q.entrypoint = 'cf'), 2, 'the admin''s setting is stored'
);

-- create_new => false: a name nothing uses (a typo) is refused after the values are checked.
SELECT throws_ok(
    $$SELECT pgq.configure('cf_typo', concurrency => 2, create_new => FALSE)$$, 'PQ001',
    'pgq: invalid argument entrypoint: ''cf_typo'' is unknown: no job, setting, schedule or worker names it',
    'create_new => false refuses an entrypoint nothing names'
);
SELECT throws_ok(
    $$SELECT pgq.configure('cf_typo', lease => '1 millisecond', create_new => FALSE)$$, 'PQ001',
    'pgq: invalid argument lease: 00:00:00.001 is out of range',
    'a wrong value is reported before an unknown entrypoint'
);
SELECT lives_ok($$SELECT pgq.configure('cf', max_attempts => 4, create_new => FALSE)$$, 'a configured entrypoint is known');

SELECT * FROM finish();
ROLLBACK;
