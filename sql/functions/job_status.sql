-- pgq.job_status: 'queued', 'waiting', 'running', 'dead' for a live job; 'succeeded' or
-- 'canceled' for a finished one; NULL for an unknown id (or one pruned from the log), and
-- for a job the caller may not read (pgq._may_read: its producer, the worker holding it,
-- pgq_admin), so that counting ids tells a producer nothing of others' jobs.
-- Raises PQ001 for a NULL id.
CREATE OR REPLACE FUNCTION pgq.job_status(job_id bigint)
RETURNS text
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty):
-- tests/py/sql/test_empty_queue_plans.py says why; JIT off, which that cost would start.
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_status text;
    v_visible boolean;
BEGIN
    IF job_id IS NULL THEN
        PERFORM pgq._invalid('job_id', 'must not be NULL', 'Pass a job id returned by pgq.enqueue.');
    END IF;
    SELECT j.status, pgq._may_read(j.enqueued_by, j.worker_id) INTO v_status, v_visible
    FROM pgq._jobs AS j WHERE j.id = job_status.job_id;
    IF FOUND THEN
        RETURN CASE WHEN v_visible THEN v_status END;
    END IF;
    SELECT o.outcome, pgq._may_read(o.enqueued_by, NULL) INTO v_status, v_visible
    FROM pgq._final_outcome(job_status.job_id) AS o;
    RETURN CASE WHEN v_visible THEN v_status END;
END
$$;

COMMENT ON FUNCTION pgq.job_status(bigint) IS
'Status of a job, live or finished: queued, waiting, running, dead, succeeded, canceled; NULL if unknown or not the caller''s to read (its producer, its worker, admins).';
