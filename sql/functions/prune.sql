-- pgq.prune: outcome-log retention. Each outcome is kept for its entrypoint's retention
-- (pgq.configure, default 7 days). Whole daily partitions older than the longest retention
-- are dropped (cheap at any volume); rows of entrypoints with a shorter retention are
-- deleted in batches of 10000 (at most 50 batches a call, so one call stays short; the
-- next call continues). Also creates the coming days' partitions, and deletes the durable
-- steps (pgq._steps) and progress (pgq._progress) of jobs whose outcome is gone, and the
-- batches (pgq.batch) that finished before the longest retention.
-- Creating and dropping a partition needs an exclusive lock on the log, which any open
-- transaction that read the log holds off; completions would queue behind the waiting
-- DDL, so it waits at most 100 ms and otherwise leaves that partition to the next call.
-- The DDL comes last, after the deletes, so that the lock is held only until commit.
-- pg_cron runs it hourly; without pg_cron the workers' sweep runs it when the last prune
-- is over two hours old. Concurrent calls: one prunes, the others return 0.
-- Returns the number of outcomes removed.
CREATE OR REPLACE FUNCTION pgq.prune()
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- It reads whole partitions of the outcome log: sequential scans are right here, also when
-- pgq.sweep (which turns them off for pgq._jobs) calls it.
SET enable_seqscan = on
AS $$
DECLARE
    v_default interval := (pgq._defaults()).retention;
    v_longest interval;
    v_shortest interval;
    v_partition record;
    v_expired text[] := '{}';
    v_name text;
    v_removed bigint := 0;
    v_rows bigint;
    v_batches integer := 0;
    v_lock_timeout text := current_setting('lock_timeout');
