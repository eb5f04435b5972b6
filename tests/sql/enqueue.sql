-- pgq.enqueue: ids, stored columns, run_at, dedupe_key, validation (PQ001, PQ004), privileges.
BEGIN;
SELECT plan(47);

CREATE TEMP TABLE t_job (label text PRIMARY KEY, id bigint NOT NULL);
CREATE TEMP TABLE t_worker (label text PRIMARY KEY, id uuid NOT NULL);
GRANT SELECT ON t_job, t_worker TO public;
CREATE FUNCTION pg_temp.jid(label text) RETURNS bigint
LANGUAGE sql STABLE AS $$ SELECT t.id FROM pg_temp.t_job AS t WHERE t.label = $1 $$;
CREATE FUNCTION pg_temp.wid(label text) RETURNS uuid
LANGUAGE sql STABLE AS $$ SELECT t.id FROM pg_temp.t_worker AS t WHERE t.label = $1 $$;

-- Ids and what is stored.
INSERT INTO t_job VALUES ('plain', pgq.enqueue('email', '{"to": "a@b"}'));
INSERT INTO t_job VALUES ('second', pgq.enqueue('email'));

SELECT ok(pg_temp.jid('plain') IS NOT NULL, 'enqueue returns a job id');
SELECT cmp_ok(pg_temp.jid('second'), '>', pg_temp.jid('plain'), 'a later enqueue returns a larger id');
SELECT results_eq(
    $$
        SELECT j.entrypoint, j.status, j.priority, j.payload, j.headers, j.attempt, j.deliveries,
               j.run_at = now(), j.enqueued_at = now(), j.dedupe_key, j.max_attempts, j.worker_id
        FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('plain')
    $$,
    $$
        VALUES ('email', 'queued', 0, '{"to": "a@b"}'::jsonb, NULL::jsonb, 0, 0, TRUE, TRUE,
                NULL::text, NULL::integer, NULL::uuid)
    $$,
    'the job is stored queued, priority 0, due now, with its payload and no attempts or deliveries'
);
SELECT is(
    (SELECT j.payload FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('second')),
    NULL,
    'payload defaults to NULL'
);

-- Named notation and the optional arguments.
INSERT INTO t_job VALUES ('later', pgq.enqueue('email', '{"to": "c@d"}', run_at => now() + interval '5 minutes'));
INSERT INTO t_job VALUES ('past', pgq.enqueue('email', run_at => now() - interval '1 hour'));
INSERT INTO t_job VALUES ('minus_inf', pgq.enqueue('email', run_at => '-infinity'));
INSERT INTO t_job VALUES (
    'full',
    pgq.enqueue(
        entrypoint => 'email', payload => '[1, 2]', priority => 7, headers => '{"trace_id": "abc"}',
        max_attempts => 3
    )
);
INSERT INTO t_job VALUES ('null_priority', pgq.enqueue('email', priority => NULL));

SELECT is(
    (SELECT j.run_at FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('later')),
    now() + interval '5 minutes',
    'run_at => now() + 5 min is stored as given'
);
SELECT is(
    (SELECT j.run_at FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('past')),
    now(),
    'a run_at in the past becomes now'
);
SELECT is(
    (SELECT j.run_at FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('minus_inf')),
    now(),
    'run_at => -infinity becomes now'
);
SELECT results_eq(
    $$
        SELECT j.priority, j.payload, j.headers, j.max_attempts
        FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('full')
    $$,
    $$ VALUES (7, '[1, 2]'::jsonb, '{"trace_id": "abc"}'::jsonb, 3) $$,
    'priority, payload, headers and max_attempts are stored'
);
SELECT is(
    (SELECT j.priority FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('null_priority')),
    0,
    'priority => NULL is stored as 0'
);
SELECT lives_ok(
    format($$SELECT pgq.enqueue(%L, max_attempts => 1)$$, repeat('e', 200)),
    'an entrypoint of 200 characters and max_attempts 1 are accepted'
);
SELECT lives_ok(
    $$SELECT pgq.enqueue('email', max_attempts => 1000, dedupe_key => repeat('k', 1000))$$,
    'max_attempts 1000 and a dedupe_key of 1000 characters are accepted'
);

