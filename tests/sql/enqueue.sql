-- pgq.enqueue: ids, stored columns, run_at, dedupe_key, depends_on (waiting, queued at once
-- when the dependencies succeeded, born canceled when one is dead or canceled), validation
-- (PQ001, PQ004), privileges.
BEGIN;
SELECT plan(71);

\ir fixtures/setup.sql

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

-- depends_on: the job waits until every dependency has succeeded.
INSERT INTO t_worker VALUES ('wd', pgq.register_worker('wd', ARRAY['dep']));
INSERT INTO t_job VALUES ('dep_done', pgq.enqueue('dep', priority => 9));
INSERT INTO t_job VALUES ('dep_dies', pgq.enqueue('dep', priority => 8, max_attempts => 1));
INSERT INTO t_job VALUES ('dep_discarded', pgq.enqueue('dep', priority => 7, max_attempts => 1));
INSERT INTO t_job VALUES ('dep_canceled', pgq.enqueue('dep', run_at => now() + interval '1 day'));
INSERT INTO t_job VALUES ('dep_live', pgq.enqueue('dep', run_at => now() + interval '1 day'));
SELECT is((SELECT count(*) FROM pgq.claim(pg_temp.wid('wd'), ARRAY['dep'], 3)), 3::bigint, 'wd claims three dependencies');
SELECT is(
    (SELECT count(*) FROM pgq.complete(pg_temp.wid('wd'), ARRAY[pg_temp.jid('dep_done')])),
    1::bigint,
    'one dependency succeeds'
);
SELECT is(pgq.fail(pg_temp.wid('wd'), pg_temp.jid('dep_dies'), 'x'), 'dead', 'one dependency is dead');
SELECT is(pgq.fail(pg_temp.wid('wd'), pg_temp.jid('dep_discarded'), 'x'), 'dead', 'one more dependency is dead');
SELECT is(pgq.cancel(ARRAY[pg_temp.jid('dep_discarded')]), 1, 'and is discarded');
SELECT is(pgq.cancel(ARRAY[pg_temp.jid('dep_canceled')]), 1, 'one dependency is canceled');

INSERT INTO t_job VALUES ('waits', pgq.enqueue('dep', '{"n": 1}', depends_on => ARRAY[pg_temp.jid('dep_live')]));
SELECT results_eq(
    $$
        SELECT j.status, j.depends_on, j.payload, j.run_at = now(), j.worker_id
        FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('waits')
    $$,
    $$SELECT 'waiting', ARRAY[pg_temp.jid('dep_live')], '{"n": 1}'::jsonb, TRUE, NULL::uuid$$,
    'a job with a live dependency is stored waiting, with what it waits for'
);
SELECT is(pgq.job_status(pg_temp.jid('waits')), 'waiting', 'job_status reports waiting');
SELECT is(
    (SELECT j.depends_on FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('waits')),
    ARRAY[pg_temp.jid('dep_live')],
    'the waiting job records the live dependency it waits for'
);
INSERT INTO t_job VALUES (
    'waits_mixed',
    pgq.enqueue(
        'dep',
        depends_on => ARRAY[pg_temp.jid('dep_live'), pg_temp.jid('dep_done'), pg_temp.jid('dep_live')]
    )
);
SELECT results_eq(
    $$SELECT j.status, j.depends_on FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('waits_mixed')$$,
    $$SELECT 'waiting', ARRAY[pg_temp.jid('dep_live')]$$,
    'a job waits only for its live dependencies (duplicates and succeeded ones dropped)'
);
INSERT INTO t_job VALUES ('on_waiting', pgq.enqueue('dep', depends_on => ARRAY[pg_temp.jid('waits')]));
SELECT results_eq(
    $$
        SELECT pgq.job_status(pg_temp.jid('on_waiting')), j.depends_on
        FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('on_waiting')
    $$,
    format($$ VALUES ('waiting', ARRAY[%s]::bigint[]) $$, pg_temp.jid('waits')),
    'a job can wait for a waiting job'
);
INSERT INTO t_job VALUES ('dep_after_done', pgq.enqueue('dep', depends_on => ARRAY[pg_temp.jid('dep_done')]));
SELECT results_eq(
    $$SELECT j.status, j.depends_on FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('dep_after_done')$$,
    $$ VALUES ('queued', NULL::bigint[]) $$,
    'depends_on a job that already succeeded: queued at once'
);
INSERT INTO t_job VALUES ('no_deps', pgq.enqueue('dep', depends_on => '{}'));
SELECT is(pgq.job_status(pg_temp.jid('no_deps')), 'queued', 'an empty depends_on: queued at once');

