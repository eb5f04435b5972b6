-- pgq._reap(thorough): the sweep behind pgq.reap (see there for the rules). Its cost does
-- not grow with the jobs claimed since the oldest snapshot, which leaves an entry in the
-- running index for each of them (docs/held-snapshot.md):
-- - the jobs of workers that stopped or were found dead are looked up per worker, by id,
--   and only for workers whose jobs were not all given back yet (released_at);
-- - timeouts read only the running jobs started before the shortest timeout plus lease
--   (pgq._timed_out).
-- thorough also walks every running job for the ones whose worker row is missing or whose
-- worker is not alive though marked released (neither should happen: rows are deleted
-- only when no job refers to them, and see pgq._release_gone); pgq.reap and pgq.sweep are
-- thorough (pg_cron, the workers' minute sweep, register_worker), heartbeats are not.
CREATE OR REPLACE FUNCTION pgq._reap(thorough boolean)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_dead uuid[];
    v_stopped uuid[];
    v_count integer := 0;
    v_worker record;
    v_job record;
BEGIN
    -- Key: 'pgq' in ASCII, then 1 for the sweep.
    IF NOT pg_try_advisory_xact_lock(7366513, 1) THEN
        RETURN 0;
    END IF;

    -- A worker paces its heartbeats by the lease it learned at its last beat: a lease
    -- shortened since then applies to it only from its next beat. A worker row that is
    -- locked is skipped until the next sweep: a claim holds it until it commits, and one
    -- left open in a transaction must not stop this sweep (and, under its lock, every
    -- other) from reaping the other workers.
    UPDATE pgq._workers AS w
    SET state = 'dead', stopped_at = now()
    WHERE w.id IN (
        SELECT s.id
        FROM pgq._workers AS s
        WHERE s.state = 'alive'
          AND s.heartbeat_at < now() - greatest(s.lease, (
              SELECT min(coalesce(q.lease, d.lease))
              FROM unnest(s.entrypoints) AS e (ep)
              CROSS JOIN pgq._default_settings AS d
              LEFT JOIN pgq._queues AS q ON q.entrypoint = e.ep
          ))
        FOR NO KEY UPDATE SKIP LOCKED
    );

    -- Jobs of workers that are not alive go back. A worker that died lost them: that
    -- counts towards max_deliveries; one that unregistered did not. Once none of its jobs
    -- is left, a worker is not looked up again (pgq._release_gone).
    FOR v_worker IN
        SELECT w.id, w.state FROM pgq._workers AS w
        WHERE w.state <> 'alive' AND w.released_at IS NULL
        ORDER BY w.id
    LOOP
        v_count := v_count + pgq._release_gone(v_worker.id, v_worker.state = 'dead');
    END LOOP;

    IF thorough THEN
        -- Orphans the loop above cannot see: running jobs whose worker row is gone (or
        -- was marked released wrongly). A worker whose row is gone counts as lost.
        SELECT array_agg(DISTINCT j.worker_id) FILTER (WHERE w.state IS DISTINCT FROM 'stopped'),
               array_agg(DISTINCT j.worker_id) FILTER (WHERE w.state = 'stopped')
        INTO v_dead, v_stopped
        FROM pgq._jobs AS j
        LEFT JOIN pgq._workers AS w ON w.id = j.worker_id
        WHERE j.status = 'running' AND w.state IS DISTINCT FROM 'alive';
        IF v_dead IS NOT NULL THEN
            v_count := v_count + pgq._release(v_dead, '{}', TRUE);
        END IF;
        IF v_stopped IS NOT NULL THEN
            v_count := v_count + pgq._release(v_stopped, '{}', FALSE);
        END IF;
    END IF;

    -- Timeouts: the worker should have stopped the handler; it did not.
    FOR v_job IN SELECT t.id, t.timeout FROM pgq._timed_out() AS t LOOP
        PERFORM pgq._fail(v_job.id, format('timeout: ran longer than %s', v_job.timeout), NULL);
        v_count := v_count + 1;
    END LOOP;

    DELETE FROM pgq._workers AS w
    WHERE w.state <> 'alive' AND w.stopped_at < now() - interval '1 day'
      -- Only running jobs have a worker (_jobs_held_check): through _jobs_running_idx.
      -- `j.entrypoint >= ''` holds for every job: it bounds the first column of _jobs_running_idx
      -- so that PostgreSQL 18's planner skips through it by worker_id, as 14 to 17 do without it,
      -- instead of walking _jobs_started_idx and visiting the row of every entry (dead ones too,
      -- under a held snapshot).
      AND NOT EXISTS (
          SELECT 1 FROM pgq._jobs AS j
          WHERE j.status = 'running' AND j.entrypoint >= '' AND j.worker_id = w.id
      );
    RETURN v_count;
END
$$;
