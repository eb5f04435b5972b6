-- pgq.claim with concurrency keys: rotation among keys within a priority (a big key does
-- not delay a small one), priority first across priorities, the key cursor, key_concurrency
-- (per-key FIFO with 1), jobs without a key, the key in the claim's rows and pgq.jobs;
-- enqueue, enqueue_batch and the trigger with keys; validation (PQ001).
BEGIN;
SELECT plan(24);

SELECT pgq.register_worker('w', ARRAY['ka', 'kb', 'kc', 'kd', 'plain']) AS w \gset

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
        v_keys := v_keys || (SELECT c.concurrency_key FROM pgq.claim(worker, ARRAY[ep]) AS c);
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
    (SELECT array_agg(c.concurrency_key ORDER BY c.id) FROM pgq.claim(:'w', ARRAY['ka'], 4) AS c),
    ARRAY['big', 'big', 'big', 'big'],
    'once a key is drained the others take every turn'
);

-- A batch takes each key's first job before any key's second.
SELECT count(pgq.enqueue('kb', NULL, concurrency_key => k)) FROM unnest(ARRAY['x', 'x', 'x', 'y', 'z']) AS k;
SELECT is(
    (SELECT array_agg(c.concurrency_key ORDER BY c.concurrency_key) FROM pgq.claim(:'w', ARRAY['kb'], 3) AS c),
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
CREATE TEMP TABLE t_first AS SELECT * FROM pgq.claim(:'w', ARRAY['kd'], 10);
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

SELECT * FROM finish();
ROLLBACK;