-- A dependency that is dead or ended canceled: the job is born canceled, and says why.
INSERT INTO t_job VALUES (
    'on_dead', pgq.enqueue('dep', priority => 4, depends_on => ARRAY[pg_temp.jid('dep_live'), pg_temp.jid('dep_dies')])
);
INSERT INTO t_job VALUES ('on_discarded', pgq.enqueue('dep', depends_on => ARRAY[pg_temp.jid('dep_discarded')]));
INSERT INTO t_job VALUES (
    'on_canceled', pgq.enqueue('dep', depends_on => ARRAY[pg_temp.jid('dep_done'), pg_temp.jid('dep_canceled')])
);
INSERT INTO t_job VALUES ('on_born_canceled', pgq.enqueue('dep', depends_on => ARRAY[pg_temp.jid('on_canceled')]));
SELECT results_eq(
    $$
        SELECT t.label, pgq.job_status(t.id), o.error
        FROM t_job AS t INNER JOIN pgq.outcomes AS o ON t.id = o.job_id
        WHERE t.label LIKE 'on\_%' AND t.label <> 'on_waiting' ORDER BY t.id
    $$,
    format(
        $$
            VALUES ('on_dead', 'canceled', 'dependency %s is dead'),
                   ('on_discarded', 'canceled', 'dependency %s ended dead'),
                   ('on_canceled', 'canceled', 'dependency %s ended canceled'),
                   ('on_born_canceled', 'canceled', 'dependency %s ended canceled')
        $$,
        pg_temp.jid('dep_dies'), pg_temp.jid('dep_discarded'), pg_temp.jid('dep_canceled'), pg_temp.jid('on_canceled')
    ),
    'a dead or canceled dependency: the job is born canceled, the reason in its outcome'
);
SELECT is(
    (
        SELECT count(*) FROM pgq._jobs AS j INNER JOIN t_job AS t ON j.id = t.id
        WHERE t.label IN ('on_dead', 'on_discarded', 'on_canceled', 'on_born_canceled')
    ),
    0::bigint,
    'a job born canceled never enters the hot table'
);
SELECT results_eq(
    $$
        SELECT o.entrypoint, o.outcome, o.priority, o.attempt, o.deliveries, o.enqueued_at, o.started_at, o.worker_id
        FROM pgq.outcomes AS o WHERE o.job_id = pg_temp.jid('on_dead')
    $$,
    $$ VALUES ('dep', 'canceled', 4, 0, 0, now(), NULL::timestamptz, NULL::uuid) $$,
    'its outcome row: never started, no attempt or delivery'
);
SELECT cmp_ok(
    pg_temp.jid('on_dead'), '>', pg_temp.jid('dep_after_done'), 'a job born canceled gets a new id from the job sequence'
);
SELECT is(
    (SELECT j.status FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('dep_dies')),
    'dead',
    'a dead dependency is left as it is'
);

-- With a live job holding (entrypoint, dedupe_key), an enqueue with a dead dependency
-- returns the live job's id rather than a job born canceled.
INSERT INTO t_job VALUES ('dep_keyed', pgq.enqueue('dep', dedupe_key => 'dep-key', run_at => now() + interval '1 day'));
SELECT is(
    pgq.enqueue('dep', dedupe_key => 'dep-key', depends_on => ARRAY[pg_temp.jid('dep_dies')]),
    pg_temp.jid('dep_keyed'),
    'a live job holds the dedupe_key: an enqueue with a dead dependency returns the live job''s id'
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
SELECT throws_ok(
    format($$SELECT pgq.enqueue('dep', depends_on => ARRAY[%s, NULL])$$, pg_temp.jid('dep_live')), 'PQ001', NULL,
    'depends_on containing NULL raises PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.enqueue('dep', depends_on => ARRAY[-1])$$, 'PQ001',
    'pgq: invalid argument depends_on: job -1 is unknown (or its outcome was pruned)',
    'an unknown id in depends_on raises PQ001 naming the argument'
);
SELECT throws_ok(
    format(
        $$SELECT pgq.enqueue('dep', depends_on => ARRAY[%s, %s])$$,
        pg_temp.jid('dep_live'), (SELECT max(t.id) + 1000 FROM t_job AS t)
    ),
    'PQ001', NULL,
    'an id not yet used, next to a live one, raises PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.enqueue('dep', depends_on => ARRAY(SELECT g::bigint FROM generate_series(1, 10001) AS g))$$,
    'PQ001', NULL,
    '10001 ids in depends_on raise PQ001'
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
SELECT lives_ok(
    format($$SELECT pgq.enqueue('dep', depends_on => ARRAY[%s])$$, pg_temp.jid('dep_live')),
    'pgq_producer can enqueue with depends_on'
);
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
