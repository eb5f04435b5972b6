-- pgq.release: a worker gives back the jobs it holds but does not know of. When the reply
-- of a claim is lost (the connection broke after the claim committed), the worker holds
-- jobs it will never run, and its heartbeats would keep them from everyone else; once
-- reconnected it calls this with the ids it does know of (running or being completed).
-- The others go back to queued at once (deliveries is kept, so the next run sees it), or
-- to canceled when cancellation was requested.
-- Parameters: worker_id; keep (ids the worker still holds on purpose; may be empty).
-- Returns the number of jobs released or canceled. Raises PQ001 for invalid arguments, PQ002/PQ003
-- for an unknown or gone worker.
CREATE OR REPLACE FUNCTION pgq.release(worker_id uuid, keep bigint[])
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
BEGIN
    PERFORM pgq._check_worker_role(worker_id);
    PERFORM pgq._check_worker(worker_id);
    PERFORM pgq._check_ids('keep', keep);
    -- Only jobs claimed before this call was sent (see pgq._release).
    RETURN pgq._release(ARRAY[worker_id], keep, claimed_before => statement_timestamp());
END
$$;

COMMENT ON FUNCTION pgq.release(uuid, bigint[]) IS
'Re-queue the running jobs of a worker that are not in keep (after a claim whose reply was lost); returns how many.';