-- dedupe_key: a live job holds the key.
INSERT INTO t_job VALUES ('dedupe', pgq.enqueue('report', '{"v": 1}', dedupe_key => 'daily'));
INSERT INTO t_job VALUES ('dedupe_again', pgq.enqueue('report', '{"v": 2}', dedupe_key => 'daily'));
INSERT INTO t_job VALUES ('dedupe_other_ep', pgq.enqueue('export', dedupe_key => 'daily'));
INSERT INTO t_job VALUES ('no_key_1', pgq.enqueue('report'));
INSERT INTO t_job VALUES ('no_key_2', pgq.enqueue('report'));

SELECT is(pg_temp.jid('dedupe_again'), pg_temp.jid('dedupe'), 'same entrypoint and dedupe_key returns the live job''s id');
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.entrypoint = 'report' AND j.dedupe_key = 'daily'),
    1::bigint,
    'the duplicate was not inserted'
);
SELECT is(
    (SELECT j.payload FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('dedupe')),
    '{"v": 1}'::jsonb,
    'the live job keeps its payload'
);
SELECT isnt(pg_temp.jid('dedupe_other_ep'), pg_temp.jid('dedupe'), 'the same key on another entrypoint is another job');
SELECT isnt(pg_temp.jid('no_key_2'), pg_temp.jid('no_key_1'), 'jobs without a dedupe_key are never deduplicated');

-- A running job is live: it still holds the key.
INSERT INTO t_worker VALUES ('w1', pgq.register_worker('w1', ARRAY['report']));
SELECT is(
    (SELECT c.id FROM pgq.claim(pg_temp.wid('w1'), ARRAY['report']) AS c),
    pg_temp.jid('dedupe'),
    'the deduplicated job is claimed first'
);
SELECT is(
    pgq.enqueue('report', dedupe_key => 'daily'),
    pg_temp.jid('dedupe'),
    'a running job still holds its dedupe_key'
);

-- A finished job frees the key.
SELECT is(
    (SELECT array_agg(c) FROM pgq.complete(pg_temp.wid('w1'), ARRAY[pg_temp.jid('dedupe')]) AS c),
    ARRAY[pg_temp.jid('dedupe')],
    'the deduplicated job completes'
);
INSERT INTO t_job VALUES ('after_done', pgq.enqueue('report', dedupe_key => 'daily'));
SELECT isnt(pg_temp.jid('after_done'), pg_temp.jid('dedupe'), 'after completion the key makes a new job');

-- A dead job does not hold the key.
UPDATE pgq._jobs SET status = 'dead' WHERE id = pg_temp.jid('after_done');
INSERT INTO t_job VALUES ('after_dead', pgq.enqueue('report', dedupe_key => 'daily'));
SELECT isnt(pg_temp.jid('after_dead'), pg_temp.jid('after_done'), 'a dead job does not hold the dedupe_key');
SELECT results_eq(
    $$
        SELECT j.status FROM pgq._jobs AS j
        WHERE j.entrypoint = 'report' AND j.dedupe_key = 'daily' ORDER BY j.id
    $$,
    ARRAY['dead', 'queued'],
    'the dead job and the new live job both exist'
);

-- Bad input: PQ001 / PQ004, and nothing changes.
CREATE TEMP TABLE t_before AS SELECT count(*) AS n FROM pgq._jobs;

