-- pgq.sweep: the maintenance a worker runs in its own transaction, beside (never inside)
-- its heartbeat, when pg_cron may be absent: pgq.reap, pgq.run_schedules, and pgq.prune
-- when the last prune is over two hours old. Each task runs in a subtransaction: one that
-- fails is reported as a WARNING and neither undoes the others nor fails the call.
-- Returns the number of jobs pgq.reap acted on.
CREATE OR REPLACE FUNCTION pgq.sweep()
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
    RETURN pgq._sweep(TRUE);
END
$$;

COMMENT ON FUNCTION pgq.sweep() IS
'Maintenance for workers: reap, due schedules, an overdue prune, each in its own subtransaction; returns the jobs reaped.';
