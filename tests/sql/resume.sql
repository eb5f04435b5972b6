-- pgq.resume: claims take a paused entrypoint's jobs again; a no-op for an entrypoint that
-- is not paused; validation (PQ001); privileges.
BEGIN;
SELECT plan(20);

\ir fixtures/setup.sql

INSERT INTO t_worker VALUES ('w1', pgq.register_worker('w1', ARRAY['rs']));
SELECT lives_ok($$SELECT pgq.configure('rs', max_attempts => 7)$$, 'rs is configured');
SELECT lives_ok($$SELECT pgq.pause('rs')$$, 'rs is paused');
INSERT INTO t_job VALUES ('a', pgq.enqueue('rs'));
SELECT is_empty(
    format($$SELECT * FROM pgq.claim(%L, ARRAY['rs'])$$, pg_temp.wid('w1')),
    'nothing is claimed while paused'
);

SELECT lives_ok($$SELECT pgq.resume('rs')$$, 'resume a paused entrypoint');
SELECT results_eq(
    $$SELECT q.paused, q.max_attempts FROM pgq._queues AS q WHERE q.entrypoint = 'rs'$$,
    $$ VALUES (FALSE, 7) $$,
    'the entrypoint is no longer paused and keeps its settings'
);
SELECT results_eq(
    format($$SELECT c.id FROM pgq.claim(%L, ARRAY['rs']) AS c$$, pg_temp.wid('w1')),
    $$SELECT pg_temp.jid('a')$$,
    'after resume the job is claimed'
);
SELECT lives_ok($$SELECT pgq.resume('rs')$$, 'resuming again does not raise');
SELECT is(
    (SELECT q.paused FROM pgq._queues AS q WHERE q.entrypoint = 'rs'), FALSE, 'the entrypoint stays resumed'
);

-- An entrypoint that was never paused.
SELECT lives_ok($$SELECT pgq.resume('never_paused')$$, 'resume of an entrypoint never paused does not raise');
SELECT is(
    (SELECT count(*) FROM pgq._queues AS q WHERE q.entrypoint = 'never_paused'),
    0::bigint,
    'and creates no settings row'
);

-- Bad input: PQ001.
SELECT lives_ok($$SELECT pgq.pause('rs')$$, 'rs is paused again');
SELECT throws_ok($$SELECT pgq.resume(NULL)$$, 'PQ001', NULL, 'entrypoint NULL raises PQ001');
SELECT throws_ok($$SELECT pgq.resume('')$$, 'PQ001', NULL, 'empty entrypoint raises PQ001');
SELECT throws_ok($$SELECT pgq.resume(E'rs\t')$$, 'PQ001', NULL, 'an entrypoint with a control character raises PQ001');
SELECT throws_ok(
    format($$SELECT pgq.resume(%L)$$, repeat('r', 201)), 'PQ001', NULL, 'an entrypoint of 201 characters raises PQ001'
);
SELECT is((SELECT q.paused FROM pgq._queues AS q WHERE q.entrypoint = 'rs'), TRUE, 'the failed calls resumed nothing');

-- Privileges.
SET ROLE pgq_producer;
SELECT throws_ok($$SELECT pgq.resume('rs')$$, '42501', NULL, 'pgq_producer cannot resume');
RESET ROLE;
SET ROLE pgq_worker;
SELECT throws_ok($$SELECT pgq.resume('rs')$$, '42501', NULL, 'pgq_worker cannot resume');
RESET ROLE;
SET ROLE pgq_admin;
SELECT lives_ok($$SELECT pgq.resume('rs')$$, 'pgq_admin can resume');
RESET ROLE;
SELECT is((SELECT q.paused FROM pgq._queues AS q WHERE q.entrypoint = 'rs'), FALSE, 'the admin resumed rs');

SELECT * FROM finish();
ROLLBACK;
