-- pgq._check_keys(name, keys, scalar): validates concurrency keys (pgq.enqueue passes one,
-- scalar, pgq.enqueue_batch an array); NULL elements are jobs without a key. A key is 1 to 1000
-- bytes: it goes into a btree index with the entrypoint.
CREATE OR REPLACE FUNCTION pgq._check_keys(name text, keys text[], scalar boolean DEFAULT FALSE)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_bad integer;
BEGIN
    SELECT k.ord INTO v_bad
    FROM unnest(keys) WITH ORDINALITY AS k (key, ord)
    WHERE k.key = '' OR octet_length(k.key) > 1000
    LIMIT 1;
    IF v_bad IS NOT NULL THEN
        PERFORM pgq._invalid(
            CASE WHEN scalar THEN name ELSE format('%s[%s]', name, v_bad) END,
            'must be 1 to 1000 bytes long', 'Pass NULL for a job without a concurrency key.');
    END IF;
END
$$;
