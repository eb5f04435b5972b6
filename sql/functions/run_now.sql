-- pgq.run_now: queued jobs whose run_at is still ahead (scheduled with run_at, backing off
-- before their next attempt, snoozed) become due now: run_at = now(), nothing else changes
-- (attempt, deliveries and snoozes stay). The entrypoint's workers are notified. Jobs in
-- any other state, due jobs and unknown ids are ignored. The jobs are locked in id order,
-- as pgq.cancel and pgq.retry lock them.
-- Returns the number of jobs moved. Raises PQ001 for a NULL array, NULL elements or more
-- than 10000 ids.
CREATE OR REPLACE FUNCTION pgq.run_now(job_ids bigint[])
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
    v_count integer;
    v_entrypoints text[];
BEGIN
    PERFORM pgq._check_ids('job_ids', job_ids);
    PERFORM 1 FROM pgq._jobs AS j WHERE j.id = ANY (job_ids) ORDER BY j.id FOR UPDATE;
    -- The claim marks follow a job moved earlier (_jobs_marks_update_trg).
    WITH moved AS (
        UPDATE pgq._jobs AS j
        SET run_at = now()
        WHERE j.id = ANY (job_ids) AND j.status = 'queued' AND j.run_at > now()
        RETURNING j.entrypoint
    )
    SELECT count(*), array_agg(DISTINCT m.entrypoint) INTO v_count, v_entrypoints FROM moved AS m;
    PERFORM pg_notify('pgq', e.name) FROM unnest(v_entrypoints) AS e (name);
    RETURN v_count;
END
$$;

COMMENT ON FUNCTION pgq.run_now(bigint[]) IS
'Make queued jobs whose run_at is ahead due now; returns how many.';
