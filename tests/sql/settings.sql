-- pgq.settings: effective settings (defaults filled in) of entrypoints, configured or not;
-- one row per distinct entrypoint; validation (PQ001); privileges.
BEGIN;
SELECT plan(15);

SELECT results_eq(
    $$SELECT * FROM pgq.settings(ARRAY['st'], protocol => 2)$$,
    $$
        VALUES ('st', FALSE, 5, interval '1 second', interval '1 hour', interval '30 seconds', interval '1 hour',
                NULL::integer, NULL::numeric, interval '7 days', 10, NULL::integer, 100)
    $$,
    'an unconfigured entrypoint has the defaults'
);
SELECT lives_ok(
    $$SELECT pgq.configure('st', max_attempts => 2, lease => '1 minute', concurrency => 3)$$,
    'st is configured'
);
SELECT lives_ok($$SELECT pgq.pause('st')$$, 'st is paused');
SELECT results_eq(
    $$SELECT * FROM pgq.settings(ARRAY['st'], protocol => 2)$$,
    $$
        VALUES ('st', TRUE, 2, interval '1 second', interval '1 hour', interval '1 minute', interval '1 hour',
                3, NULL::numeric, interval '7 days', 10, NULL::integer, 100)
    $$,
    'configured settings replace the defaults; the others stay default'
);
SELECT results_eq(
    $$SELECT * FROM pgq.settings(ARRAY['st', 'st_c'])$$,
    $$
        SELECT s.entrypoint, s.paused, s.max_attempts, s.backoff_base, s.backoff_max, s.lease, s.timeout,
               s.concurrency, s.rate, s.retention
        FROM pgq.settings(ARRAY['st', 'st_c'], protocol => 2) AS s
    $$,
    'the 0.1.0 form returns the same settings, the columns of 0.1.0'
);
SELECT throws_ok(
    $$SELECT * FROM pgq.settings(ARRAY['st'], protocol => 3)$$, 'PQ001',
    'pgq: invalid argument protocol: 3 is not a settings protocol', 'an unknown protocol raises PQ001'
);
SELECT results_eq(
    $$SELECT s.entrypoint FROM pgq.settings(ARRAY['st_b', 'st', 'st_b']) AS s$$,
    ARRAY['st', 'st_b'],
    'one row per distinct entrypoint, ordered by name'
);

-- Bad input.
SELECT throws_ok($$SELECT * FROM pgq.settings(NULL)$$, 'PQ001', NULL, 'entrypoints NULL raises PQ001');
SELECT throws_ok($$SELECT * FROM pgq.settings('{}')$$, 'PQ001', NULL, 'empty entrypoints raise PQ001');
SELECT throws_ok(
    $$SELECT * FROM pgq.settings(ARRAY['st', NULL])$$, 'PQ001', NULL, 'entrypoints containing NULL raise PQ001'
);
SELECT throws_ok(
    $$SELECT * FROM pgq.settings(ARRAY[E's\nt'])$$, 'PQ001', NULL,
    'an entrypoint with a control character raises PQ001'
);

-- Privileges.
SET ROLE pgq_worker;
SELECT lives_ok($$SELECT * FROM pgq.settings(ARRAY['st'])$$, 'pgq_worker can read settings');
RESET ROLE;
SET ROLE pgq_admin;
SELECT lives_ok($$SELECT * FROM pgq.settings(ARRAY['st'])$$, 'pgq_admin can read settings');
RESET ROLE;
SET ROLE pgq_producer;
SELECT throws_ok($$SELECT * FROM pgq.settings(ARRAY['st'])$$, '42501', NULL, 'pgq_producer cannot read settings');
SELECT throws_ok(
    $$SELECT * FROM pgq.settings(ARRAY['st'], protocol => 2)$$, '42501', NULL,
    'pgq_producer cannot read settings (protocol form)'
);
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
