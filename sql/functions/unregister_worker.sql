-- pgq.unregister_worker: graceful exit. The worker's unfinished jobs go back to queued at
-- once (deliveries is kept, so the next run sees it was delivered before); jobs whose
-- cancellation was requested are canceled instead. The worker can no longer complete or
-- fail anything. Idempotent for a worker that already stopped or was reaped.
-- Returns the number of jobs released. Raises PQ001 (NULL id), PQ002 (unknown worker).
CREATE OR REPLACE FUNCTION pgq.unregister_worker(worker_id uuid)
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
    v_found boolean;
BEGIN
    PERFORM pgq._check_worker_role(worker_id);
    IF worker_id IS NULL THEN
        PERFORM pgq._invalid('worker_id', 'must not be NULL', 'Pass the id that pgq.register_worker returned.');
    END IF;
    UPDATE pgq._workers AS w
    SET state = 'stopped', stopped_at = now()
    WHERE w.id = unregister_worker.worker_id AND w.state = 'alive';
    IF NOT FOUND THEN
        SELECT TRUE INTO v_found FROM pgq._workers AS w WHERE w.id = unregister_worker.worker_id;
        IF v_found IS NULL THEN
            RAISE EXCEPTION 'pgq: unknown worker_id %', worker_id
                USING ERRCODE = 'PQ002', HINT = 'Pass the id that pgq.register_worker returned.';
        END IF;
    END IF;
    RETURN pgq._release_gone(worker_id, FALSE);
END
$$;

COMMENT ON FUNCTION pgq.unregister_worker(uuid) IS
'Graceful worker exit: its unfinished jobs are re-queued at once; returns how many.';
