-- pgq.heartbeat: the worker is alive. One UPDATE of the worker row extends the lease of
-- every job it holds (a job's lease runs from the worker's last heartbeat). Then runs the
-- sweeps (pgq._sweep: reap, due schedules, an overdue prune): with any worker running,
-- jobs of crashed workers are recovered within lease + heartbeat interval, whatever the
-- pg_cron period, and schedules fire without pg_cron.
-- Returns the ids of the worker's jobs whose cancellation was requested (pgq.cancel).
-- Raises PQ001 (NULL id), PQ002 (unknown worker), PQ003 (worker stopped or reaped: it
-- must stop its handlers' side effects where it can and register again).
CREATE OR REPLACE FUNCTION pgq.heartbeat(worker_id uuid)
RETURNS SETOF bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    UPDATE pgq._workers AS w
    SET heartbeat_at = now()
    WHERE w.id = heartbeat.worker_id AND w.state = 'alive';
    IF NOT FOUND THEN
        PERFORM pgq._check_worker(worker_id);
    END IF;
    PERFORM pgq._sweep();
    RETURN QUERY
    SELECT j.id
    FROM pgq._jobs AS j
    WHERE j.worker_id = heartbeat.worker_id AND j.cancel_requested AND j.status = 'running';
END
$$;

COMMENT ON FUNCTION pgq.heartbeat(uuid) IS
'Extend the leases of all jobs a worker holds; returns the ids of its jobs to cancel.';
