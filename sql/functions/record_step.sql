-- pgq.record_step: store the result of a durable step that the delivery holding the job
-- completed; later deliveries read it (pgq.step_result) instead of running the step again.
-- Fenced like pgq.complete: only the delivery that worker_id holds now may record, and the
-- job's row is locked (FOR SHARE) until the caller's transaction ends, so a sweep or a
-- timeout that re-queues the job waits for the record to commit and the next delivery sees
-- it; a record from a stale delivery changes nothing. Called inside a transactional
-- handler's transaction, the record commits or rolls back with the step's writes.
-- The first record of a name stands: a second one for the same job and name is ignored.
-- Parameters: worker_id; job_id; delivery (the `deliveries` value pgq.claim returned);
--   name (1-200 characters); result (any jsonb, NULL included; at most 1 MiB).
-- Returns TRUE when recorded; FALSE when a step of that name was recorded before (kept as
-- it was); NULL when this delivery does not hold the job (nothing recorded).
-- Raises PQ001 for invalid arguments, PQ004 for a result over 1 MiB, PQ010 for another
-- role's worker.
CREATE OR REPLACE FUNCTION pgq.record_step(
    worker_id uuid,
    job_id bigint,
    delivery integer,
    name text,
    result jsonb DEFAULT NULL
)
RETURNS boolean
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
    v_rows integer;
BEGIN
    PERFORM pgq._check_step(worker_id, job_id, delivery, name);
    IF pg_column_size(result) > 1048576 THEN
        RAISE EXCEPTION 'pgq: result is % bytes, over the 1 MiB limit', pg_column_size(result)
            USING ERRCODE = 'PQ004', HINT = 'Store large data in a table and record its key as the step''s result.';
    END IF;
    -- FOR SHARE: an UPDATE of the row (reap, timeout, release) waits until this commits,
    -- and one that committed first makes the row fail the condition here (re-checked on
    -- the row's newest version).
    PERFORM FROM pgq._jobs AS j
    WHERE j.id = record_step.job_id AND j.worker_id = record_step.worker_id AND j.deliveries = record_step.delivery
    FOR SHARE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    INSERT INTO pgq._steps AS s (job_id, name, result, delivery, recorded_at)
    VALUES (record_step.job_id, record_step.name, record_step.result, record_step.delivery, clock_timestamp())
    ON CONFLICT ON CONSTRAINT _steps_pkey DO NOTHING;
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    RETURN v_rows = 1;
END
$$;

COMMENT ON FUNCTION pgq.record_step(uuid, bigint, integer, text, jsonb) IS
'Record a durable step''s result for the delivery holding the job (fenced): TRUE recorded, FALSE already recorded, NULL when this delivery no longer holds the job.';
