-- pgq.claim: due jobs only, priority then run_at then id, batch_size, never a held job nor
-- a waiting one, pause, concurrency limits, rate limits (token bucket), deliveries,
-- validation (PQ001, PQ002, PQ003), privileges.
BEGIN;
SELECT plan(83);

\ir fixtures/setup.sql

-- Claim one job at a time and return the ids in claim order.
CREATE FUNCTION pg_temp.claim_one_by_one(worker text, entrypoints text[], n integer) RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
    v_ids bigint [] := '{}';
    v_id bigint;
BEGIN
    FOR i IN 1..n LOOP
        SELECT c.id INTO v_id FROM pgq.claim(pg_temp.wid(worker), entrypoints) AS c;
        v_ids := v_ids || v_id;
    END LOOP;
    RETURN v_ids;
END
$$;

INSERT INTO t_worker VALUES ('w1', pgq.register_worker('w1', ARRAY['a', 'b', 'p', 'c', 'd', 'bulk']));
INSERT INTO t_worker VALUES ('w2', pgq.register_worker('w2', ARRAY['a', 'b', 'p', 'c']));
INSERT INTO t_worker VALUES ('wr', pgq.register_worker('wr', ARRAY['wt', 'r5', 'r100', 'rboth', 'plain_cfg']));

-- Nothing due.
SELECT is_empty(
    format($$SELECT * FROM pgq.claim(%L, ARRAY['a'])$$, pg_temp.wid('w1')),
    'claim returns an empty set when nothing is queued'
);
INSERT INTO t_job VALUES ('future', pgq.enqueue('a', run_at => now() + interval '1 minute'));
SELECT is_empty(
    format($$SELECT * FROM pgq.claim(%L, ARRAY['a'])$$, pg_temp.wid('w1')),
    'a job with run_at in the future is not claimable'
);

-- One job: the returned row and the stored state.
INSERT INTO t_job VALUES ('one', pgq.enqueue('a', '{"k": 1}', priority => 2, headers => '{"h": "x"}'));
SELECT results_eq(
    format(
        $$
            SELECT c.id, c.entrypoint, c.payload, c.headers, c.priority, c.attempt, c.deliveries,
                   c.enqueued_at, c.run_at, c.max_attempts, c.timeout
            FROM pgq.claim(%L, ARRAY['a']) AS c
        $$,
        pg_temp.wid('w1')
    ),
    $$
        VALUES (pg_temp.jid('one'), 'a', '{"k": 1}'::jsonb, '{"h": "x"}'::jsonb, 2, 0, 1, now(), now(),
                5, interval '1 hour')
    $$,
    'claim returns the job with its payload, headers, priority, attempt 0 and deliveries 1'
);
SELECT results_eq(
    $$SELECT j.status, j.worker_id, j.started_at, j.deliveries FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('one')$$,
    $$SELECT 'running', pg_temp.wid('w1'), now(), 1$$,
    'the job is running, held by the worker, started now'
);
SELECT is_empty(
    format($$SELECT * FROM pgq.claim(%L, ARRAY['a'])$$, pg_temp.wid('w2')),
    'a job another worker holds is never claimed'
);
UPDATE pgq._jobs SET run_at = now() - interval '1 second' WHERE id = pg_temp.jid('future');
SELECT is(
    (SELECT c.id FROM pgq.claim(pg_temp.wid('w2'), ARRAY['a']) AS c),
    pg_temp.jid('future'),
    'the scheduled job is claimable once its run_at has passed'
);

-- Claim order: priority (highest first), then run_at, then id.
INSERT INTO t_job VALUES ('p1', pgq.enqueue('p', priority => 1));
INSERT INTO t_job VALUES ('p5_late', pgq.enqueue('p', priority => 5));
INSERT INTO t_job VALUES ('p3', pgq.enqueue('p', priority => 3));
INSERT INTO t_job VALUES ('p5_early', pgq.enqueue('p', priority => 5));
INSERT INTO t_job VALUES ('p5_tie_1', pgq.enqueue('p', priority => 5));
INSERT INTO t_job VALUES ('p5_tie_2', pgq.enqueue('p', priority => 5));
INSERT INTO t_job VALUES ('neg', pgq.enqueue('p', priority => -1));
UPDATE pgq._jobs SET run_at = now() - interval '10 seconds' WHERE id = pg_temp.jid('p5_early');
UPDATE pgq._jobs SET run_at = now() - interval '5 seconds'
WHERE id IN (pg_temp.jid('p5_tie_1'), pg_temp.jid('p5_tie_2'));
SELECT is(
    pg_temp.claim_one_by_one('w1', ARRAY['p'], 7),
    ARRAY[
        pg_temp.jid('p5_early'), pg_temp.jid('p5_tie_1'), pg_temp.jid('p5_tie_2'), pg_temp.jid('p5_late'),
        pg_temp.jid('p3'), pg_temp.jid('p1'), pg_temp.jid('neg')
    ],
    'jobs are claimed by priority, then run_at, then id'
);

