-- pgq.dependency_results: a dependent job reads its dependencies' statuses and results,
-- in id order, while it waits and runs; a dependency that had succeeded
-- before the dependent was enqueued is not one (pgq.enqueue keeps only what it must wait
-- for); PQ001 / PQ005.
BEGIN;
SELECT plan(9);

\ir fixtures/setup.sql

CREATE FUNCTION pg_temp.deps(label text) RETURNS jsonb
LANGUAGE sql AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_array(d.status, d.result)), '[]')
    FROM pgq.dependency_results(pg_temp.jid($1)) AS d
$$;

INSERT INTO t_worker VALUES ('w1', pgq.register_worker('w1', ARRAY['part', 'merge']));
INSERT INTO t_job VALUES ('early', pgq.enqueue('part', priority => 9));
SELECT is(
    (SELECT count(*) FROM pgq.complete(pg_temp.wid('w1'), (SELECT array_agg(c.id) FROM pgq.claim(pg_temp.wid('w1'), ARRAY['part']) AS c), ARRAY['{"n": 0}'::jsonb])),
    1::bigint, 'one part succeeds before the merge is enqueued'
);
INSERT INTO t_job VALUES ('a', pgq.enqueue('part', priority => 2));
INSERT INTO t_job VALUES ('b', pgq.enqueue('part', priority => 1));
INSERT INTO t_job VALUES ('merge', pgq.enqueue('merge', depends_on => ARRAY[pg_temp.jid('b'), pg_temp.jid('early'), pg_temp.jid('a')]));
SELECT is(
    pg_temp.deps('merge'), '[["queued", null], ["queued", null]]'::jsonb,
    'while it waits: each dependency''s status, no result yet; the part that had succeeded is not listed'
);
SELECT is((SELECT count(*) FROM pgq.claim(pg_temp.wid('w1'), ARRAY['part'], 2)), 2::bigint, 'the parts are claimed');
SELECT is(
    (SELECT count(*) FROM pgq.complete(pg_temp.wid('w1'), ARRAY[pg_temp.jid('a'), pg_temp.jid('b')], ARRAY['{"n": 1}', '{"n": 2}']::jsonb[])),
    2::bigint, 'and succeed'
);
SELECT is((SELECT c.id FROM pgq.claim(pg_temp.wid('w1'), ARRAY['merge']) AS c), pg_temp.jid('merge'), 'the merge runs');
SELECT is(
    pg_temp.deps('merge'), '[["succeeded", {"n": 1}], ["succeeded", {"n": 2}]]'::jsonb,
    'its handler reads every result, in id order'
);
SELECT is(
    (SELECT array_agg(d.id) FROM pgq.dependency_results(pg_temp.jid('merge')) AS d),
    ARRAY[pg_temp.jid('a'), pg_temp.jid('b')], 'with their ids'
);

SELECT throws_ok($$SELECT * FROM pgq.dependency_results(NULL)$$, 'PQ001', NULL, 'job_id NULL raises PQ001');
SELECT throws_ok(
    $$SELECT * FROM pgq.dependency_results((SELECT max(t.id) + 1000 FROM t_job AS t))$$, 'PQ005', NULL,
    'an unknown id raises PQ005'
);

SELECT * FROM finish();
ROLLBACK;
