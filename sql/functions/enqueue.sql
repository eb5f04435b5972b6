-- pgq.enqueue: add one job; joins the caller's transaction. It is pgq.enqueue_job returning
-- the id alone; call pgq.enqueue_job to learn whether the call created the job.
-- Parameters: entrypoint (required); payload; priority (higher runs first, default 0);
--   run_at (not before, default now); dedupe_key (a live job with the same entrypoint and
--   key is not duplicated: its id is returned); headers (a JSON object); max_attempts
--   (default: the entrypoint's setting); depends_on (ids of jobs that must succeed first:
--   the job is 'waiting' until they all have; if one ends dead or canceled, it is canceled);
--   concurrency_key (1-1000 bytes, e.g. 'customer:42': the entrypoint's claims rotate among
--   keys, and its key_concurrency limits the running jobs of one key; see pgq.claim);
--   dedupe_scope ('live', the default, or 'queued': until the job starts), dedupe_window
--   (also a success with the key within this interval counts) and dedupe_mode ('keep', the
--   default, or 'replace': a job not started yet takes the new payload, priority, run_at,
--   headers and max_attempts): see pgq.enqueue_job.
-- Returns the job id (of the new job, or of the job that stands for it). Raises PQ001 for
-- invalid arguments, PQ004 for an oversized payload, PQ007 (see pgq.enqueue_job).
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
    concurrency_key text DEFAULT NULL,
    dedupe_scope text DEFAULT NULL,
    dedupe_window interval DEFAULT NULL,
    dedupe_mode text DEFAULT NULL
)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id bigint;
    v_run_at timestamptz;
BEGIN
    -- The common call (no key, dependency or dedupe option) with arguments that pass every
    -- check of pgq._check_job inserts here, as pgq.enqueue_job would: the nested call and
    -- its checking functions cost about a quarter of an enqueue's server CPU. Anything else,
    -- an invalid argument included (it then raises exactly as before), goes through
    -- pgq.enqueue_job. This condition must stay the negation of _check_job's errors.
    IF (
        dedupe_key IS NULL AND depends_on IS NULL AND concurrency_key IS NULL
        AND dedupe_scope IS NULL AND dedupe_window IS NULL AND dedupe_mode IS NULL
        AND length(entrypoint) BETWEEN 1 AND 200 AND entrypoint = btrim(entrypoint)
        AND entrypoint !~ '[[:cntrl:]]'
        AND coalesce(pg_column_size(payload) <= 1048576, TRUE)
        AND coalesce(isfinite(run_at) OR run_at <= now(), TRUE)
        AND coalesce(jsonb_typeof(headers) = 'object' AND pg_column_size(headers) <= 65536, TRUE)
        AND coalesce(max_attempts BETWEEN 1 AND 1000, TRUE)
    ) THEN
        v_run_at := greatest(coalesce(run_at, now()), now());
        INSERT INTO pgq._jobs AS j (entrypoint, payload, priority, run_at, headers, max_attempts)
        VALUES (enqueue.entrypoint, enqueue.payload, coalesce(enqueue.priority, 0), v_run_at, enqueue.headers,
                enqueue.max_attempts)
        RETURNING j.id INTO v_id;
        IF v_run_at <= now() THEN
            PERFORM pg_notify('pgq', enqueue.entrypoint);
        END IF;
        RETURN v_id;
    END IF;
    RETURN (
        SELECT e.id
        FROM pgq.enqueue_job(
            entrypoint => enqueue.entrypoint,
            payload => enqueue.payload,
            priority => enqueue.priority,
            run_at => enqueue.run_at,
            dedupe_key => enqueue.dedupe_key,
            headers => enqueue.headers,
            max_attempts => enqueue.max_attempts,
            depends_on => enqueue.depends_on,
            concurrency_key => enqueue.concurrency_key,
            dedupe_scope => enqueue.dedupe_scope,
            dedupe_window => enqueue.dedupe_window,
            dedupe_mode => enqueue.dedupe_mode
        ) AS e
    );
END
$$;

COMMENT ON FUNCTION pgq.enqueue(
    text, jsonb, integer, timestamptz, text, jsonb, integer, bigint[], text, text, interval, text
) IS
'Enqueue one job in the current transaction; returns its id (or the id of the job with the same dedupe_key that stands for it).';
