-- pgq.claim with concurrency keys: rotation among keys within a priority (a big key does
-- not delay a small one), priority first across priorities, the key cursor, key_concurrency
-- (per-key FIFO with 1), jobs without a key, the key in the claim's rows and pgq.jobs;
-- enqueue, enqueue_batch and the trigger with keys; validation (PQ001); the key kept in
-- the outcome log (every way a job leaves an outcome row) and in pgq.job of finished jobs.
BEGIN;
SELECT plan(38);

SELECT pgq.register_worker('w', ARRAY['ka', 'kb', 'kc', 'kd', 'plain', 'kshare', 'kprio']) AS w \gset

-- 30 jobs of 'big', then 3 of 'small': with batch 1, the small key's jobs come every
-- second claim.
SELECT count(pgq.enqueue('ka', jsonb_build_object('n', g), concurrency_key => 'big')) FROM generate_series(1, 30) AS g;
SELECT count(pgq.enqueue('ka', jsonb_build_object('n', g), concurrency_key => 'small')) FROM generate_series(1, 3) AS g;
CREATE FUNCTION pg_temp.claim_keys(worker uuid, ep text, n integer) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    v_keys text[] := '{}';
BEGIN
    FOR i IN 1..n LOOP
        v_keys := v_keys || (SELECT c.concurrency_key FROM pgq.claim(worker, ARRAY[ep], 1, protocol => 2) AS c);
    END LOOP;
    RETURN v_keys;
END
$$;
SELECT is(
    pg_temp.claim_keys(:'w', 'ka', 6),
    ARRAY['big', 'small', 'big', 'small', 'big', 'small'],
    'claims of one at a time rotate between the keys'
);
SELECT is(
    (
        SELECT array_agg((j.payload ->> 'n')::integer ORDER BY j.id) FROM pgq._jobs AS j
        WHERE j.entrypoint = 'ka' AND j.status = 'running' AND j.concurrency_key = 'big'
    ),
    ARRAY[1, 2, 3],
    'within a key, the oldest jobs first'
);
SELECT is(
    (SELECT q.key_cursor FROM pgq._queues AS q WHERE q.entrypoint = 'ka'),
    'small',
    'the key cursor is the key the last claim ended on'
);
SELECT is(
    (SELECT array_agg(c.concurrency_key ORDER BY c.id) FROM pgq.claim(:'w', ARRAY['ka'], 4, protocol => 2) AS c),
    ARRAY['big', 'big', 'big', 'big'],
    'once a key is drained the others take every turn'
);

-- A batch takes each key's first job before any key's second.
SELECT count(pgq.enqueue('kb', NULL, concurrency_key => k)) FROM unnest(ARRAY['x', 'x', 'x', 'y', 'z']) AS k;
SELECT is(
    (SELECT array_agg(c.concurrency_key ORDER BY c.concurrency_key) FROM pgq.claim(:'w', ARRAY['kb'], 3, protocol => 2) AS c),
    ARRAY['x', 'y', 'z'],
    'a batch of 3 takes one job of each of 3 keys'
);

-- Priority still wins across priorities.
SELECT count(pgq.enqueue('kc', NULL, concurrency_key => 'low')) FROM generate_series(1, 3);
SELECT pgq.enqueue('kc', NULL, priority => 5, concurrency_key => 'high') AS high \gset
SELECT is(
    (SELECT c.id FROM pgq.claim(:'w', ARRAY['kc']) AS c),
    :'high'::bigint,
    'a higher priority job comes first, whatever its key'
);
SELECT is(
    (SELECT array_agg(c.priority) FROM pgq.claim(:'w', ARRAY['kc'], 10) AS c),
    ARRAY[0, 0, 0],
    'then the lower priority'
);

