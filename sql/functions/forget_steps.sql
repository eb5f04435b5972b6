-- pgq.forget_steps: forget the durable steps of jobs, so that their next run starts over
-- instead of resuming (pgq.retry keeps the steps of a dead job: a retry resumes). Retry
-- from scratch: `SELECT pgq.forget_steps(ARRAY[id]); SELECT pgq.retry(ARRAY[id]);` in one
-- transaction. A running job's steps are left alone (its delivery may be reading them);
-- unknown ids are ignored.
-- Parameters: job_ids (at most 10000, no NULLs).
-- Returns the number of steps forgotten. Raises PQ001 for invalid arguments.
CREATE OR REPLACE FUNCTION pgq.forget_steps(job_ids bigint[])
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_count bigint;
BEGIN
    PERFORM pgq._check_ids('job_ids', job_ids);
    DELETE FROM pgq._steps AS s
    WHERE s.job_id = ANY (job_ids)
      AND NOT EXISTS (SELECT 1 FROM pgq._jobs AS j WHERE j.id = s.job_id AND j.status = 'running');
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

COMMENT ON FUNCTION pgq.forget_steps(bigint[]) IS
'Forget the durable steps of jobs that are not running, so that their next run starts over (pgq.retry keeps them); returns how many steps were forgotten.';
