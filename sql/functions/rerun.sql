-- pgq.rerun: enqueue finished jobs again, each as a new job made from its stored row in the
-- outcome log (entrypoint, payload, headers, priority, dedupe and concurrency keys), due
-- now, with the entrypoint's max_attempts. pgq.retry re-queues dead jobs, which are still
-- live rows; a succeeded, canceled or discarded job has left the job table, and its one
-- terminal row in the append-only outcome log is its history: the re-run gets a new id, so
-- that the old id keeps its outcome and result (pgq.job_status, pgq.job, Client.wait on it
-- stay true) and the new one has a life of its own. Dependencies (depends_on) are not
-- carried over: they finished long ago. The dedupe key is (a succeeded job's log keeps it):
-- a live job with the same key stands for the re-run, as with pgq.enqueue_job, and no job is
-- created.
-- Parameters: job_ids (ids of finished jobs; live, unknown and pruned ids are skipped).
-- Returns one row per finished id: job_id, outcome (succeeded, canceled or dead), new_id
-- (the re-run's id, or the id of the live job that holds the dedupe key), created (FALSE
-- then). Raises PQ001 for NULL ids or an array with NULLs; nothing changes then.
CREATE OR REPLACE FUNCTION pgq.rerun(job_ids bigint[])
RETURNS TABLE (job_id bigint, outcome text, new_id bigint, created boolean)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_job record;
    v_new record;
BEGIN
    PERFORM pgq._check_ids('job_ids', job_ids);
    FOR v_job IN
        SELECT DISTINCT ON (o.job_id)
            o.job_id, o.outcome, o.entrypoint, o.priority, o.payload, o.headers, o.dedupe_key,
            o.concurrency_key
        FROM pgq._outcomes AS o
        WHERE o.job_id = ANY (rerun.job_ids) AND o.outcome IN ('succeeded', 'canceled', 'dead')
            AND NOT EXISTS (SELECT 1 FROM pgq._jobs AS j WHERE j.id = o.job_id)
        ORDER BY o.job_id, o.finished_at DESC
    LOOP
        SELECT e.id, e.created INTO v_new
        FROM pgq.enqueue_job(
            v_job.entrypoint, v_job.payload,
            priority => v_job.priority,
            dedupe_key => v_job.dedupe_key,
            headers => v_job.headers,
            concurrency_key => v_job.concurrency_key
        ) AS e;
        job_id := v_job.job_id;
        outcome := v_job.outcome;
        new_id := v_new.id;
        created := v_new.created;
        RETURN NEXT;
    END LOOP;
END
$$;

COMMENT ON FUNCTION pgq.rerun(bigint[]) IS
'Enqueue finished jobs again as new jobs from their stored rows; returns the new ids.';