-- key_concurrency: at most N running per key; 1 runs a key's jobs one at a time, in order.
SELECT pgq.configure('kd', key_concurrency => 1);
SELECT count(pgq.enqueue('kd', jsonb_build_object('n', g), concurrency_key => 'k1')) FROM generate_series(1, 3) AS g;
SELECT count(pgq.enqueue('kd', jsonb_build_object('n', g), concurrency_key => 'k2')) FROM generate_series(1, 2) AS g;
SELECT pgq.enqueue('kd', '{"free": true}') AS free \gset
CREATE TEMP TABLE t_first AS SELECT * FROM pgq.claim(:'w', ARRAY['kd'], 10, protocol => 2);
SELECT is(
    (SELECT count(*) FROM t_first WHERE concurrency_key = 'k1'), 1::bigint, 'key_concurrency 1: one job of k1'
);
SELECT is(
    (SELECT count(*) FROM t_first WHERE concurrency_key = 'k2'), 1::bigint, 'key_concurrency 1: one job of k2'
);
SELECT ok(
    (SELECT count(*) FROM t_first WHERE concurrency_key IS NULL) = 1,
    'a job without a key is not limited by key_concurrency'
);
SELECT is(
    (SELECT count(*) FROM pgq.claim(:'w', ARRAY['kd'], 10)), 0::bigint,
    'nothing more while each key runs its job'
);
SELECT is(
    (SELECT array_agg(c) FROM pgq.complete(:'w', array(SELECT t.id FROM t_first AS t WHERE t.concurrency_key = 'k1')) AS c),
    array(SELECT t.id FROM t_first AS t WHERE t.concurrency_key = 'k1'),
    'k1''s job completes'
);
SELECT is(
    (SELECT array_agg(c.payload ->> 'n') FROM pgq.claim(:'w', ARRAY['kd'], 10) AS c),
    ARRAY['2'],
    'then k1''s next job, in order, and nothing of k2'
);
SELECT pgq.configure('kd', key_concurrency => 0);
SELECT is(
    (SELECT count(*) FROM pgq.claim(:'w', ARRAY['kd'], 10)), 2::bigint,
    'key_concurrency 0 removes the limit'
);

-- Entrypoints without keyed jobs are not marked: their claims take the plain path.
SELECT pgq.enqueue('plain', NULL);
SELECT is(
    (SELECT coalesce(bool_or(q.keyed), FALSE) FROM pgq._queues AS q WHERE q.entrypoint = 'plain'),
    FALSE,
    'an entrypoint without keyed jobs is not keyed'
);
SELECT is(
    (SELECT array_agg(q.entrypoint ORDER BY q.entrypoint) FROM pgq._queues AS q WHERE q.keyed),
    ARRAY['ka', 'kb', 'kc', 'kd'],
    'a keyed enqueue marks its entrypoint'
);

-- The key is visible.
SELECT pgq.enqueue('kv', NULL, concurrency_key => 'customer:42') AS kv \gset
SELECT is((SELECT j.concurrency_key FROM pgq.jobs AS j WHERE j.id = :kv), 'customer:42', 'pgq.jobs shows the key');
SELECT is(pgq.job(:kv) ->> 'concurrency_key', 'customer:42', 'pgq.job shows the key');

-- enqueue_batch: one key per payload.
SELECT count(*) FROM pgq.enqueue_batch('kbatch', ARRAY['1', '2', '3']::jsonb[], concurrency_keys => ARRAY['a', NULL, 'b']);
SELECT is(
    (SELECT array_agg(j.concurrency_key ORDER BY j.id) FROM pgq._jobs AS j WHERE j.entrypoint = 'kbatch'),
    ARRAY['a', NULL, 'b'],
    'enqueue_batch stores one key per payload'
);
SELECT throws_ok(
    $$SELECT pgq.enqueue_batch('kbatch', ARRAY['1', '2']::jsonb[], concurrency_keys => ARRAY['a'])$$,
    'PQ001', 'pgq: invalid argument concurrency_keys: must have one element per payload',
    'enqueue_batch with fewer keys than payloads raises PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.enqueue_batch('kbatch', ARRAY['1', '2']::jsonb[], concurrency_keys => ARRAY['a', ''])$$,
    'PQ001', 'pgq: invalid argument concurrency_keys[2]: must be 1 to 1000 bytes long',
    'an empty key in a batch raises PQ001 naming its position'
);
SELECT throws_ok(
    $$SELECT pgq.enqueue('kv', NULL, concurrency_key => '')$$,
    'PQ001', 'pgq: invalid argument concurrency_key: must be 1 to 1000 bytes long',
    'an empty key raises PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.configure('kv', key_concurrency => -1)$$,
    'PQ001', 'pgq: invalid argument key_concurrency: -1 is out of range',
    'a negative key_concurrency raises PQ001'
);

