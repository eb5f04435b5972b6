-- pgq.retry: dead jobs go back to queued now, with attempt, the count of lost deliveries
-- (see max_deliveries) and the count of snoozes (see max_snoozes) reset to 0. A dead job whose
-- dedupe_key is taken by a live job stays dead (retrying it would duplicate work); of
-- several dead jobs with one dedupe_key, only the newest is retried.
-- Other ids are ignored. Returns the number of jobs re-queued. Raises PQ001.
CREATE OR REPLACE FUNCTION pgq.retry(job_ids bigint[])
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty):
-- tests/py/sql/test_empty_queue_plans.py says why; JIT off, which that cost would start.
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_count integer := 0;
    v_job record;
BEGIN
    PERFORM pgq._check_ids('job_ids', job_ids);
    FOR v_job IN
        -- One per dedupe_key; a job without a key is its own group (by id, never mixed up
        -- with a key that happens to spell an id).
        SELECT DISTINCT ON (d.entrypoint, d.dedupe_key, CASE WHEN d.dedupe_key IS NULL THEN d.id END)
            d.id, d.entrypoint
        FROM pgq._jobs AS d
        WHERE d.id = ANY (job_ids) AND d.status = 'dead'
        ORDER BY d.entrypoint, d.dedupe_key, CASE WHEN d.dedupe_key IS NULL THEN d.id END, d.id DESC
    LOOP
        -- A live job may take the dedupe_key at any moment, even one enqueued concurrently:
        -- the unique index decides, and the loser stays dead.
        BEGIN
            UPDATE pgq._jobs AS j
            SET status = 'queued', attempt = 0, lost = 0, snoozes = 0, run_at = now(), delivery_reason = 'retry'
            WHERE j.id = v_job.id AND j.status = 'dead';
            IF FOUND THEN
                v_count := v_count + 1;
                PERFORM pg_notify('pgq', v_job.entrypoint);
            END IF;
        EXCEPTION WHEN unique_violation THEN
            NULL;
        END;
    END LOOP;
    RETURN v_count;
END
$$;

COMMENT ON FUNCTION pgq.retry(bigint[]) IS
'Re-queue dead jobs now with attempts reset; returns how many.';
