-- pgq.reap: the sweep. Workers silent for longer than their lease (the shortest lease of
-- their entrypoints, or the one in force at their last heartbeat if that was longer) are
-- marked dead; jobs held by workers that are not alive go back to queued (deliveries is
-- kept, so the re-delivery is visible), or dead when they lost their worker
-- max_deliveries times (a poison pill); jobs running longer than
-- their entrypoint's timeout plus its lease as grace fail with a timeout error, even when
-- the worker still heartbeats. Rows of workers gone for over a day are deleted.
-- pg_cron runs it every minute; pgq.heartbeat and pgq.register_worker run it too. Only one
-- sweep runs at a time (a transaction-level advisory lock); a concurrent call returns 0.
-- Every UPDATE re-checks the job's state, so a job completed meanwhile is never touched.
-- Returns the number of jobs released or failed.
CREATE OR REPLACE FUNCTION pgq.reap()
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_dead uuid[];
    v_stopped uuid[];
    v_count integer := 0;
    v_job record;
BEGIN
    -- Key: 'pgq' in ASCII, then 1 for the sweep.
    IF NOT pg_try_advisory_xact_lock(7366513, 1) THEN
        RETURN 0;
    END IF;

    -- A worker paces its heartbeats by the lease it learned at its last beat: a lease
    -- shortened since then applies to it only from its next beat.
    UPDATE pgq._workers AS w
    SET state = 'dead', stopped_at = now()
    WHERE w.state = 'alive'
      AND w.heartbeat_at < now() - greatest(w.lease, (
          SELECT min(coalesce(q.lease, (pgq._defaults()).lease))
          FROM unnest(w.entrypoints) AS e (ep)
          LEFT JOIN pgq._queues AS q ON q.entrypoint = e.ep
      ));

    -- Orphans: running jobs whose worker is not alive. A worker that died (or whose row
    -- is gone) lost them: that counts towards max_deliveries; one that unregistered did not.
    SELECT array_agg(DISTINCT j.worker_id) FILTER (WHERE w.state IS DISTINCT FROM 'stopped'),
           array_agg(DISTINCT j.worker_id) FILTER (WHERE w.state = 'stopped')
    INTO v_dead, v_stopped
    FROM pgq._jobs AS j
    LEFT JOIN pgq._workers AS w ON w.id = j.worker_id
    WHERE j.status = 'running' AND w.state IS DISTINCT FROM 'alive';
    IF v_dead IS NOT NULL THEN
        v_count := pgq._release(v_dead, '{}', TRUE);
    END IF;
    IF v_stopped IS NOT NULL THEN
        v_count := v_count + pgq._release(v_stopped, '{}', FALSE);
    END IF;

    -- Timeouts: the worker should have stopped the handler; it did not.
    FOR v_job IN
        SELECT j.id, coalesce(q.timeout, (pgq._defaults()).timeout) AS timeout
        FROM pgq._jobs AS j
        LEFT JOIN pgq._queues AS q ON q.entrypoint = j.entrypoint
        WHERE j.status = 'running'
          AND j.started_at < now() - coalesce(q.timeout, (pgq._defaults()).timeout)
              - coalesce(q.lease, (pgq._defaults()).lease)
        FOR UPDATE OF j SKIP LOCKED
    LOOP
        PERFORM pgq._fail(v_job.id, format('timeout: ran longer than %s', v_job.timeout), NULL);
        v_count := v_count + 1;
    END LOOP;

    DELETE FROM pgq._workers AS w
    WHERE w.state <> 'alive' AND w.stopped_at < now() - interval '1 day'
      AND NOT EXISTS (SELECT 1 FROM pgq._jobs AS j WHERE j.worker_id = w.id);
    RETURN v_count;
END
$$;

COMMENT ON FUNCTION pgq.reap() IS
'Sweep: mark silent workers dead, re-queue their jobs, fail jobs past their timeout; returns the number of jobs acted on.';
