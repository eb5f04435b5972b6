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
-- thorough (pg_cron, the workers' minute sweep), heartbeats and registrations are not.
-- Bounded, so that it never cancels its caller under a statement_timeout (docs/errors.md
-- does not list it: nothing is raised): the light form acts on at most 200 jobs per call
-- (a heartbeat, a registration; a fleet of silent workers drains a batch per beat, and
-- through the sweeps), and starts no batch after a quarter of the statement's timeout;
-- thorough does all the work, but starts no batch after half of it. The first batch of a
-- call starts whatever the time (a new session, such as pg_cron's, spends the first
-- milliseconds planning). Batches start at 50 jobs and double, up to 1000, while one takes
-- under a quarter of the time left, so that even a short timeout lets one finish.
-- Each step runs in a subtransaction: when the timeout (or a lock_timeout) strikes anyway,
-- that step is undone, what the steps before it did is kept, and the call returns: a
-- sweep that is cut short still frees what it reached (a WARNING says so).
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
    -- Jobs this call may still act on (NULL: no bound).
    v_left integer := CASE WHEN thorough THEN NULL ELSE 200 END;
    v_until timestamptz := pgq._sweep_deadline(CASE WHEN thorough THEN 0.5 ELSE 0.25 END);
    v_size integer := 50;
    v_batch integer;
    v_began timestamptz;
    v_batches integer := 0;
    v_n integer;
BEGIN
    -- One sweep at a time (pgq._lock_key).
    IF NOT pg_try_advisory_xact_lock(pgq._lock_key('sweep'), pgq._lock_id('sweep')) THEN
        RETURN 0;
    END IF;

    -- A worker paces its heartbeats by the lease it learned at its last beat: a lease
    -- shortened since then applies to it only from its next beat. A worker row that is
    -- locked is skipped until the next sweep: a claim holds it until it commits, and one
    -- left open in a transaction must not stop this sweep (and, under its lock, every
    -- other) from reaping the other workers.
    BEGIN
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
    EXCEPTION WHEN query_canceled OR lock_not_available THEN
        RAISE WARNING 'pgq: sweep cut short: % (%)', sqlerrm, sqlstate;
        RETURN v_count;
    END;

    -- Jobs of workers that are not alive go back. A worker that died lost them: that
    -- counts towards max_deliveries; one that unregistered did not. Once none of its jobs
    -- is left, a worker is not looked up again (pgq._release_gone).
    <<workers>>
    FOR v_worker IN
        SELECT w.id, w.state FROM pgq._workers AS w
        WHERE w.state <> 'alive' AND w.released_at IS NULL
        ORDER BY w.id
    LOOP
        LOOP
            EXIT workers WHEN v_left <= 0 OR (v_batches > 0 AND clock_timestamp() >= v_until);
            v_batch := least(v_left, v_size);
            v_began := clock_timestamp();
            v_batches := v_batches + 1;
            BEGIN
                v_n := pgq._release_gone(v_worker.id, v_worker.state = 'dead', v_batch);
            EXCEPTION WHEN query_canceled OR lock_not_available THEN
                RAISE WARNING 'pgq: sweep cut short: % (%)', sqlerrm, sqlstate;
                RETURN v_count;
            END;
            v_count := v_count + v_n;
            v_left := v_left - v_n;
            EXIT WHEN v_n < v_batch;
            IF v_size < 1000 AND (v_until = 'infinity'
                                  OR (clock_timestamp() - v_began) * 4 < v_until - clock_timestamp()) THEN
                v_size := v_size * 2;
            END IF;
        END LOOP;
    END LOOP;

    IF thorough AND clock_timestamp() < v_until THEN
        -- Orphans the loop above cannot see: running jobs whose worker row is gone (or
        -- was marked released wrongly). A worker whose row is gone counts as lost.
        BEGIN
            SELECT array_agg(DISTINCT j.worker_id) FILTER (WHERE w.state IS DISTINCT FROM 'stopped'),
                   array_agg(DISTINCT j.worker_id) FILTER (WHERE w.state = 'stopped')
            INTO v_dead, v_stopped
            FROM pgq._jobs AS j
            LEFT JOIN pgq._workers AS w ON w.id = j.worker_id
            WHERE j.status = 'running' AND w.state IS DISTINCT FROM 'alive';
            v_n := 0;
            IF v_dead IS NOT NULL THEN
                v_n := v_n + pgq._release(v_dead, '{}', TRUE);
            END IF;
            IF v_stopped IS NOT NULL THEN
                v_n := v_n + pgq._release(v_stopped, '{}', FALSE);
            END IF;
        EXCEPTION WHEN query_canceled OR lock_not_available THEN
            RAISE WARNING 'pgq: sweep cut short: % (%)', sqlerrm, sqlstate;
            RETURN v_count;
        END;
        v_count := v_count + v_n;
    END IF;

    -- Timeouts: the worker should have stopped the handler; it did not.
    IF (v_left IS NULL OR v_left > 0) AND clock_timestamp() < v_until THEN
        v_n := 0;
        BEGIN
            FOR v_job IN SELECT t.id, t.timeout FROM pgq._timed_out() AS t LOOP
                EXIT WHEN v_n >= v_left OR clock_timestamp() >= v_until;
                PERFORM pgq._fail(v_job.id, format('timeout: ran longer than %s', v_job.timeout), NULL);
                v_n := v_n + 1;
            END LOOP;
        EXCEPTION WHEN query_canceled OR lock_not_available THEN
            RAISE WARNING 'pgq: sweep cut short: % (%)', sqlerrm, sqlstate;
            RETURN v_count;
        END;
        v_count := v_count + v_n;
    END IF;

    BEGIN
        DELETE FROM pgq._workers AS w
        WHERE w.state <> 'alive' AND w.stopped_at < now() - interval '1 day'
          -- Only running jobs have a worker (_jobs_held_check): through _jobs_running_idx.
          -- `j.entrypoint >= ''` holds for every job: it bounds the first column of
          -- _jobs_running_idx so that PostgreSQL 18's planner skips through it by worker_id,
          -- as 14 to 17 do without it, instead of walking _jobs_started_idx and visiting the
          -- row of every entry (dead ones too, under a held snapshot).
          AND NOT EXISTS (
              SELECT 1 FROM pgq._jobs AS j
              WHERE j.status = 'running' AND j.entrypoint >= '' AND j.worker_id = w.id
          );
    EXCEPTION WHEN query_canceled OR lock_not_available THEN
        RAISE WARNING 'pgq: sweep cut short: % (%)', sqlerrm, sqlstate;
    END;
    RETURN v_count;
END
$$;
