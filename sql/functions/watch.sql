-- pgq.watch(job_id): ask to be told when a job finishes. After `LISTEN pgq_finished`, a
-- notification with the job's id as payload arrives when the job succeeds, is canceled or
-- discarded, or goes dead. Returns the job's status now (as pgq.job_status: a finished
-- status means no notification will come), NULL for an unknown id or one the caller may
-- not read (pgq._may_read; such a job is not marked watched). Call it after LISTEN,
-- so that no end falls between the two. Jobs nobody watches cost nothing extra.
-- Raises PQ001 for a NULL id.
CREATE OR REPLACE FUNCTION pgq.watch(job_id bigint)
RETURNS text
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
BEGIN
    IF job_id IS NULL THEN
        PERFORM pgq._invalid('job_id', 'must not be NULL', 'Pass a job id returned by pgq.enqueue.');
    END IF;
    UPDATE pgq._jobs AS j SET watched = TRUE
    WHERE j.id = watch.job_id AND NOT j.watched AND pgq._may_read(j.enqueued_by, j.worker_id);
    RETURN pgq.job_status(watch.job_id);
END
$$;

COMMENT ON FUNCTION pgq.watch(bigint) IS
'Notify channel pgq_finished (payload: the id) when this job finishes; returns its status now.';