-- The trigger: argument 3 names the column whose value is the key.
CREATE TEMP TABLE t_orders (id integer, customer text);
CREATE TRIGGER t_orders_pgq AFTER INSERT ON t_orders
FOR EACH ROW EXECUTE FUNCTION pgq.enqueue_trigger('ktrig', '0', 'customer');
INSERT INTO t_orders VALUES (1, 'acme'), (2, NULL);
SELECT is(
    (SELECT array_agg(j.concurrency_key ORDER BY j.id) FROM pgq._jobs AS j WHERE j.entrypoint = 'ktrig'),
    ARRAY['acme', NULL],
    'the trigger takes the key from the named column (NULL: no key)'
);

-- The outcome log keeps the key: one job per way out, each with its own key, one at a time.
SELECT pgq.register_worker('wo', ARRAY['kout']) AS wo \gset
CREATE FUNCTION pg_temp.outcome_keys(key text) RETURNS text[]
LANGUAGE sql AS $$
    SELECT array_agg(o.outcome ORDER BY o.outcome) FROM pgq.outcomes AS o WHERE o.concurrency_key = key
$$;
SELECT pgq.enqueue('kout', NULL, concurrency_key => 'k-ok') AS ok \gset
SELECT count(*) FROM pgq.claim(:'wo', ARRAY['kout']);
SELECT count(*) FROM pgq.complete(:'wo', ARRAY[:'ok'::bigint]);
SELECT is(pg_temp.outcome_keys('k-ok'), ARRAY['succeeded'], 'a succeeded job''s outcome row has its key');
SELECT is(pgq.job(:'ok') ->> 'concurrency_key', 'k-ok', 'pgq.job of a succeeded job shows its key');

SELECT pgq.enqueue('kout', NULL, max_attempts => 1, concurrency_key => 'k-dead') AS dead \gset
SELECT count(*) FROM pgq.claim(:'wo', ARRAY['kout']);
SELECT pgq.fail(:'wo', :'dead', 'boom');
SELECT pgq.cancel(ARRAY[:'dead'::bigint]);
SELECT is(pg_temp.outcome_keys('k-dead'), ARRAY['dead', 'failed'], 'a dead job''s failed and dead rows have its key');
SELECT is(pgq.job(:'dead') ->> 'concurrency_key', 'k-dead', 'pgq.job of a discarded dead job shows its key');

SELECT pgq.enqueue('kout', NULL, run_at => now() + interval '1 hour', concurrency_key => 'k-cancel') AS parent \gset
SELECT pgq.enqueue('kout', NULL, depends_on => ARRAY[:'parent'::bigint], concurrency_key => 'k-dependent') AS dependent \gset
SELECT pgq.cancel(ARRAY[:'parent'::bigint]);
SELECT is(pg_temp.outcome_keys('k-cancel'), ARRAY['canceled'], 'a canceled job''s outcome row has its key');
SELECT is(pgq.job(:'parent') ->> 'concurrency_key', 'k-cancel', 'pgq.job of a canceled job shows its key');
SELECT is(pg_temp.outcome_keys('k-dependent'), ARRAY['canceled'], 'a dependent canceled with its dependency keeps its key');
SELECT pgq.enqueue('kout', NULL, depends_on => ARRAY[:'parent'::bigint], concurrency_key => 'k-born') AS born \gset
SELECT is(pg_temp.outcome_keys('k-born'), ARRAY['canceled'], 'a job born canceled keeps its key');