-- Priority is global across the claimed entrypoints.
INSERT INTO t_job VALUES ('a_low', pgq.enqueue('a', priority => 1));
INSERT INTO t_job VALUES ('b_high', pgq.enqueue('b', priority => 9));
SELECT is(
    pg_temp.claim_one_by_one('w1', ARRAY['a', 'b'], 2),
    ARRAY[pg_temp.jid('b_high'), pg_temp.jid('a_low')],
    'the highest priority across all claimed entrypoints goes first'
);

-- batch_size.
INSERT INTO t_job (label, id)
SELECT
    'batch' || g AS label,
    pgq.enqueue('b', priority => g) AS id
FROM generate_series(1, 5) AS g;
SELECT set_eq(
    format($$SELECT c.id FROM pgq.claim(%L, ARRAY['b'], 3) AS c$$, pg_temp.wid('w1')),
    $$SELECT unnest(ARRAY[pg_temp.jid('batch5'), pg_temp.jid('batch4'), pg_temp.jid('batch3')])$$,
    'a batch takes the batch_size best jobs'
);
SELECT set_eq(
    format($$SELECT c.id FROM pgq.claim(%L, ARRAY['b'], 10000) AS c$$, pg_temp.wid('w2')),
    $$SELECT unnest(ARRAY[pg_temp.jid('batch2'), pg_temp.jid('batch1')])$$,
    'a larger batch takes what is left (batch_size 10000 is accepted)'
);
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j INNER JOIN t_job AS t ON j.id = t.id WHERE t.label LIKE 'batch_' AND j.status = 'running'),
    5::bigint,
    'every batch job is running exactly once'
);

-- Only entrypoints asked for; dead jobs are never claimed.
INSERT INTO t_job VALUES ('other_ep', pgq.enqueue('c'));
SELECT is_empty(
    format($$SELECT * FROM pgq.claim(%L, ARRAY['a', 'b'])$$, pg_temp.wid('w1')),
    'jobs of other entrypoints are not claimed'
);
UPDATE pgq._jobs SET status = 'dead' WHERE id = pg_temp.jid('other_ep');
SELECT is_empty(
    format($$SELECT * FROM pgq.claim(%L, ARRAY['c'])$$, pg_temp.wid('w1')),
    'a dead job is not claimed'
);
UPDATE pgq._jobs SET status = 'queued' WHERE id = pg_temp.jid('other_ep');
INSERT INTO t_job VALUES ('wt_parent', pgq.enqueue('wt', run_at => now() + interval '1 hour'));
INSERT INTO t_job VALUES ('wt_child', pgq.enqueue('wt', priority => 9, depends_on => ARRAY[pg_temp.jid('wt_parent')]));
UPDATE pgq._jobs SET run_at = now() - interval '1 minute' WHERE id = pg_temp.jid('wt_child');
SELECT is_empty(
    format($$SELECT * FROM pgq.claim(%L, ARRAY['wt'], 10)$$, pg_temp.wid('wr')),
    'a waiting job is never claimed, however high its priority and however due'
);
SELECT throws_ok(
    format($$SELECT * FROM pgq.claim(%L, ARRAY['d'])$$, pg_temp.wid('w2')), 'PQ001', NULL,
    'claiming an entrypoint the worker did not register raises PQ001'
);

-- Pause.
SELECT lives_ok($$SELECT pgq.pause('c')$$, 'entrypoint c is paused');
SELECT is_empty(
    format($$SELECT * FROM pgq.claim(%L, ARRAY['c'])$$, pg_temp.wid('w1')),
    'a paused entrypoint is skipped'
);
SELECT lives_ok($$SELECT pgq.resume('c')$$, 'entrypoint c is resumed');
SELECT is(
    (SELECT c.id FROM pgq.claim(pg_temp.wid('w1'), ARRAY['c']) AS c),
    pg_temp.jid('other_ep'),
    'after resume the entrypoint is claimed again'
);

