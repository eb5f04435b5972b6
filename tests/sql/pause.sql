-- pgq.pause: claims skip the entrypoint; enqueue still accepts; running jobs finish;
-- settings are kept; idempotent; validation (PQ001); privileges.
BEGIN;
SELECT plan(24);

\ir fixtures/setup.sql

INSERT INTO t_worker VALUES ('w1', pgq.register_worker('w1', ARRAY['pz', 'other']));
INSERT INTO t_job VALUES ('running', pgq.enqueue('pz'));
SELECT is(
    (SELECT c.id FROM pgq.claim(pg_temp.wid('w1'), ARRAY['pz']) AS c), pg_temp.jid('running'), 'w1 claims a job'
);

SELECT lives_ok($$SELECT pgq.pause('pz')$$, 'pause an entrypoint without settings');
SELECT is(
    (SELECT q.paused FROM pgq._queues AS q WHERE q.entrypoint = 'pz'),
    TRUE,
    'the entrypoint is marked paused'
);
INSERT INTO t_job VALUES ('queued', pgq.enqueue('pz'));
SELECT is(pgq.job_status(pg_temp.jid('queued')), 'queued', 'enqueue still accepts jobs of a paused entrypoint');
INSERT INTO t_job VALUES ('other', pgq.enqueue('other'));
SELECT results_eq(
    format($$SELECT c.id FROM pgq.claim(%L, ARRAY['pz', 'other'], 10) AS c$$, pg_temp.wid('w1')),
    $$SELECT pg_temp.jid('other')$$,
    'claims skip the paused entrypoint and take the others'
);
SELECT results_eq(
    format($$SELECT * FROM pgq.complete(%L, ARRAY[%s])$$, pg_temp.wid('w1'), pg_temp.jid('running')),
    $$SELECT pg_temp.jid('running')$$,
    'a job running when the entrypoint was paused can still complete'
);
SELECT lives_ok($$SELECT pgq.pause('pz')$$, 'pausing again does not raise');
SELECT is(
    (SELECT q.paused FROM pgq._queues AS q WHERE q.entrypoint = 'pz'), TRUE, 'the entrypoint stays paused'
);

-- Settings survive a pause.
SELECT lives_ok($$SELECT pgq.configure('pz2', max_attempts => 3, concurrency => 4)$$, 'pz2 is configured');
SELECT lives_ok($$SELECT pgq.pause('pz2')$$, 'pz2 is paused');
SELECT results_eq(
    $$SELECT q.paused, q.max_attempts, q.concurrency FROM pgq._queues AS q WHERE q.entrypoint = 'pz2'$$,
    $$ VALUES (TRUE, 3, 4) $$,
    'pause keeps the entrypoint''s settings'
);

-- Bad input: PQ001, and nothing changes.
CREATE TEMP TABLE t_before AS SELECT count(*) AS n FROM pgq._queues;
SELECT throws_ok($$SELECT pgq.pause(NULL)$$, 'PQ001', NULL, 'entrypoint NULL raises PQ001');
SELECT throws_ok($$SELECT pgq.pause('')$$, 'PQ001', NULL, 'empty entrypoint raises PQ001');
SELECT throws_ok($$SELECT pgq.pause(E'p\nz')$$, 'PQ001', NULL, 'an entrypoint with a control character raises PQ001');
SELECT throws_ok(
    format($$SELECT pgq.pause(%L)$$, repeat('p', 201)), 'PQ001', NULL, 'an entrypoint of 201 characters raises PQ001'
);
-- create_new => false: a name nothing uses (a typo) is refused; known ones are paused.
SELECT throws_ok(
    $$SELECT pgq.pause('pz_typo', create_new => FALSE)$$, 'PQ001',
    'pgq: invalid argument entrypoint: ''pz_typo'' is unknown: no job, setting, schedule or worker names it',
    'create_new => false refuses an entrypoint nothing names'
);
SELECT is((SELECT count(*) FROM pgq._queues), (SELECT b.n FROM t_before AS b), 'the failed calls paused nothing');
SELECT lives_ok($$SELECT pgq.pause('other', create_new => FALSE)$$, 'an entrypoint with a job is known');
SELECT lives_ok(
    $$SELECT pgq.register_worker('w2', ARRAY['pz_served']), pgq.pause('pz_served', create_new => FALSE)$$,
    'an entrypoint a worker registered with is known'
);
SELECT lives_ok(
    $$SELECT pgq.schedule('pz_s', '* * * * *', 'pz_sched'), pgq.pause('pz_sched', create_new => FALSE)$$,
    'an entrypoint of a schedule is known'
);
SELECT lives_ok($$SELECT pgq.pause('pz_new', create_new => TRUE)$$, 'create_new => true pauses a new name');

-- Privileges.
SET ROLE pgq_producer;
SELECT throws_ok($$SELECT pgq.pause('pz3')$$, '42501', NULL, 'pgq_producer cannot pause');
RESET ROLE;
SET ROLE pgq_worker;
SELECT throws_ok($$SELECT pgq.pause('pz3')$$, '42501', NULL, 'pgq_worker cannot pause');
RESET ROLE;
SET ROLE pgq_admin;
SELECT lives_ok($$SELECT pgq.pause('pz3')$$, 'pgq_admin can pause');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
