-- pgq.confirm_cancel: a held job whose cancellation was requested ends canceled with no
-- attempt spent (pgq.fail on it logs one); fenced (NULL for a non-holder or another
-- delivery); dependents canceled; a job whose cancel was not requested is refused (PQ001,
-- nothing changed); validation (PQ001).
BEGIN;
SELECT plan(13);

SELECT pgq.register_worker('w', ARRAY['cc']) AS w \gset
SELECT pgq.register_worker('other', ARRAY['cc']) AS other \gset
SELECT pgq.enqueue('cc', '{"n": 1}') AS j \gset
SELECT pgq.enqueue('cc', '{"n": 2}', depends_on => ARRAY[:j]::bigint[]) AS dep \gset
SELECT
    id,
    deliveries
FROM pgq.claim(:'w', ARRAY['cc']) \gset c_

SELECT throws_ok(
    format('SELECT pgq.confirm_cancel(%L, %s)', :'w', :j), 'PQ001',
    format('pgq: invalid argument job_id: job %s: its cancellation was not requested', :j),
    'a held job whose cancel was not requested is refused'
);
SELECT is((SELECT j.status FROM pgq._jobs AS j WHERE j.id = :j), 'running', 'and stays running');

SELECT is(pgq.cancel(ARRAY[:j]::bigint[]), 1, 'cancellation requested');
SELECT is(pgq.confirm_cancel(:'other', :j), NULL, 'another worker cannot settle it');
SELECT is(pgq.confirm_cancel(:'w', :j, delivery => :c_deliveries + 1), NULL, 'another delivery cannot settle it');
SELECT is(pgq.confirm_cancel(:'w', :j, delivery => :c_deliveries), 'canceled', 'the holder settles it as canceled');
SELECT results_eq(
    $$SELECT o.outcome, o.attempt, o.deliveries FROM pgq._outcomes AS o WHERE o.job_id = $$ || :j,
    $$VALUES ('canceled', 0, 1)$$,
    'one canceled outcome, no attempt spent'
);
SELECT is(pgq.job_status(:j), 'canceled', 'job_status says canceled');
SELECT is(pgq.job_status(:dep), 'canceled', 'the job waiting for it is canceled too');
SELECT is(pgq.confirm_cancel(:'w', :j), NULL, 'a settled job is no longer held');

SELECT throws_ok(
    format('SELECT pgq.confirm_cancel(NULL, %s)', :j), 'PQ001',
    'pgq: invalid argument worker_id: must not be NULL', 'worker_id NULL raises PQ001'
);
SELECT throws_ok(
    format('SELECT pgq.confirm_cancel(%L, NULL)', :'w'), 'PQ001',
    'pgq: invalid argument job_id: must not be NULL', 'job_id NULL raises PQ001'
);
SELECT throws_ok(
    format('SELECT pgq.confirm_cancel(%L, %s, 0)', :'w', :j), 'PQ001',
    'pgq: invalid argument delivery: 0 is out of range', 'delivery 0 raises PQ001'
);

SELECT * FROM finish();
ROLLBACK;
