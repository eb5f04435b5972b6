-- Batches: pgq.batch opens one, pgq.enqueue_batch(batch => ...) adds members, the members'
-- ends are counted (deferred to commit; here made immediate, as the test never commits) and
-- each callback is enqueued once; pgq.batch_results reads the members; bad input raises PQ
-- errors and changes nothing.
BEGIN;
SELECT plan(33);

CREATE TEMP TABLE t_id (label text PRIMARY KEY, id bigint NOT NULL);
CREATE FUNCTION pg_temp.id(label text) RETURNS bigint
LANGUAGE sql STABLE AS $$ SELECT t.id FROM pg_temp.t_id AS t WHERE t.label = $1 $$;
CREATE FUNCTION pg_temp.cb(event text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT j.payload FROM pgq._jobs AS j
    WHERE j.payload -> 'batch' ->> 'event' = $1 AND (j.payload -> 'batch' ->> 'id')::bigint = pg_temp.id('b')
$$;

-- Bad input: PQ001 (PQ004 for size) naming the argument, and nothing created.
SELECT throws_ok($$SELECT pgq.batch(on_finish => '5')$$, 'PQ001', NULL, 'a callback that is a number raises PQ001');
SELECT throws_like(
    $$SELECT pgq.batch(on_success => '{"entrypoint": "x", "bogus": 1}')$$, '%on_success: has the unknown key bogus%',
    'an unknown key raises, naming the callback and the key'
);
SELECT throws_like(
    $$SELECT pgq.batch(on_death => '{"entrypoint": ""}')$$, '%on_death.entrypoint%', 'an empty entrypoint raises'
);
SELECT throws_like(
    $$SELECT pgq.batch(on_finish => '{"payload": {}}')$$, '%on_finish.entrypoint: must be a string%',
    'a callback without an entrypoint raises'
);
SELECT throws_like(
    $$SELECT pgq.batch(on_finish => '{"entrypoint": "r", "payload": [1]}')$$, '%on_finish.payload%',
    'a payload that is not an object raises'
);
SELECT throws_like(
    $$SELECT pgq.batch(on_finish => '{"entrypoint": "r", "priority": 1.5}')$$, '%on_finish.priority%',
    'a priority that is not an integer raises'
);
SELECT throws_like(
    $$SELECT pgq.batch(on_finish => '{"entrypoint": "r", "max_attempts": 0}')$$, '%on_finish.max_attempts%',
    'max_attempts out of range raises'
);
SELECT throws_like(
    $$SELECT pgq.batch(on_finish => '{"entrypoint": "r", "headers": "h"}')$$, '%on_finish.headers%',
    'headers that are not an object raise'
);
SELECT throws_ok(
    format($$SELECT pgq.batch(on_finish => jsonb_build_object('entrypoint', 'r', 'payload',
        jsonb_build_object('blob', %L)))$$, repeat('x', 1048577)),
    'PQ004', NULL, 'a callback payload over 1 MiB raises PQ004'
);
SELECT throws_ok(
    format($$SELECT pgq.batch(on_death => jsonb_build_object('entrypoint', 'r', 'headers',
        jsonb_build_object('h', %L)))$$, repeat('x', 65537)),
    'PQ004', NULL, 'callback headers over 64 KiB raise PQ004'
);
SELECT is((SELECT count(*) FROM pgq._batches), 0::bigint, 'no batch was created by the bad calls');

INSERT INTO t_id VALUES ('b', pgq.batch(
    on_finish => '{"entrypoint": "report", "payload": {"to": "ops"}, "priority": 5}',
    on_success => '"publish"',
    on_death => '{"entrypoint": "alert", "max_attempts": 2}'
));
SELECT throws_like(
    format('SELECT * FROM pgq.enqueue_batch(%L, ARRAY[%L]::jsonb[], batch => %s)', 'part', '{}', pg_temp.id('b') + 1),
    '%batch: % is not a batch opened in this transaction%', 'an unknown batch raises PQ001'
);
SELECT throws_like(
    format(
        'SELECT * FROM pgq.enqueue_batch(%L, ARRAY[%L]::jsonb[], dedupe_keys => ARRAY[%L], batch => %s)',
        'part', '{}', 'k', pg_temp.id('b')
    ),
    '%batch: cannot be combined with dedupe_keys%', 'a batch with dedupe keys raises PQ001'
);
SELECT is((SELECT count(*) FROM pgq._jobs), 0::bigint, 'no job was enqueued by the bad calls');

INSERT INTO t_id
SELECT
    'm' || e.ord AS label,
    e.id
FROM
    pgq.enqueue_batch('part', ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}']::jsonb[], max_attempts => 1, batch => pg_temp.id('b'))
    WITH ORDINALITY AS e (id, ord);
SELECT is(
    (SELECT array_agg(j.batch_id) FROM pgq._jobs AS j WHERE j.entrypoint = 'part'),
    ARRAY[pg_temp.id('b'), pg_temp.id('b'), pg_temp.id('b')], 'the members carry the batch'
);
-- What the commit would do, after each statement from here on.
SET CONSTRAINTS ALL IMMEDIATE;
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.batch_id IS NULL), 0::bigint, 'no callback while no member ended'
);

