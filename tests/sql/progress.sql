-- pgq.progress: the holding delivery's report is stored (the last one stands) and shown by
-- pgq.job, also after the job finished; a stale delivery or another worker stores
-- nothing; bad input raises PQ001 and changes nothing; privileges.
BEGIN;
SELECT plan(13);

\ir fixtures/setup.sql

INSERT INTO t_worker VALUES ('w1', pgq.register_worker('w1', ARRAY['pr']));
INSERT INTO t_worker VALUES ('w2', pgq.register_worker('w2', ARRAY['pr']));
INSERT INTO t_job VALUES ('j', pgq.enqueue('pr'));
SELECT is((SELECT count(*) FROM pgq.claim(pg_temp.wid('w1'), ARRAY['pr'])), 1::bigint, 'w1 claims the job');
SELECT is(pgq.job(pg_temp.jid('j')) -> 'progress', 'null'::jsonb, 'no progress before a report');
SELECT is(pgq.progress(pg_temp.wid('w1'), pg_temp.jid('j'), 1, 0.25, 'page 1 of 4'), TRUE, 'the holder reports');
SELECT is(pgq.progress(pg_temp.wid('w1'), pg_temp.jid('j'), 1, 0.5), TRUE, 'and reports again');
SELECT is(
    (pgq.job(pg_temp.jid('j')) -> 'progress') - 'updated_at'::text, '{"value": 0.5, "note": null, "delivery": 1}'::jsonb,
    'pgq.job shows the last report'
);
SELECT is(pgq.progress(pg_temp.wid('w2'), pg_temp.jid('j'), 1, 0.9), NULL, 'another worker stores nothing');
SELECT is(pgq.progress(pg_temp.wid('w1'), pg_temp.jid('j'), 2, 0.9), NULL, 'another delivery stores nothing');
SELECT is((pgq.job(pg_temp.jid('j')) -> 'progress' ->> 'value')::numeric, 0.5, '... the report stands');

SELECT throws_ok(
    format('SELECT pgq.progress(%L, %s, 1, NULL)', pg_temp.wid('w1'), pg_temp.jid('j')), 'PQ001', NULL,
    'value NULL raises PQ001'
);
SELECT throws_ok(
    format('SELECT pgq.progress(%L, %s, 1, -1)', pg_temp.wid('w1'), pg_temp.jid('j')), 'PQ001', NULL,
    'a negative value raises PQ001'
);
SELECT throws_ok(
    format('SELECT pgq.progress(%L, %s, 1, 1, repeat(%L, 1001))', pg_temp.wid('w1'), pg_temp.jid('j'), 'x'),
    'PQ001', NULL, 'a note over 1000 characters raises PQ001'
);

SELECT is((SELECT count(*) FROM pgq.complete(pg_temp.wid('w1'), ARRAY[pg_temp.jid('j')])), 1::bigint, 'the job succeeds');
SELECT is(
    (pgq.job(pg_temp.jid('j')) -> 'progress' ->> 'value')::numeric, 0.5, 'a finished job keeps its last report'
);

SELECT * FROM finish();
ROLLBACK;