-- Concurrency limit: at most 2 running across all workers.
SELECT lives_ok($$SELECT pgq.configure('c', concurrency => 2)$$, 'entrypoint c gets concurrency 2');
INSERT INTO t_job (label, id)
SELECT
    'conc' || g AS label,
    pgq.enqueue('c') AS id
FROM generate_series(1, 5) AS g;
SELECT is(
    (SELECT count(*) FROM pgq.claim(pg_temp.wid('w1'), ARRAY['c'], 10)),
    1::bigint,
    'with one job already running, concurrency 2 allows one more'
);
SELECT is_empty(
    format($$SELECT * FROM pgq.claim(%L, ARRAY['c'], 10)$$, pg_temp.wid('w2')),
    'at the limit another worker claims nothing'
);
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.entrypoint = 'c' AND j.status = 'running'),
    2::bigint,
    'never more than 2 running'
);
SELECT is(
    (SELECT count(*) FROM pgq.complete(pg_temp.wid('w1'), ARRAY[pg_temp.jid('other_ep')])),
    1::bigint,
    'one running job completes'
);
SELECT is(
    (SELECT count(*) FROM pgq.claim(pg_temp.wid('w2'), ARRAY['c'], 10)),
    1::bigint,
    'a completed job frees one slot'
);
SELECT is(
    (SELECT count(*) FROM pgq.claim(pg_temp.wid('w2'), ARRAY['a', 'c'], 10)),
    0::bigint,
    'the limit also holds when other entrypoints are claimed along'
);
SELECT lives_ok($$SELECT pgq.configure('c', concurrency => 0)$$, 'entrypoint c loses its limit');
SELECT is(
    (SELECT count(*) FROM pgq.claim(pg_temp.wid('w2'), ARRAY['c'], 10)),
    3::bigint,
    'concurrency => 0 removes the limit'
);

