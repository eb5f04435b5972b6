-- pgq._check_job(...): validation shared by pgq.enqueue and pgq.enqueue_batch.
-- Payloads are limited to 1 MiB in jsonb form (pg_column_size, before compression): a queue
-- row is read on every claim, and large blobs belong in a table the payload points to.
-- pgq.enqueue skips this call for arguments that pass it, tested by one condition that
-- mirrors these checks (and pgq._check_entrypoint's): a change here changes it too.
CREATE OR REPLACE FUNCTION pgq._check_job(
    entrypoint text,
    payload jsonb,
    run_at timestamptz,
    dedupe_key text,
    headers jsonb,
    max_attempts integer
)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pgq._check_entrypoint('entrypoint', entrypoint);
    IF pg_column_size(payload) > 1048576 THEN
        RAISE EXCEPTION 'pgq: payload is % bytes, over the 1 MiB limit', pg_column_size(payload)
            USING ERRCODE = 'PQ004', HINT = 'Store large data in a table and put its key in the payload.';
    END IF;
    IF run_at IS NOT NULL AND NOT isfinite(run_at) AND run_at > now() THEN
        PERFORM pgq._invalid('run_at', 'must not be infinity', 'Pass a finite time, or NULL for now.');
    END IF;
    -- In bytes: the key goes into a btree index with the entrypoint (at most 2704 bytes).
    IF dedupe_key IS NOT NULL AND (dedupe_key = '' OR octet_length(dedupe_key) > 1000) THEN
        PERFORM pgq._invalid('dedupe_key', 'must be 1 to 1000 bytes long',
            'Pass NULL for no deduplication.');
    END IF;
    IF headers IS NOT NULL AND jsonb_typeof(headers) <> 'object' THEN
        PERFORM pgq._invalid('headers', format('must be a JSON object, not %s', jsonb_typeof(headers)),
            'Pass e.g. ''{"trace_id": "abc"}''::jsonb, or NULL.');
    END IF;
    IF pg_column_size(headers) > 65536 THEN
        RAISE EXCEPTION 'pgq: headers are % bytes, over the 64 KiB limit', pg_column_size(headers)
            USING ERRCODE = 'PQ004', HINT = 'Headers are for small metadata; use the payload.';
    END IF;
    IF max_attempts IS NOT NULL AND (max_attempts < 1 OR max_attempts > 1000) THEN
        PERFORM pgq._invalid('max_attempts', format('%s is out of range', max_attempts),
            'Use 1 to 1000, or NULL for the entrypoint''s setting.');
    END IF;
END
$$;
