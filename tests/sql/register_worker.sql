-- pgq.register_worker: returns a worker id, stores the worker alive, runs a sweep,
-- validation (PQ001), privileges.
BEGIN;
SELECT plan(23);

\ir fixtures/setup.sql

INSERT INTO t_worker VALUES ('w1', pgq.register_worker('host-a:101', ARRAY['email', 'report', 'email']));
INSERT INTO t_worker VALUES ('w2', pgq.register_worker('host-a:101', ARRAY['email']));

SELECT ok(pg_temp.wid('w1') IS NOT NULL, 'register_worker returns an id');
SELECT isnt(pg_temp.wid('w2'), pg_temp.wid('w1'), 'each registration gets its own id, even with the same name');
SELECT results_eq(
    $$
        SELECT w.name, w.entrypoints, w.state, w.registered_at = now(), w.heartbeat_at = now(), w.stopped_at
        FROM pgq._workers AS w WHERE w.id = pg_temp.wid('w1')
    $$,
    $$ VALUES ('host-a:101', ARRAY['email', 'report'], 'alive', TRUE, TRUE, NULL::timestamptz) $$,
    'the worker is stored alive, heartbeat now, entrypoints sorted without duplicates'
);
SELECT is(
    (SELECT count(*) FROM pgq.claim(pg_temp.wid('w1'), ARRAY['email', 'report'])),
    0::bigint,
    'a registered worker can claim its entrypoints at once'
);
SELECT lives_ok(
    format($$SELECT pgq.register_worker(%L, ARRAY[%L])$$, repeat('n', 200), repeat('e', 200)),
    'a name and an entrypoint of 200 characters are accepted'
);

-- Registering runs a sweep: a crashed predecessor's jobs are recovered at once.
INSERT INTO t_worker VALUES ('crashed', pgq.register_worker('host-b:1', ARRAY['sweep']));
INSERT INTO t_job VALUES ('orphan', pgq.enqueue('sweep'));
SELECT is(
    (SELECT c.id FROM pgq.claim(pg_temp.wid('crashed'), ARRAY['sweep']) AS c),
    pg_temp.jid('orphan'),
    'the soon-crashed worker claims a job'
);
UPDATE pgq._workers SET heartbeat_at = now() - interval '1 hour' WHERE id = pg_temp.wid('crashed');
INSERT INTO t_worker VALUES ('successor', pgq.register_worker('host-b:2', ARRAY['sweep']));
SELECT is(
    (SELECT w.state FROM pgq._workers AS w WHERE w.id = pg_temp.wid('crashed')),
    'dead',
    'registering marks a silent worker dead'
);
SELECT results_eq(
    $$SELECT j.status, j.worker_id FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('orphan')$$,
    $$ VALUES ('queued', NULL::uuid) $$,
    'registering re-queues the silent worker''s job'
);

-- Bad input: PQ001, and nothing changes.
CREATE TEMP TABLE t_before AS SELECT count(*) AS n FROM pgq._workers;

SELECT throws_ok($$SELECT pgq.register_worker(NULL, ARRAY['email'])$$, 'PQ001', NULL, 'name NULL raises PQ001');
SELECT throws_ok($$SELECT pgq.register_worker('', ARRAY['email'])$$, 'PQ001', NULL, 'empty name raises PQ001');
SELECT throws_ok($$SELECT pgq.register_worker('  ', ARRAY['email'])$$, 'PQ001', NULL, 'blank name raises PQ001');
SELECT throws_ok(
    format($$SELECT pgq.register_worker(%L, ARRAY['email'])$$, repeat('n', 201)), 'PQ001', NULL,
    'name of 201 characters raises PQ001'
);
SELECT throws_ok($$SELECT pgq.register_worker('w', NULL)$$, 'PQ001', NULL, 'entrypoints NULL raises PQ001');
SELECT throws_ok(
    $$SELECT pgq.register_worker('w', '{}'::text[])$$, 'PQ001', NULL, 'empty entrypoints raise PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.register_worker('w', ARRAY['email', NULL])$$, 'PQ001', NULL,
    'entrypoints containing NULL raise PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.register_worker('w', ARRAY['email', ''])$$, 'PQ001', NULL,
    'entrypoints containing an empty name raise PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.register_worker('w', ARRAY[E'em\tail'])$$, 'PQ001', NULL,
    'an entrypoint with a control character raises PQ001'
);
SELECT throws_ok(
    format($$SELECT pgq.register_worker('w', ARRAY[%L])$$, repeat('e', 201)), 'PQ001', NULL,
    'an entrypoint of 201 characters raises PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.register_worker('w', ARRAY(SELECT 'ep' || g FROM generate_series(1, 1001) AS g))$$,
    'PQ001', NULL,
    '1001 entrypoints raise PQ001'
);
SELECT is(
    (SELECT count(*) FROM pgq._workers), (SELECT b.n FROM t_before AS b),
    'the failed calls registered nobody'
);

-- Privileges.
SET ROLE pgq_worker;
SELECT lives_ok($$SELECT pgq.register_worker('by-worker-role', ARRAY['email'])$$, 'pgq_worker can register');
RESET ROLE;
SET ROLE pgq_producer;
SELECT throws_ok(
    $$SELECT pgq.register_worker('by-producer', ARRAY['email'])$$, '42501', NULL,
    'pgq_producer cannot register a worker'
);
RESET ROLE;
SET ROLE pgq_worker;
SELECT throws_ok($$SELECT count(*) FROM pgq._workers$$, '42501', NULL, 'pgq_worker cannot read pgq._workers');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