-- Rate limits: a token bucket per entrypoint, refilled at rate per second up to
-- max(1, rate/10) tokens; a claim takes at most the whole tokens in it.
SELECT lives_ok($$SELECT pgq.configure('r5', rate => 5)$$, 'entrypoint r5 gets rate 5');
SELECT is(
    (SELECT count(*) FROM pgq.enqueue_batch('r5', array_fill('{}'::jsonb, ARRAY[20]))), 20::bigint, '20 r5 jobs are queued'
);
SELECT is(
    (SELECT count(*) FROM pgq.claim(pg_temp.wid('wr'), ARRAY['r5'], 10)),
    1::bigint,
    'rate 5: the first claim of 10 gets 1 job (a full bucket holds max(1, 5/10) = 1 token)'
);
SELECT ok(
    (SELECT q.rate_tokens >= 0 AND q.rate_tokens < 0.5 FROM pgq._queues AS q WHERE q.entrypoint = 'r5'),
    'the claimed job spent the token'
);
SELECT is(
    (SELECT count(*) FROM pgq.claim(pg_temp.wid('wr'), ARRAY['r5'], 10)),
    0::bigint,
    'an immediate second claim gets none'
);
-- A claim spends tokens only for the jobs it claimed itself, even when earlier claims of
-- the same transaction took some.
SELECT ok(
    (SELECT q.rate_tokens >= 0 FROM pgq._queues AS q WHERE q.entrypoint = 'r5'),
    'a claim that got nothing spends no token'
);
UPDATE pgq._queues SET rate_refilled_at = rate_refilled_at - interval '1 second' WHERE entrypoint = 'r5';
SELECT is(
    (SELECT count(*) FROM pgq.claim(pg_temp.wid('wr'), ARRAY['r5'], 10)),
    1::bigint,
    'one second later (5 tokens refilled) the claim gets 1 again: the bucket caps at 1'
);
UPDATE pgq._queues SET rate_refilled_at = rate_refilled_at - interval '1 hour' WHERE entrypoint = 'r5';
SELECT is(
    (SELECT count(*) FROM pgq.claim(pg_temp.wid('wr'), ARRAY['r5'], 10)),
    1::bigint,
    'after an hour idle the bucket still holds 1 token'
);
-- An empty bucket gives an empty set, never a negative LIMIT.
SELECT is(
    pg_temp.try(format($$SELECT count(*) FROM pgq.claim(%L, ARRAY['r5'], 10)$$, pg_temp.wid('wr'))),
    '0',
    'a claim right after the bucket was emptied gets none, and does not raise'
);
SELECT lives_ok($$SELECT pgq.configure('r100', rate => 100)$$, 'entrypoint r100 gets rate 100');
SELECT is(
    (SELECT count(*) FROM pgq.enqueue_batch('r100', array_fill('{}'::jsonb, ARRAY[50]))), 50::bigint,
    '50 r100 jobs are queued'
);
SELECT is(
    (SELECT count(*) FROM pgq.claim(pg_temp.wid('wr'), ARRAY['r100'], 20)),
    10::bigint,
    'rate 100: a batch of 20 gets 10 (a full bucket holds 100/10 = 10 tokens)'
);
-- A token refills every 10 ms at rate 100: a busy machine may take that long between the
-- two claims (r5 above checks "none" with 200 ms to spare).
SELECT cmp_ok(
    (SELECT count(*) FROM pgq.claim(pg_temp.wid('wr'), ARRAY['r100'], 10)),
    '<=',
    1::bigint,
    'rate 100: an immediate second claim gets what refilled since, not a new bucket'
);
SELECT lives_ok($$SELECT pgq.configure('r100', rate => 100)$$, 'the rate of r100 is set again');
SELECT is(
    (SELECT count(*) FROM pgq.claim(pg_temp.wid('wr'), ARRAY['r100'], 20)),
    10::bigint,
    'a rate set again starts with a full bucket'
);
SELECT lives_ok($$SELECT pgq.configure('rboth', rate => 100, concurrency => 2)$$, 'rboth gets rate 100 and concurrency 2');
SELECT is(
    (SELECT count(*) FROM pgq.enqueue_batch('rboth', array_fill('{}'::jsonb, ARRAY[10]))), 10::bigint,
    '10 rboth jobs are queued'
);
SELECT is(
    (SELECT count(*) FROM pgq.claim(pg_temp.wid('wr'), ARRAY['rboth'], 10)),
    2::bigint,
    'with both limits, the stricter one applies'
);
SELECT lives_ok($$SELECT pgq.configure('r5', rate => 0)$$, 'r5 loses its rate limit');
SELECT is(
    (SELECT count(*) FROM pgq.claim(pg_temp.wid('wr'), ARRAY['r5'], 10)),
    10::bigint,
    'rate => 0 removes the limit'
);
-- Limits are decided under a row lock on the entrypoint's pgq._queues row; an entrypoint
-- without rate or concurrency takes no lock there (many workers claim it without queueing on
-- one row). Row locks are not listed in pg_locks: a row this transaction locked has its
-- xmax set to this transaction (its xmin here, as configure wrote the row in it).
SELECT lives_ok($$SELECT pgq.configure('plain_cfg', max_attempts => 3)$$, 'plain_cfg is configured without limits');
SELECT is(pgq.enqueue('plain_cfg') > 0, TRUE, 'a plain_cfg job is queued');
SELECT is(
    (SELECT count(*) FROM pgq.claim(pg_temp.wid('wr'), ARRAY['plain_cfg', 'rboth'], 10)),
    1::bigint,
    'plain_cfg and rboth are claimed together: the plain_cfg job (rboth is at its concurrency)'
);
SELECT results_eq(
    $$
        SELECT q.entrypoint, q.xmax = q.xmin, q.xmax::text = '0'
        FROM pgq._queues AS q WHERE q.entrypoint IN ('plain_cfg', 'rboth') ORDER BY q.entrypoint
    $$,
    $$ VALUES ('plain_cfg', FALSE, TRUE), ('rboth', TRUE, FALSE) $$,
    'the limited entrypoint''s row was locked, the one without limits was not'
);

-- deliveries counts every claim; attempt counts failures.
INSERT INTO t_job VALUES ('redeliver', pgq.enqueue('d'));
SELECT is(
    (SELECT c.deliveries FROM pgq.claim(pg_temp.wid('w1'), ARRAY['d']) AS c),
    1,
    'first claim: deliveries 1'
);
SELECT is(pgq.fail(pg_temp.wid('w1'), pg_temp.jid('redeliver'), 'oops', retry_in => '0'), 'queued', 'the job fails');
SELECT results_eq(
    format($$SELECT c.id, c.attempt, c.deliveries FROM pgq.claim(%L, ARRAY['d']) AS c$$, pg_temp.wid('w1')),
    $$SELECT pg_temp.jid('redeliver'), 1, 2$$,
    'second claim: attempt 1, deliveries 2'
);

