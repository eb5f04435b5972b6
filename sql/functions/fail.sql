-- pgq.fail: a handler failed. Fenced: acts only when worker_id still holds the job and,
-- when delivery is given, only on that delivery (a late call from a run that was already
-- re-queued and claimed again changes nothing).
-- Retries with exponential backoff and jitter while attempts remain, else the job is dead
-- (see pgq._fail for the policy); a job whose cancellation was requested is canceled.
-- Parameters: worker_id; job_id; error (the message or traceback, kept up to 64 KiB);
--   retry_in (optional: retry after exactly this delay instead of the backoff);
--   delivery (optional: the `deliveries` value the claim returned).
-- Returns 'queued', 'dead', 'canceled', or NULL when the worker no longer holds the job.
-- Raises PQ001 for invalid arguments.
CREATE OR REPLACE FUNCTION pgq.fail(
    worker_id uuid,
    job_id bigint,
    error text,
    retry_in interval DEFAULT NULL,
    delivery integer DEFAULT NULL
)
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
    PERFORM pgq._check_worker_role(worker_id);
    IF worker_id IS NULL THEN
        PERFORM pgq._invalid('worker_id', 'must not be NULL', 'Pass the id that pgq.register_worker returned.');
    END IF;
    IF job_id IS NULL THEN
        PERFORM pgq._invalid('job_id', 'must not be NULL', 'Pass the id of the job that failed.');
    END IF;
    IF error IS NULL THEN
        PERFORM pgq._invalid('error', 'must not be NULL', 'Pass the error message or traceback.');
    END IF;
    PERFORM pgq._check_interval('retry_in', retry_in, interval '0');
    -- By the primary key alone: a test of status or an `=` on worker_id would let the planner
    -- walk the running index, full of dead entries under a held snapshot (see pgq.complete).
    -- Held by this worker means running (_jobs_held_check: a non-NULL worker_id means status = 'running').
    PERFORM 1
    FROM pgq._jobs AS j
    WHERE j.id = fail.job_id AND j.worker_id IS NOT DISTINCT FROM fail.worker_id
      AND (fail.delivery IS NULL OR j.deliveries = fail.delivery)
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN pgq._fail(job_id, error, retry_in);
END
$$;

COMMENT ON FUNCTION pgq.fail(uuid, bigint, text, interval, integer) IS
'Fail a job the worker holds (fenced, per delivery when given): ''queued'' (retry later), ''dead'', ''canceled'', or NULL if not held.';