SELECT pgq.register_worker('w', ARRAY['part']) AS w \gset
SELECT is((SELECT count(*) FROM pgq.claim(:'w', ARRAY['part'], 3)), 3::bigint, 'the members are claimed');
SELECT is(
    (SELECT count(*) FROM pgq.complete(:'w', ARRAY[pg_temp.id('m1'), pg_temp.id('m2')], ARRAY['{"r": 1}', '{"r": 2}']::jsonb[])),
    2::bigint, 'two members succeed'
);
SELECT is(pgq.fail(:'w', pg_temp.id('m3'), 'boom'), 'dead', 'the third dies');
SELECT is(
    pg_temp.cb('death') -> 'batch', '{"id": 0, "event": "death", "total": 3, "succeeded": 2, "dead": 1, "canceled": 0}'::jsonb
    || jsonb_build_object('id', pg_temp.id('b')),
    'on_death is enqueued with the batch and its counts'
);
SELECT is(
    jsonb_build_array(pg_temp.cb('finish') - 'batch', (pg_temp.cb('finish') -> 'batch') - 'id'),
    '[{"to": "ops"}, {"event": "finish", "total": 3, "succeeded": 2, "dead": 1, "canceled": 0}]'::jsonb,
    'on_finish is enqueued, its payload the callback''s plus the counts'
);
SELECT is(
    (SELECT j.priority FROM pgq._jobs AS j WHERE j.entrypoint = 'report'), 5, 'with the callback''s priority'
);
SELECT is(
    (
        SELECT jsonb_agg(jsonb_build_array(r.job_id = pg_temp.id('m' || r.ord), r.status, r.result) ORDER BY r.ord)
        FROM pgq.batch_results(pg_temp.id('b')) WITH ORDINALITY AS r (job_id, status, result, ord)
    ),
    '[[true, "succeeded", {"r": 1}], [true, "succeeded", {"r": 2}], [true, "dead", null]]'::jsonb,
    'pgq.batch_results: every member, its status and result, in id order'
);
-- pgq.retry of the dead member takes it out of the dead count; its success then completes the batch.
SELECT is(pgq.retry(ARRAY[pg_temp.id('m3')]), 1, 'the dead member is retried');
SELECT is(
    (SELECT count(*) FROM pgq.complete(:'w', (SELECT array_agg(c.id) FROM pgq.claim(:'w', ARRAY['part']) AS c))),
    1::bigint, 'and succeeds'
);
SELECT is(
    (SELECT
        jsonb_build_array(
            count(*) FILTER (WHERE j.entrypoint = 'alert'), count(*) FILTER (WHERE j.entrypoint = 'report'),
            count(*) FILTER (WHERE j.entrypoint = 'publish')
        )
    FROM pgq._jobs AS j),
    '[1, 1, 1]'::jsonb, 'on_success follows; on_death and on_finish were not enqueued again'
);

SELECT throws_ok($$SELECT * FROM pgq.batch_results(NULL)$$, 'PQ001', NULL, 'pgq.batch_results(NULL) raises PQ001');
SELECT throws_ok(
    format('SELECT * FROM pgq.batch_results(%s)', pg_temp.id('b') + 1000), 'PQ005', NULL,
    'an unknown batch raises PQ005'
);

-- SET CONSTRAINTS ALL IMMEDIATE (in force here) does not settle a batch while its opening
-- transaction may still add members: it would finish empty, at pgq.batch's own statement.
INSERT INTO t_id
SELECT
    'early' AS label,
    pgq.batch(on_finish => '"early_finish"', on_success => '"early_success"') AS id;
INSERT INTO t_id
SELECT
    'e' || e.ord AS label,
    e.id
FROM
    pgq.enqueue_batch('part', ARRAY['{}', '{}']::jsonb[], batch => pg_temp.id('early'))
    WITH ORDINALITY AS e (id, ord);
SELECT is(pgq.cancel(ARRAY[pg_temp.id('e1')]), 1, 'a member of the open batch is canceled');
SET CONSTRAINTS ALL IMMEDIATE;
SELECT is(
    (SELECT jsonb_build_array(b.total, b.canceled, b.finished_at IS NULL) FROM pgq._batches AS b WHERE b.id = pg_temp.id('early')),
    '[2, 1, true]'::jsonb, 'an explicit SET CONSTRAINTS ALL IMMEDIATE counts the batch with all its members'
);
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.entrypoint LIKE 'early\_%'), 0::bigint,
    'no callback of the open batch was enqueued before its members were added'
);
-- A batch that an explicit SET CONSTRAINTS ... IMMEDIATE finished takes no more members.
SELECT is(pgq.cancel(ARRAY[pg_temp.id('e2')]), 1, 'its last member is canceled: the batch finished');
SELECT throws_ok(
    format($$SELECT pgq.enqueue_batch('part', ARRAY['{}']::jsonb[], batch => %s)$$, pg_temp.id('early')),
    'PQ001', NULL, 'a member for a batch that finished raises PQ001'
);

SELECT * FROM finish();
ROLLBACK;