-- A duplicated entrypoint in the array does not shrink the batch.
INSERT INTO t_job (label, id)
SELECT
    'dup' || g AS label,
    pgq.enqueue('d') AS id
FROM generate_series(1, 3) AS g;
SELECT is(
    (SELECT count(*) FROM pgq.claim(pg_temp.wid('w1'), ARRAY['d', 'd'], 2)),
    2::bigint,
    'ARRAY[''d'', ''d''] with batch_size 2 and 3 due jobs claims 2'
);

-- Bad input: PQ001, PQ002, PQ003; nothing claimed.
CREATE TEMP TABLE t_before AS SELECT count(*) AS n FROM pgq._jobs AS j WHERE j.status = 'running';
INSERT INTO t_job (label, id)
SELECT
    'bad' || g AS label,
    pgq.enqueue('a') AS id
FROM generate_series(1, 3) AS g;

SELECT throws_ok(
    format($$SELECT * FROM pgq.claim(%L, ARRAY['a'], 0)$$, pg_temp.wid('w1')), 'PQ001', NULL,
    'batch_size 0 raises PQ001'
);
SELECT throws_ok(
    format($$SELECT * FROM pgq.claim(%L, ARRAY['a'], 10001)$$, pg_temp.wid('w1')), 'PQ001', NULL,
    'batch_size 10001 raises PQ001'
);
SELECT throws_ok(
    format($$SELECT * FROM pgq.claim(%L, ARRAY['a'], -1)$$, pg_temp.wid('w1')), 'PQ001', NULL,
    'batch_size -1 raises PQ001'
);
SELECT throws_ok(
    format($$SELECT * FROM pgq.claim(%L, ARRAY['a'], NULL)$$, pg_temp.wid('w1')), 'PQ001', NULL,
    'batch_size NULL raises PQ001'
);
SELECT throws_ok(
    format($$SELECT * FROM pgq.claim(%L, NULL)$$, pg_temp.wid('w1')), 'PQ001', NULL,
    'entrypoints NULL raises PQ001'
);
SELECT throws_ok(
    format($$SELECT * FROM pgq.claim(%L, '{}')$$, pg_temp.wid('w1')), 'PQ001', NULL,
    'empty entrypoints raise PQ001'
);
SELECT throws_ok(
    format($$SELECT * FROM pgq.claim(%L, ARRAY['a', NULL])$$, pg_temp.wid('w1')), 'PQ001', NULL,
    'entrypoints containing NULL raise PQ001'
);
SELECT throws_ok(
    format($$SELECT * FROM pgq.claim(%L, ARRAY[''])$$, pg_temp.wid('w1')), 'PQ001', NULL,
    'an empty entrypoint raises PQ001'
);
SELECT throws_ok(
    format($$SELECT * FROM pgq.claim(%L, ARRAY[E'a\n'])$$, pg_temp.wid('w1')), 'PQ001', NULL,
    'an entrypoint with a control character raises PQ001'
);
SELECT throws_ok(
    format($$SELECT * FROM pgq.claim(%L, ARRAY['a'], 1, protocol => 3)$$, pg_temp.wid('w1')), 'PQ001',
    'pgq: invalid argument protocol: 3 is not a claim protocol',
    'an unknown protocol raises PQ001 naming protocol'
);
SELECT throws_ok(
    format($$SELECT * FROM pgq.claim(%L, ARRAY['a'], 1, protocol => NULL)$$, pg_temp.wid('w1')), 'PQ001', NULL,
    'protocol NULL raises PQ001'
);
SELECT throws_ok(
    format($$SELECT * FROM pgq.claim(%L, ARRAY['a'], 0, protocol => 2)$$, pg_temp.wid('w1')), 'PQ001', NULL,
    'the protocol form checks batch_size too'
);
SELECT throws_ok($$SELECT * FROM pgq.claim(NULL, ARRAY['a'])$$, 'PQ001', NULL, 'worker_id NULL raises PQ001');
SELECT throws_ok(
    $$SELECT * FROM pgq.claim('00000000-0000-0000-0000-000000000000', ARRAY['a'])$$, 'PQ002', NULL,
    'an unknown worker_id raises PQ002'
);
INSERT INTO t_worker VALUES ('gone', pgq.register_worker('gone', ARRAY['a']));
UPDATE pgq._workers SET heartbeat_at = now() - interval '1 hour' WHERE id = pg_temp.wid('gone');
SELECT is(pgq.reap(), 0, 'the sweep marks the silent worker dead (it held no jobs)');
SELECT throws_ok(
    format($$SELECT * FROM pgq.claim(%L, ARRAY['a'])$$, pg_temp.wid('gone')), 'PQ003', NULL,
    'a reaped worker raises PQ003'
);
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.status = 'running'),
    (SELECT b.n FROM t_before AS b),
    'the failed calls claimed nothing'
);

