-- pgq.batch_results(batch): the members of a batch, each with its status and, once it
-- succeeded, its result: what a callback's handler reads to join the members' results
-- (fan-in), or a producer to follow its batch.
-- Who may call it: the batch's producer (the login role that called pgq.batch), the worker
-- that holds one of its callback jobs now, and pgq_admin (pgq._may_read). To anyone else
-- the batch is unknown.
-- Parameters: batch (an id pgq.batch returned; batches are pruned with pgq.prune).
-- Returns one row per member, in id order: job_id, status (as pgq.job_status: queued,
-- waiting, running, dead, succeeded, canceled; NULL once its outcome was pruned), result
-- (of a succeeded member, else NULL). Empty for a batch without members.
-- Raises PQ001 for a NULL batch, PQ005 for an unknown one or one the caller may not read.
CREATE OR REPLACE FUNCTION pgq.batch_results(batch bigint)
RETURNS TABLE (job_id bigint, status text, result jsonb)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_batch pgq._batches;
BEGIN
    IF batch IS NULL THEN
        PERFORM pgq._invalid('batch', 'must not be NULL', 'Pass a batch id returned by pgq.batch.');
    END IF;
    SELECT b.* INTO v_batch FROM pgq._batches AS b WHERE b.id = batch_results.batch;
    IF v_batch.id IS NULL OR NOT (
        pgq._may_read(v_batch.created_by, NULL)
        OR EXISTS (
            SELECT 1 FROM pgq._jobs AS j
            WHERE j.id IN (v_batch.finish_job, v_batch.success_job, v_batch.death_job)
              AND j.worker_id IS NOT NULL AND pgq._may_read(NULL, j.worker_id)
        )
    ) THEN
        RAISE EXCEPTION 'pgq: batch % is unknown', batch_results.batch
            USING ERRCODE = 'PQ005',
            DETAIL = 'It was never opened, it was pruned, or it is not yours to read.',
            HINT = 'Pass a batch id returned by pgq.batch; finished batches are kept for the longest retention.';
    END IF;
    RETURN QUERY
    SELECT m.job_id, coalesce(l.status, f.outcome), f.result
    FROM pgq._batch_members AS m
    LEFT JOIN pgq._jobs AS l ON l.id = m.job_id
    LEFT JOIN LATERAL (
        SELECT o.outcome, CASE WHEN o.outcome = 'succeeded' THEN o.result END AS result
        FROM pgq._final_outcome(m.job_id) AS o
        WHERE l.id IS NULL
    ) AS f ON TRUE
    WHERE m.batch_id = batch_results.batch
    ORDER BY m.job_id;
END
$$;

COMMENT ON FUNCTION pgq.batch_results(bigint) IS
'The members of a batch, in id order, with their status and (once succeeded) result: the fan-in of a batch''s callback.';