BEGIN
    -- One prune at a time (pgq._lock_key).
    IF NOT pg_try_advisory_xact_lock(pgq._lock_key('prune'), pgq._lock_id('prune')) THEN
        RETURN 0;
    END IF;
    INSERT INTO pgq._maintenance AS m (task, last_run) VALUES ('prune', now())
    ON CONFLICT ON CONSTRAINT _maintenance_pkey DO UPDATE SET last_run = excluded.last_run;

    SELECT greatest(max(q.retention), v_default), least(min(q.retention), v_default)
    INTO v_longest, v_shortest
    FROM pgq._queues AS q;

    -- Deletes first, DDL last: the exclusive lock that creating or dropping a partition
    -- takes on the log lasts until commit, and every completion waits for it.
    FOR v_partition IN
        SELECT
            c.relname,
            to_date(substr(c.relname, 11), 'YYYYMMDD')::timestamp AT TIME ZONE 'UTC' AS day_start
        FROM pg_catalog.pg_inherits AS i
        JOIN pg_catalog.pg_class AS c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'pgq._outcomes'::regclass AND c.relname ~ '^_outcomes_[0-9]{8}$'
        ORDER BY c.relname
    LOOP
        IF v_partition.day_start + interval '1 day' <= now() - v_longest THEN
            v_expired := v_expired || v_partition.relname;
        ELSIF v_partition.day_start < now() - v_shortest THEN
            -- Some entrypoints' rows in this day may have expired already.
            LOOP
                EXIT WHEN v_batches >= 50;
                EXECUTE format(
                    'DELETE FROM pgq.%1$I AS o WHERE o.ctid = ANY (ARRAY('
                    '  SELECT e.ctid FROM pgq.%1$I AS e'
                    '  LEFT JOIN pgq._queues AS q ON q.entrypoint = e.entrypoint'
                    '  WHERE e.finished_at < now() - coalesce(q.retention, $1) LIMIT 10000))',
                    v_partition.relname
                ) USING v_default;
                GET DIAGNOSTICS v_rows = ROW_COUNT;
                v_removed := v_removed + v_rows;
                v_batches := v_batches + 1;
                EXIT WHEN v_rows < 10000;
            END LOOP;
        END IF;
    END LOOP;

    -- Rows that fell into the default partition (no daily partition existed yet).
    WHILE v_batches < 50 LOOP
        DELETE FROM pgq._outcomes_default AS o WHERE o.ctid = ANY (ARRAY(
            SELECT e.ctid FROM pgq._outcomes_default AS e
            LEFT JOIN pgq._queues AS q ON q.entrypoint = e.entrypoint
            WHERE e.finished_at < now() - coalesce(q.retention, v_default)
            LIMIT 10000
        ));
        GET DIAGNOSTICS v_rows = ROW_COUNT;
        v_removed := v_removed + v_rows;
        v_batches := v_batches + 1;
        EXIT WHEN v_rows < 10000;
    END LOOP;

    -- Durable steps of jobs that are neither live nor in the log any more (their outcomes
    -- were pruned above or before): a step is recorded before its job finishes, so only
    -- steps older than the shortest retention can belong to such a job.
    WHILE v_batches < 50 LOOP
        DELETE FROM pgq._steps AS s WHERE (s.job_id, s.name) IN (
            SELECT e.job_id, e.name FROM pgq._steps AS e
            WHERE e.recorded_at < now() - v_shortest
              AND NOT EXISTS (SELECT 1 FROM pgq._jobs AS j WHERE j.id = e.job_id)
              AND NOT EXISTS (SELECT 1 FROM pgq._final_outcome(e.job_id) AS o)
            LIMIT 10000
        );
        GET DIAGNOSTICS v_rows = ROW_COUNT;
        v_batches := v_batches + 1;
        EXIT WHEN v_rows < 10000;
    END LOOP;
    -- Likewise their last progress (pgq._progress).
    WHILE v_batches < 50 LOOP
        DELETE FROM pgq._progress AS p WHERE p.job_id IN (
            SELECT e.job_id FROM pgq._progress AS e
            WHERE e.updated_at < now() - v_shortest
              AND NOT EXISTS (SELECT 1 FROM pgq._jobs AS j WHERE j.id = e.job_id)
              AND NOT EXISTS (SELECT 1 FROM pgq._final_outcome(e.job_id) AS o)
            LIMIT 10000
        );
        GET DIAGNOSTICS v_rows = ROW_COUNT;
        v_batches := v_batches + 1;
        EXIT WHEN v_rows < 10000;
    END LOOP;

    -- Batches (pgq.batch) that finished longer ago than the longest retention, none of whose
    -- members is still in the hot table (a dead member may yet be retried), with their
    -- member rows. Members are looked up in pgq._jobs by id: this function's sequential
    -- scans (for the log) must not reach the job table (tests/py/sql/test_empty_queue_plans.py).
    PERFORM set_config('enable_seqscan', 'off', TRUE);
    WHILE v_batches < 50 LOOP
        WITH expired AS (
            DELETE FROM pgq._batches AS b WHERE b.id IN (
                SELECT e.id FROM pgq._batches AS e
                WHERE e.finished_at < now() - v_longest
                  AND NOT EXISTS (
                      SELECT 1 FROM pgq._batch_members AS m JOIN pgq._jobs AS j ON j.id = m.job_id
                      WHERE m.batch_id = e.id
                  )
                LIMIT 1000
            )
            RETURNING b.id
        ),
        members AS (
            DELETE FROM pgq._batch_members AS m WHERE m.batch_id IN (SELECT x.id FROM expired AS x)
        )
        SELECT count(*) INTO v_rows FROM expired;
        v_batches := v_batches + 1;
        EXIT WHEN v_rows < 1000;
    END LOOP;
    PERFORM set_config('enable_seqscan', 'on', TRUE);  -- as this function's SET clause has it

    -- The DDL: each waits at most 100 ms for its lock, else it is left to a later prune.
    PERFORM set_config('lock_timeout', '100ms', TRUE);
    FOREACH v_name IN ARRAY v_expired LOOP
        -- Counted before the lock: nothing is added to a partition this old.
        EXECUTE format('SELECT count(*) FROM pgq.%I', v_name) INTO v_rows;
        BEGIN
            EXECUTE format('LOCK TABLE pgq._outcomes, pgq.%I IN ACCESS EXCLUSIVE MODE', v_name);
            EXECUTE format('DROP TABLE pgq.%I', v_name);
            v_removed := v_removed + v_rows;
        EXCEPTION WHEN lock_not_available THEN
            RAISE NOTICE 'pgq.prune: % is in use; it will be dropped by a later prune', v_name;
        END;
    END LOOP;
    BEGIN
        PERFORM pgq._ensure_partitions();
    EXCEPTION WHEN lock_not_available THEN
        RAISE NOTICE 'pgq.prune: the outcome log is in use; partitions will be created by a later prune';
    END;
    PERFORM set_config('lock_timeout', v_lock_timeout, TRUE);
    RETURN v_removed;
END
$$;

COMMENT ON FUNCTION pgq.prune() IS
'Outcome-log retention: drop expired daily partitions, delete rows past a shorter per-entrypoint retention; returns how many outcomes it removed.';