-- The two forms are one claim: the 0.1.0 form returns its columns of the same jobs.
INSERT INTO t_job (label, id) VALUES ('form1', pgq.enqueue('a', '{"f": 1}', priority => 100));
INSERT INTO t_job (label, id) VALUES ('form2', pgq.enqueue('a', '{"f": 2}', priority => 99, concurrency_key => 'k'));
SELECT results_eq(
    format($$SELECT c.id, c.payload, c.deliveries FROM pgq.claim(%L, ARRAY['a']) AS c$$, pg_temp.wid('w1')),
    format($$VALUES (%s::bigint, '{"f": 1}'::jsonb, 1)$$, pg_temp.jid('form1')),
    'the 0.1.0 form claims the next job'
);
SELECT results_eq(
    format(
        $$SELECT c.id, c.payload, c.deliveries, c.concurrency_key FROM pgq.claim(%L, ARRAY['a'], 1, protocol => 2) AS c$$,
        pg_temp.wid('w1')
    ),
    format($$VALUES (%s::bigint, '{"f": 2}'::jsonb, 1, 'k')$$, pg_temp.jid('form2')),
    'protocol 2 claims the next one, with its concurrency_key'
);

-- Privileges.
SET ROLE pgq_producer;
SELECT throws_ok(
    format($$SELECT * FROM pgq.claim(%L, ARRAY['a'])$$, pg_temp.wid('w1')), '42501', NULL,
    'pgq_producer cannot claim'
);
RESET ROLE;
SET ROLE pgq_worker;
SELECT is(
    (SELECT count(*) FROM pgq.claim(pg_temp.wid('w1'), ARRAY['a'], 10)),
    3::bigint,
    'pgq_worker can claim'
);
RESET ROLE;

-- The claim's index: at 100k+ queued rows the per-entrypoint claim query (the LATERAL
-- subquery of pgq.claim, here from the front: no mark) walks _jobs_claim_idx in claim
-- order, without a sort.
CREATE FUNCTION pg_temp.plan_of(query text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_line text;
    v_plan text := '';
BEGIN
    FOR v_line IN EXECUTE 'EXPLAIN ' || query LOOP
        v_plan := v_plan || v_line || E'\n';
    END LOOP;
    RETURN v_plan;
END
$$;
SELECT is(
    (SELECT count(*) FROM pgq.enqueue_batch('bulk', array_fill('{}'::jsonb, ARRAY[100000]))),
    100000::bigint,
    '100000 jobs are queued for the plan check'
);
SELECT is(
    (SELECT count(*) FROM pgq.enqueue_batch('bulk_other', array_fill('{}'::jsonb, ARRAY[20000]))),
    20000::bigint,
    '20000 jobs of another entrypoint are queued'
);
ANALYZE pgq._jobs;
CREATE TEMP TABLE t_plan AS
SELECT pg_temp.plan_of(
    $$
        SELECT j.id, j.priority, j.run_at
        FROM pgq._jobs AS j
        WHERE j.entrypoint = 'bulk' AND j.status = 'queued' AND j.run_at <= now()
          AND ROW(-j.priority::bigint, j.run_at, j.id) >= ROW(-2147483648::bigint, '-infinity'::timestamptz, 0::bigint)
        ORDER BY -j.priority::bigint, j.run_at, j.id
        LIMIT 100
        FOR UPDATE SKIP LOCKED
    $$
) AS plan;
SELECT matches((SELECT p.plan FROM t_plan AS p), '_jobs_default_claim_idx', 'the claim query uses the claim index');
SELECT doesnt_match((SELECT p.plan FROM t_plan AS p), 'Sort', 'the claim query needs no sort');
SELECT doesnt_match((SELECT p.plan FROM t_plan AS p), 'Seq Scan', 'the claim query scans no table');
SELECT is(
    (SELECT count(*) FROM pgq.claim(pg_temp.wid('w1'), ARRAY['bulk'], 100)),
    100::bigint,
    'a batch of 100 is claimed from 100000 queued jobs'
);

SELECT * FROM finish();
ROLLBACK;
