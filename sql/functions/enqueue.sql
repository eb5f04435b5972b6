-- pgq.enqueue: add one job; joins the caller's transaction.
-- Parameters: entrypoint (required); payload; priority (higher runs first, default 0);
--   run_at (not before, default now); dedupe_key (a live job with the same entrypoint and
--   key is not duplicated: its id is returned); headers (a JSON object); max_attempts
--   (default: the entrypoint's setting).
-- Returns the job id. Raises PQ001 for invalid arguments, PQ004 for an oversized payload.
-- Idle workers are woken by a NOTIFY on channel 'pgq' (payload: the entrypoint) at commit.
CREATE OR REPLACE FUNCTION pgq.enqueue(
    entrypoint text,
    payload jsonb DEFAULT NULL,
    priority integer DEFAULT 0,
    run_at timestamptz DEFAULT NULL,
    dedupe_key text DEFAULT NULL,
    headers jsonb DEFAULT NULL,
    max_attempts integer DEFAULT NULL
)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_id bigint;
    v_run_at timestamptz := greatest(coalesce(run_at, now()), now());
BEGIN
    PERFORM pgq._check_job(entrypoint, payload, run_at, dedupe_key, headers, max_attempts);
    LOOP
        INSERT INTO pgq._jobs AS j (entrypoint, payload, priority, run_at, dedupe_key, headers, max_attempts)
        VALUES (enqueue.entrypoint, enqueue.payload, coalesce(enqueue.priority, 0), v_run_at,
                enqueue.dedupe_key, enqueue.headers, enqueue.max_attempts)
        ON CONFLICT (entrypoint, dedupe_key) WHERE dedupe_key IS NOT NULL AND status <> 'dead'
        DO NOTHING
        RETURNING j.id INTO v_id;
        IF v_id IS NOT NULL THEN
            EXIT;
        END IF;
        -- A live job holds the key. It can finish between the two statements: then loop.
        SELECT j.id INTO v_id
        FROM pgq._jobs AS j
        WHERE j.entrypoint = enqueue.entrypoint
          AND j.dedupe_key = enqueue.dedupe_key
          AND j.status <> 'dead';
        IF v_id IS NOT NULL THEN
            RETURN v_id;
        END IF;
    END LOOP;
    IF v_run_at <= now() THEN
        PERFORM pg_notify('pgq', enqueue.entrypoint);
    END IF;
    RETURN v_id;
END
$$;

COMMENT ON FUNCTION pgq.enqueue(text, jsonb, integer, timestamptz, text, jsonb, integer) IS
'Enqueue one job in the current transaction; returns its id (or the id of the live job with the same dedupe_key).';