SELECT throws_ok($$SELECT pgq.enqueue(NULL)$$, 'PQ001', NULL, 'entrypoint NULL raises PQ001');
SELECT throws_ok($$SELECT pgq.enqueue('')$$, 'PQ001', NULL, 'empty entrypoint raises PQ001');
SELECT throws_ok($$SELECT pgq.enqueue('   ')$$, 'PQ001', NULL, 'blank entrypoint raises PQ001');
SELECT throws_ok(
    format($$SELECT pgq.enqueue(%L)$$, repeat('e', 201)), 'PQ001', NULL,
    'entrypoint of 201 characters raises PQ001'
);
SELECT throws_ok($$SELECT pgq.enqueue(E'a\nb')$$, 'PQ001', NULL, 'entrypoint with a newline raises PQ001');
SELECT throws_ok($$SELECT pgq.enqueue(E'a\tb')$$, 'PQ001', NULL, 'entrypoint with a tab raises PQ001');
SELECT throws_ok($$SELECT pgq.enqueue('a' || chr(1))$$, 'PQ001', NULL, 'entrypoint with chr(1) raises PQ001');
SELECT throws_ok(
    $$SELECT pgq.enqueue('email', max_attempts => 0)$$, 'PQ001', NULL, 'max_attempts 0 raises PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.enqueue('email', max_attempts => -1)$$, 'PQ001', NULL, 'max_attempts -1 raises PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.enqueue('email', max_attempts => 1001)$$, 'PQ001', NULL, 'max_attempts 1001 raises PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.enqueue('email', dedupe_key => '')$$, 'PQ001', NULL, 'empty dedupe_key raises PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.enqueue('email', dedupe_key => repeat('k', 1001))$$, 'PQ001', NULL,
    'dedupe_key of 1001 characters raises PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.enqueue('email', run_at => 'infinity')$$, 'PQ001', NULL, 'run_at infinity raises PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.enqueue('email', headers => '[1]')$$, 'PQ001', NULL, 'headers that are not an object raise PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.enqueue('email', headers => '"x"')$$, 'PQ001', NULL, 'headers that are a string raise PQ001'
);
SELECT throws_ok(
    $$
        SELECT pgq.enqueue(
            'email',
            jsonb_build_object('x', (SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 60000)))
        )
    $$,
    'PQ004', NULL,
    'a payload over 1 MiB (random data) raises PQ004'
);
SELECT throws_ok(
    $$
        SELECT pgq.enqueue(
            'email',
            headers => jsonb_build_object(
                'x', (SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 4000))
            )
        )
    $$,
    'PQ004', NULL,
    'headers over 64 KiB raise PQ004'
);
SELECT is((SELECT count(*) FROM pgq._jobs), (SELECT b.n FROM t_before AS b), 'the failed calls enqueued nothing');

-- The limit applies to the jsonb value before compression (docs/errors.md).
SELECT throws_ok(
    $$SELECT pgq.enqueue('email', jsonb_build_object('x', repeat('a', 2000000)))$$,
    'PQ004', NULL,
    'a 2 MB payload is rejected even though it would compress well'
);

-- Privileges.
SET ROLE pgq_producer;
SELECT lives_ok($$SELECT pgq.enqueue('email', '{"by": "producer"}')$$, 'pgq_producer can enqueue');
SELECT throws_ok($$SELECT count(*) FROM pgq._jobs$$, '42501', NULL, 'pgq_producer cannot read pgq._jobs');
SELECT throws_ok(
    $$INSERT INTO pgq._jobs (entrypoint) VALUES ('email')$$, '42501', NULL,
    'pgq_producer cannot insert into pgq._jobs directly'
);
RESET ROLE;
SET ROLE pgq_worker;
SELECT throws_ok($$SELECT pgq.enqueue('email')$$, '42501', NULL, 'pgq_worker cannot enqueue');
RESET ROLE;
SET ROLE pgq_admin;
SELECT lives_ok($$SELECT pgq.enqueue('email')$$, 'pgq_admin can enqueue');
RESET ROLE;
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.payload = '{"by": "producer"}'),
    1::bigint,
    'the producer''s job is stored'
);

SELECT * FROM finish();
ROLLBACK;
