-- pgq.enqueue_batch: many jobs of one entrypoint in one statement.
-- Parameters: entrypoint; payloads (one job per element, at most 100000; a NULL element
--   is a job with a NULL payload); priority; run_at; concurrency_keys (optional: one key
--   per payload, NULL elements for jobs without a key; see pgq.enqueue).
-- Returns the new job ids in the order of payloads. One NOTIFY per call, not per job.
-- Raises PQ001 for invalid arguments, PQ004 for an oversized payload.
CREATE OR REPLACE FUNCTION pgq.enqueue_batch(
    entrypoint text,
    payloads jsonb[],
    priority integer DEFAULT 0,
    run_at timestamptz DEFAULT NULL,
    concurrency_keys text[] DEFAULT NULL
)
RETURNS SETOF bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_run_at timestamptz := greatest(coalesce(run_at, now()), now());
    v_too_big integer;
BEGIN
    PERFORM pgq._check_job(entrypoint, NULL, run_at, NULL, NULL, NULL);
    IF payloads IS NULL THEN
        PERFORM pgq._invalid('payloads', 'must not be NULL', 'Pass an array of jsonb payloads.');
    ELSIF array_ndims(payloads) > 1 THEN
        PERFORM pgq._invalid('payloads', format('has %s dimensions', array_ndims(payloads)),
            'Pass a one-dimensional array of jsonb payloads.');
    ELSIF cardinality(payloads) > 100000 THEN
        PERFORM pgq._invalid('payloads', format('has %s elements', cardinality(payloads)),
            'At most 100000 jobs per call; split the batch.');
    END IF;
    IF concurrency_keys IS NOT NULL THEN
        IF array_ndims(concurrency_keys) > 1 OR cardinality(concurrency_keys) <> cardinality(payloads) THEN
            PERFORM pgq._invalid('concurrency_keys', 'must have one element per payload',
                'Pass NULL, or a one-dimensional array as long as payloads (NULL elements: no key).');
        END IF;
        PERFORM pgq._check_keys('concurrency_keys', concurrency_keys);
        IF EXISTS (SELECT 1 FROM unnest(concurrency_keys) AS k (key) WHERE k.key IS NOT NULL) THEN
            PERFORM pgq._mark_keyed(entrypoint);
        END IF;
    END IF;
    SELECT p.ord INTO v_too_big
    FROM unnest(payloads) WITH ORDINALITY AS p (payload, ord)
    WHERE pg_column_size(p.payload) > 1048576
    LIMIT 1;
    IF v_too_big IS NOT NULL THEN
        RAISE EXCEPTION 'pgq: payloads[%] is over the 1 MiB limit', v_too_big
            USING ERRCODE = 'PQ004', HINT = 'Store large data in a table and put its key in the payload.';
    END IF;
    -- Identity values follow the insertion order, which follows ord.
    RETURN QUERY
    WITH inserted AS (
        INSERT INTO pgq._jobs AS j (entrypoint, payload, priority, run_at, concurrency_key)
        SELECT enqueue_batch.entrypoint, p.payload, coalesce(enqueue_batch.priority, 0), v_run_at,
               concurrency_keys[array_lower(concurrency_keys, 1) + p.ord - 1]
        FROM unnest(payloads) WITH ORDINALITY AS p (payload, ord)
        ORDER BY p.ord
        RETURNING j.id
    )
    SELECT i.id FROM inserted AS i ORDER BY i.id;
    IF cardinality(payloads) > 0 AND v_run_at <= now() THEN
        PERFORM pg_notify('pgq', enqueue_batch.entrypoint);
    END IF;
END
$$;

COMMENT ON FUNCTION pgq.enqueue_batch(text, jsonb[], integer, timestamptz, text[]) IS
'Enqueue one job per payload in one statement; returns the ids in payload order.';
