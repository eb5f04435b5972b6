-- pgq.reap: the sweep. Workers silent for longer than their lease (the shortest lease of
-- their entrypoints, or the one in force at their last heartbeat if that was longer) are
-- marked dead; jobs held by workers that are not alive go back to queued (deliveries is
-- kept, so the re-delivery is visible), or dead when they lost their worker
-- max_deliveries times (a poison pill); jobs running longer than
-- their entrypoint's timeout plus its lease as grace fail with a timeout error, even when
-- the worker still heartbeats. Rows of workers gone for over a day are deleted.
-- pg_cron runs it every minute; pgq.sweep runs the same reap, pgq.heartbeat and
-- pgq.register_worker a lighter, bounded form (pgq._reap). Only one sweep runs at a time
-- (a transaction-level advisory lock); a concurrent call returns 0. A worker whose row a
-- claim holds (until it commits) is left to the next sweep.
-- Every UPDATE re-checks the job's state, so a job completed meanwhile is never touched.
-- Records when it ran in pgq._maintenance (task 'reap', at most once a second), for
-- pgq.sweeps and pgq doctor: pg_cron (or an operator) calls it; workers' sweeps do not, so
-- the record says whether pg_cron's sweep runs.
-- Returns the number of jobs released or failed.
CREATE OR REPLACE FUNCTION pgq.reap()
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
DECLARE
    v_reaped integer;
BEGIN
    v_reaped := pgq._reap(TRUE);
    -- Only a call that swept records it, and never waits for the record's row: pgq._reap
    -- swept when this transaction holds the sweep lock (taking it again here is a no-op),
    -- and a concurrent sweep that holds the row holds that lock (a waiting record would
    -- fail a call under lock_timeout). Read first: no write when the row is fresh.
    IF pg_try_advisory_xact_lock(pgq._lock_key('sweep'), pgq._lock_id('sweep')) AND NOT EXISTS (
        SELECT 1 FROM pgq._maintenance AS m
        WHERE m.task = 'reap' AND m.last_run > pg_catalog.now() - interval '1 second'
    ) THEN
        INSERT INTO pgq._maintenance AS m (task, last_run) VALUES ('reap', pg_catalog.now())
        ON CONFLICT ON CONSTRAINT _maintenance_pkey DO UPDATE SET last_run = excluded.last_run;
    END IF;
    RETURN v_reaped;
END
$$;

COMMENT ON FUNCTION pgq.reap() IS
'Sweep: mark silent workers dead, re-queue their jobs, fail jobs past their timeout; returns the number of jobs acted on.';
