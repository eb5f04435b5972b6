-- pgq.step_result: the stored result of a durable step, read by the delivery that runs the
-- job. Fenced like pgq.complete: only the delivery that worker_id holds now may read (a
-- stale delivery, whose job was re-delivered, learns that it no longer holds it). The
-- protocol of a step (docs/steps.md): read it; if done, use its result without running
-- the step; else run the step, then pgq.record_step its result.
-- Parameters: worker_id; job_id; delivery (the `deliveries` value pgq.claim returned);
--   name (1-200 characters, unique within the job).
-- Returns '{"done": true, "result": <the stored result>}' for a step recorded by any
-- delivery of the job, '{"done": false}' for one not recorded yet, NULL when this
-- delivery does not hold the job (nothing is read).
-- Raises PQ001 for invalid arguments, PQ010 for another role's worker.
CREATE OR REPLACE FUNCTION pgq.step_result(worker_id uuid, job_id bigint, delivery integer, name text)
RETURNS jsonb
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
    v_result jsonb;
BEGIN
    PERFORM pgq._check_step(worker_id, job_id, delivery, name);
    -- Only running jobs have a worker (_jobs_held_check).
    PERFORM FROM pgq._jobs AS j
    WHERE j.id = step_result.job_id AND j.worker_id = step_result.worker_id AND j.deliveries = step_result.delivery;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT jsonb_build_object('done', TRUE, 'result', s.result) INTO v_result
    FROM pgq._steps AS s
    WHERE s.job_id = step_result.job_id AND s.name = step_result.name;
    RETURN coalesce(v_result, '{"done": false}'::jsonb);
END
$$;

COMMENT ON FUNCTION pgq.step_result(uuid, bigint, integer, text) IS
'A durable step''s stored result for the delivery holding the job: {"done": true, "result": ...}, {"done": false}, or NULL when this delivery no longer holds the job.';
