-- pgq.enqueue: add one job; joins the caller's transaction.
-- Parameters: entrypoint (required); payload; priority (higher runs first, default 0);
--   run_at (not before, default now); dedupe_key (a live job with the same entrypoint and
--   key is not duplicated: its id is returned); headers (a JSON object); max_attempts
--   (default: the entrypoint's setting); depends_on (ids of jobs that must succeed first:
--   the job is 'waiting' until they all have; if one ends dead or canceled, it is canceled);
--   concurrency_key (1-1000 bytes, e.g. 'customer:42': the entrypoint's claims rotate among
--   keys, and its key_concurrency limits the running jobs of one key; see pgq.claim).
-- Returns the job id. Raises PQ001 for invalid arguments, PQ004 for an oversized payload.
-- Idle workers are woken by a NOTIFY on channel 'pgq' (payload: the entrypoint) at commit.
CREATE OR REPLACE FUNCTION pgq.enqueue(
    entrypoint text,
    payload jsonb DEFAULT NULL,
    priority integer DEFAULT 0,
    run_at timestamptz DEFAULT NULL,
    dedupe_key text DEFAULT NULL,
    headers jsonb DEFAULT NULL,
    max_attempts integer DEFAULT NULL,
    depends_on bigint[] DEFAULT NULL,
    concurrency_key text DEFAULT NULL
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
    v_waits_for bigint[];
    v_failed text;
BEGIN
    PERFORM pgq._check_job(entrypoint, payload, run_at, dedupe_key, headers, max_attempts);
    IF concurrency_key IS NOT NULL THEN
        PERFORM pgq._check_keys('concurrency_key', ARRAY[concurrency_key], TRUE);
    END IF;
    IF depends_on IS NOT NULL THEN
        SELECT d.waits_for, d.failed INTO v_waits_for, v_failed FROM pgq._dependencies(depends_on) AS d;
        IF v_failed IS NOT NULL THEN
            -- A live job with the dedupe key stands for this one.
            SELECT j.id INTO v_id
            FROM pgq._jobs AS j
            WHERE j.entrypoint = enqueue.entrypoint AND j.dedupe_key = enqueue.dedupe_key AND j.status <> 'dead';
            IF v_id IS NOT NULL THEN
                RETURN v_id;
            END IF;
            -- Nothing to wait for: the job is born canceled, and says why.
            v_id := nextval(pg_get_serial_sequence('pgq._jobs', 'id'));
            INSERT INTO pgq._outcomes (
                job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, error,
                payload, headers, depends_on
            )
            VALUES (v_id, enqueue.entrypoint, 'canceled', coalesce(enqueue.priority, 0), 0, 0, now(), v_failed,
                    enqueue.payload, enqueue.headers, enqueue.depends_on);
            RETURN v_id;
        END IF;
    END IF;
    LOOP
        INSERT INTO pgq._jobs AS j (
            entrypoint, payload, priority, run_at, dedupe_key, headers, max_attempts, status, depends_on,
            concurrency_key
        )
        VALUES (enqueue.entrypoint, enqueue.payload, coalesce(enqueue.priority, 0), v_run_at,
                enqueue.dedupe_key, enqueue.headers, enqueue.max_attempts,
                CASE WHEN v_waits_for IS NULL THEN 'queued' ELSE 'waiting' END, v_waits_for,
                enqueue.concurrency_key)
        ON CONFLICT (entrypoint, dedupe_key) WHERE dedupe_key IS NOT NULL AND status <> 'dead'
        DO NOTHING
        RETURNING j.id INTO v_id;
        IF v_id IS NOT NULL THEN
            IF enqueue.concurrency_key IS NOT NULL THEN
                PERFORM pgq._mark_keyed(enqueue.entrypoint);
            END IF;
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
    IF v_run_at <= now() AND v_waits_for IS NULL THEN
        PERFORM pg_notify('pgq', enqueue.entrypoint);
    END IF;
    RETURN v_id;
END
$$;

COMMENT ON FUNCTION pgq.enqueue(text, jsonb, integer, timestamptz, text, jsonb, integer, bigint[], text) IS
'Enqueue one job in the current transaction; returns its id (or the id of the live job with the same dedupe_key).';
