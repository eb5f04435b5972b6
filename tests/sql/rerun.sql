-- pgq.rerun: finished jobs (succeeded, canceled, discarded dead) enqueued again as new jobs
-- from their stored rows; live, unknown ids skipped; a live job with the dedupe key stands
-- for the re-run; validation (PQ001); privileges.
BEGIN;
SELECT plan(10);

\ir fixtures/setup.sql

-- A succeeded job with a key, payload and headers; a canceled one; a live one.
INSERT INTO t_job VALUES ('done', pgq.enqueue('rr', '{"n": 1}', priority => 3, dedupe_key => 'k1', headers => '{"h": 1}'));
SELECT pgq.register_worker('w', ARRAY['rr']) AS w \gset
SELECT count(*) FROM pgq.claim(:'w', ARRAY['rr'], 1);
SELECT count(*) FROM pgq.complete(:'w', ARRAY[pg_temp.jid('done')]);
INSERT INTO t_job VALUES ('canceled', pgq.enqueue('rr', '{"n": 2}'));
SELECT pgq.cancel(ARRAY[pg_temp.jid('canceled')]);
INSERT INTO t_job VALUES ('live', pgq.enqueue('rr', '{"n": 3}'));

CREATE TEMP TABLE t_rerun AS
SELECT * FROM pgq.rerun(ARRAY[pg_temp.jid('done'), pg_temp.jid('canceled'), pg_temp.jid('live'), -5]);
SELECT results_eq(
    $$SELECT r.job_id, r.outcome, r.created FROM t_rerun AS r ORDER BY r.job_id$$,
    format(
        $$VALUES (%s::bigint, 'succeeded'::text, TRUE), (%s, 'canceled', TRUE)$$,
        pg_temp.jid('done'), pg_temp.jid('canceled')
    ),
    'one row per finished id; live and unknown ids are skipped'
);
SELECT ok(
    (SELECT bool_and(r.new_id > pg_temp.jid('live')) FROM t_rerun AS r), 'each re-run has a new id'
);
SELECT results_eq(
    format(
        $$SELECT j.entrypoint, j.payload, j.priority, j.dedupe_key, j.headers, j.status
          FROM pgq._jobs AS j WHERE j.id = %s$$,
        (SELECT r.new_id FROM t_rerun AS r WHERE r.outcome = 'succeeded')
    ),
    $$VALUES ('rr'::text, '{"n": 1}'::jsonb, 3, 'k1'::text, '{"h": 1}'::jsonb, 'queued'::text)$$,
    'the re-run is made from the stored row and is queued'
);
SELECT is(pgq.job_status(pg_temp.jid('done')), 'succeeded', 'the old id keeps its outcome');

-- The re-run of the succeeded job holds k1 now: another re-run is not created.
SELECT results_eq(
    format($$SELECT r.new_id, r.created FROM pgq.rerun(ARRAY[%s]) AS r$$, pg_temp.jid('done')),
    format($$VALUES (%s::bigint, FALSE)$$, (SELECT r.new_id FROM t_rerun AS r WHERE r.outcome = 'succeeded')),
    'a live job with the dedupe key stands for the re-run'
);

-- Bad input.
CREATE TEMP TABLE t_before AS SELECT count(*) AS n FROM pgq._jobs;
SELECT throws_ok($$SELECT * FROM pgq.rerun(NULL)$$, 'PQ001', NULL, 'NULL job_ids raises PQ001');
SELECT throws_ok($$SELECT * FROM pgq.rerun(ARRAY[NULL]::bigint[])$$, 'PQ001', NULL, 'a NULL id raises PQ001');
SELECT is((SELECT count(*) FROM pgq._jobs), (SELECT b.n FROM t_before AS b), 'the failed calls enqueued nothing');

-- Privileges.
SET ROLE pgq_worker;
SELECT throws_ok($$SELECT * FROM pgq.rerun(ARRAY[1])$$, '42501', NULL, 'pgq_worker cannot re-run');
RESET ROLE;
SET ROLE pgq_admin;
SELECT lives_ok($$SELECT * FROM pgq.rerun(ARRAY[1])$$, 'pgq_admin can re-run');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
