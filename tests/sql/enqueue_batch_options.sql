-- pgq.enqueue_batch takes pgq.enqueue's headers, max_attempts and depends_on: on every job
-- of the batch, in one statement (headers, max_attempts) or job by job (depends_on:
-- waiting, or canceled when a dependency is); bad values raise PQ001 and enqueue nothing.
BEGIN;
SELECT plan(12);

CREATE TEMP TABLE t_plain AS
SELECT b.id FROM pgq.enqueue_batch(
    'ebo', ARRAY['{"n": 1}', '{"n": 2}']::jsonb[], headers => '{"trace": "t1"}', max_attempts => 3
) AS b (id);
SELECT is(
    (
        SELECT count(*) FROM pgq._jobs AS j
        WHERE
            j.id IN (SELECT p.id FROM t_plain AS p)
            AND j.headers = '{"trace": "t1"}' AND j.max_attempts = 3 AND j.status = 'queued'
    ),
    2::bigint,
    'headers and max_attempts are set on every job of the batch'
);

CREATE TEMP TABLE t_dep AS SELECT pgq.enqueue('ebo_parent') AS id;
CREATE TEMP TABLE t_children AS
SELECT
    b.id,
    b.n
FROM pgq.enqueue_batch(
    'ebo_child', ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}']::jsonb[],
    depends_on => (SELECT ARRAY[d.id] FROM t_dep AS d), max_attempts => 2
) WITH ORDINALITY AS b (id, n);
SELECT is((SELECT count(*) FROM t_children), 3::bigint, 'a batch with depends_on returns one id per payload');
SELECT ok(
    (SELECT bool_and(c.id > c.lag) FROM (SELECT
        c.id,
        lag(c.id, 1, 0::bigint) OVER (ORDER BY c.n) AS lag
    FROM t_children AS c) AS c),
    'in the order of payloads'
);
SELECT is(
    (SELECT array_agg(DISTINCT j.status) FROM pgq._jobs AS j INNER JOIN t_children AS c ON j.id = c.id),
    ARRAY['waiting'], 'every job of it waits for the dependency'
);
SELECT is(
    (SELECT array_agg(j.payload ->> 'n' ORDER BY c.n) FROM pgq._jobs AS j INNER JOIN t_children AS c ON j.id = c.id),
    ARRAY['1', '2', '3'], 'each with its own payload'
);
SELECT is(
    (SELECT array_agg(DISTINCT j.max_attempts) FROM pgq._jobs AS j INNER JOIN t_children AS c ON j.id = c.id),
    ARRAY[2], 'and the batch''s other options'
);
SELECT is(pgq.cancel((SELECT array_agg(d.id) FROM t_dep AS d)), 1, 'the dependency is canceled');
SELECT is(
    (SELECT array_agg(DISTINCT pgq.job_status(c.id)) FROM t_children AS c), ARRAY['canceled'],
    'so are the jobs of the batch that waited for it'
);
DELETE FROM pgq._jobs AS j WHERE j.entrypoint LIKE 'ebo%';
CREATE TEMP TABLE t_count AS SELECT count(*) AS n FROM pgq._jobs;
SELECT throws_ok(
    $$SELECT pgq.enqueue_batch('ebo', ARRAY['{}']::jsonb[], max_attempts => 0)$$, 'PQ001', NULL,
    'max_attempts 0 raises PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.enqueue_batch('ebo', ARRAY['{}']::jsonb[], headers => '[1]')$$, 'PQ001', NULL,
    'headers that are not an object raise PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.enqueue_batch('ebo', ARRAY['{}', '{}']::jsonb[], depends_on => ARRAY[NULL]::bigint[])$$, 'PQ001', NULL,
    'depends_on with a NULL raises PQ001'
);
SELECT is((SELECT count(*) FROM pgq._jobs), (SELECT c.n FROM t_count AS c), 'the bad calls enqueued nothing');

SELECT * FROM finish();
ROLLBACK;