SELECT pgq.enqueue('kout', NULL, concurrency_key => 'k-snooze') AS snoozed \gset
SELECT count(*) FROM pgq.claim(:'wo', ARRAY['kout']);
SELECT pgq.snooze(:'wo', :'snoozed', interval '1 hour');
SELECT is(pg_temp.outcome_keys('k-snooze'), ARRAY['snoozed'], 'a snoozed job''s outcome row has its key');

SELECT pgq.enqueue('kout', NULL, concurrency_key => 'k-fail-cancel') AS fc \gset
SELECT count(*) FROM pgq.claim(:'wo', ARRAY['kout']);
SELECT pgq.cancel(ARRAY[:'fc'::bigint]);
SELECT pgq.fail(:'wo', :'fc', 'stopped');
SELECT is(pg_temp.outcome_keys('k-fail-cancel'), ARRAY['canceled'], 'a running job canceled on failure keeps its key');

SELECT pgq.enqueue('kout', NULL, concurrency_key => 'k-lost-cancel') AS lc \gset
SELECT count(*) FROM pgq.claim(:'wo', ARRAY['kout']);
SELECT pgq.cancel(ARRAY[:'lc'::bigint]);
SELECT pgq._release(ARRAY[:'wo'::uuid]);
SELECT is(pg_temp.outcome_keys('k-lost-cancel'), ARRAY['canceled'], 'a job canceled when its worker was lost keeps its key');

SELECT pgq.configure('kout', max_deliveries => 1);
SELECT pgq.enqueue('kout', NULL, concurrency_key => 'k-poison') AS poison \gset
SELECT count(*) FROM pgq.claim(:'wo', ARRAY['kout']);
SELECT pgq._release(ARRAY[:'wo'::uuid], '{}', TRUE);
SELECT is(pg_temp.outcome_keys('k-poison'), ARRAY['failed'], 'a poison pill''s failed row has its key');

-- The claim first lets each key offer about its share of the batch; when a key it cut short
-- could have ranked within the batch, it offers everything again. Uneven keys: one key has
-- 50 jobs, two have 1: a batch of 10 still takes 10 (the big key fills the rest).
SELECT count(pgq.enqueue('kshare', NULL, concurrency_key => 'a')) FROM generate_series(1, 50);
SELECT pgq.enqueue('kshare', NULL, concurrency_key => k) FROM unnest(ARRAY['b', 'c']) AS k;
SELECT is(
    (SELECT array_agg(c.concurrency_key ORDER BY c.concurrency_key) FROM pgq.claim(:'w', ARRAY['kshare'], 10, protocol => 2) AS c),
    ARRAY['a', 'a', 'a', 'a', 'a', 'a', 'a', 'a', 'b', 'c'],
    'a key with more than its share fills the batch when the others have less'
);
-- A higher priority key with 20 jobs against nine keys of 5 at priority 0: priority first,
-- though each key's share of a batch of 10 is 2.
SELECT count(pgq.enqueue('kprio', NULL, priority => 5, concurrency_key => 'x')) FROM generate_series(1, 20);
SELECT count(pgq.enqueue('kprio', NULL, concurrency_key => 'y' || k)) FROM generate_series(1, 9) AS k,
    generate_series(1, 5);
SELECT is(
    (SELECT array_agg(DISTINCT c.concurrency_key) FROM pgq.claim(:'w', ARRAY['kprio'], 10, protocol => 2) AS c),
    ARRAY['x'],
    'the share never lets a lower priority in before a higher one'
);

SELECT * FROM finish();
ROLLBACK;
