-- pgq.heartbeat: the worker is alive. One UPDATE of the worker row extends the lease of
-- every job it holds (a job's lease runs from the worker's last heartbeat) and records the
-- lease in force, by which the worker paces its next beats.
-- running (optional): the ids of the jobs the worker runs or is settling. Jobs the database
-- says it holds but that are not in the list (a claim whose reply was lost, completions
-- lost in a failover) are released at once, or canceled when that was requested. The
-- worker must send it only while no claim of its own is in flight (a job it is about to
-- learn of would be released); jobs claimed after this call was sent are never released
-- by it (a beat the worker gave up on may still run once a lock it waits for is free).
-- Without it, nothing is released (0.1 workers).
-- Then the light sweep (pgq._reap without the walk of every running job, due schedules),
-- each part in a subtransaction: with any worker running, jobs of crashed workers start
-- coming back within lease + heartbeat interval whatever the pg_cron period (200 per
-- heartbeat of each live worker, the rest at the next beats or pg_cron's reap), and a
-- failing sweep cannot fail the heartbeat. The
-- sweep is bounded per call (pgq._reap: 200 jobs, a quarter of any statement_timeout), and
-- one that a timeout cancels anyway is caught (pgq._sweep): the heartbeat still succeeds.
-- Pruning is never done here (see pgq.sweep).
-- Returns the ids of the worker's jobs whose cancellation was requested (pgq.cancel).
-- Raises PQ001 (NULL id, bad running list), PQ002 (unknown worker), PQ003 (worker stopped
-- or reaped: it must stop its handlers' side effects where it can and register again).
CREATE OR REPLACE FUNCTION pgq.heartbeat(worker_id uuid, running bigint[] DEFAULT NULL)
RETURNS SETOF bigint
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
    IF running IS NOT NULL THEN
        PERFORM pgq._check_ids('running', running);
    END IF;
    UPDATE pgq._workers AS w
    SET heartbeat_at = now(),
        lease = (
            SELECT min(coalesce(q.lease, d.lease))
            FROM unnest(w.entrypoints) AS e (ep)
            CROSS JOIN pgq._default_settings AS d
            LEFT JOIN pgq._queues AS q ON q.entrypoint = e.ep
        )
    WHERE w.id = heartbeat.worker_id AND w.state = 'alive';
    IF NOT FOUND THEN
        PERFORM pgq._check_worker(worker_id);
    END IF;
    IF running IS NOT NULL THEN
        -- Only jobs claimed before this call was sent: a late run of a beat the worker gave up
        -- on must not release what it claimed since.
        PERFORM pgq._release(ARRAY[worker_id], running, claimed_before => statement_timestamp());
    END IF;
    PERFORM pgq._sweep(FALSE);
    RETURN QUERY
    SELECT j.id
    FROM pgq._jobs AS j
    -- Through _jobs_cancel_idx. A job with a worker is running (_jobs_held_check): a test of
    -- status would let the planner walk the running index instead, which a held snapshot
    -- fills with dead entries.
    WHERE j.worker_id = heartbeat.worker_id AND j.cancel_requested;
END
$$;

COMMENT ON FUNCTION pgq.heartbeat(uuid, bigint[]) IS
'Extend the leases of all jobs a worker holds (releasing held jobs not in running, when given); returns the ids of its jobs to cancel.';
