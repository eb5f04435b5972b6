-- pgq.enqueue_batch: ids in payload order, shared priority and run_at, validation, privileges.
BEGIN;
SELECT plan(20);

-- Ids in the order of payloads.
CREATE TEMP TABLE t_batch AS
SELECT
    b.id,
    b.ord
FROM pgq.enqueue_batch(
    'import',
    ARRAY['{"n": 1}', '{"n": 2}', NULL, '{"n": 4}']::jsonb[],
    priority => 3
) WITH ORDINALITY AS b (id, ord);
GRANT SELECT ON t_batch TO public;

SELECT is((SELECT count(*) FROM t_batch), 4::bigint, 'one id per payload');
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.entrypoint = 'import'),
    4::bigint,
    'one job per payload'
);
SELECT results_eq(
    $$SELECT b.id FROM t_batch AS b ORDER BY b.ord$$,
    $$SELECT b.id FROM t_batch AS b ORDER BY b.id$$,
    'ids ascend in payload order'
);
SELECT results_eq(
    $$
        SELECT j.payload FROM t_batch AS b
        JOIN pgq._jobs AS j ON j.id = b.id
        ORDER BY b.ord
    $$,
    $$ VALUES ('{"n": 1}'::jsonb), ('{"n": 2}'), (NULL), ('{"n": 4}') $$,
    'each id carries the payload at its position (a NULL element is a NULL payload)'
);
SELECT results_eq(
    $$
        SELECT DISTINCT j.status, j.priority, j.run_at = now(), j.attempt, j.deliveries
        FROM t_batch AS b JOIN pgq._jobs AS j ON j.id = b.id
    $$,
    $$ VALUES ('queued', 3, TRUE, 0, 0) $$,
    'every job is queued with the batch priority, due now, no attempts or deliveries'
);

-- run_at in the future, priority NULL.
CREATE TEMP TABLE t_later AS
SELECT b.id FROM pgq.enqueue_batch('import_later', ARRAY['{}', '{}']::jsonb[], NULL, now() + interval '1 hour') AS b (id);
SELECT results_eq(
    $$
        SELECT DISTINCT j.priority, j.run_at FROM t_later AS l
        JOIN pgq._jobs AS j ON j.id = l.id
    $$,
    $$ VALUES (0, now() + interval '1 hour') $$,
    'run_at is applied to every job; priority NULL is 0'
);

-- Empty batch.
SELECT is_empty(
    $$SELECT * FROM pgq.enqueue_batch('import_none', '{}'::jsonb[])$$,
    'an empty array returns an empty set'
);
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.entrypoint = 'import_none'),
    0::bigint,
    'an empty array enqueues nothing'
);

-- Bad input, and nothing changes.
CREATE TEMP TABLE t_before AS SELECT count(*) AS n FROM pgq._jobs;

SELECT throws_ok(
    $$SELECT pgq.enqueue_batch(NULL, ARRAY['{}']::jsonb[])$$, 'PQ001', NULL, 'entrypoint NULL raises PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.enqueue_batch('', ARRAY['{}']::jsonb[])$$, 'PQ001', NULL, 'empty entrypoint raises PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.enqueue_batch(E'im\nport', ARRAY['{}']::jsonb[])$$, 'PQ001', NULL,
    'entrypoint with a control character raises PQ001'
);
SELECT throws_ok(
    format($$SELECT pgq.enqueue_batch(%L, ARRAY['{}']::jsonb[])$$, repeat('e', 201)), 'PQ001', NULL,
    'entrypoint of 201 characters raises PQ001'
);
SELECT throws_ok($$SELECT pgq.enqueue_batch('import', NULL)$$, 'PQ001', NULL, 'payloads NULL raises PQ001');
SELECT throws_ok(
    $$SELECT pgq.enqueue_batch('import', array_fill('{}'::jsonb, ARRAY[100001]))$$, 'PQ001', NULL,
    '100001 payloads raise PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.enqueue_batch('import', ARRAY['{}']::jsonb[], run_at => 'infinity')$$, 'PQ001', NULL,
    'run_at infinity raises PQ001'
);
SELECT throws_ok(
    $$
        SELECT pgq.enqueue_batch(
            'import',
            ARRAY[
                '{"n": 1}'::jsonb,
                jsonb_build_object('x', (SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 60000)))
            ]
        )
    $$,
    'PQ004', NULL,
    'a payload over 1 MiB (random data) anywhere in the batch raises PQ004'
);
SELECT is(
    (SELECT count(*) FROM pgq._jobs), (SELECT b.n FROM t_before AS b),
    'the failed calls enqueued nothing, not even the valid payloads of the batch'
);

-- Privileges.
SET ROLE pgq_producer;
SELECT lives_ok(
    $$SELECT pgq.enqueue_batch('import_producer', ARRAY['{}', '{}']::jsonb[])$$,
    'pgq_producer can enqueue a batch'
);
RESET ROLE;
SET ROLE pgq_worker;
SELECT throws_ok(
    $$SELECT pgq.enqueue_batch('import', ARRAY['{}']::jsonb[])$$, '42501', NULL,
    'pgq_worker cannot enqueue a batch'
);
RESET ROLE;
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.entrypoint = 'import_producer'),
    2::bigint,
    'the producer''s batch is stored'
);

SELECT * FROM finish();
ROLLBACK;
