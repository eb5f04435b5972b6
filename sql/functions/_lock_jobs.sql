-- pgq._lock_jobs(): the lock of pgq.isolate and pgq.unisolate, ACCESS EXCLUSIVE on the job
-- table and all its partitions, held to the commit. Taken on the partitioned table first,
-- so that a statement that arrives during the move waits before it has fixed the list of
-- partitions it reads (locking the default partition alone let a completion wait there,
-- then find its jobs gone to the new partition), and no statement holds one partition
-- while waiting for another. A request that waits blocks every statement queued after it:
-- each try waits at most 500 ms, then gives way for 100 ms, as pgq upgrade does, so that a
-- long transaction on the table (a transactional handler, a report) stalls the queue for
-- half a second at a time, not for its whole length. After 20 tries it raises 55P03.
CREATE OR REPLACE FUNCTION pgq._lock_jobs()
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_timeout text := pg_catalog.current_setting('lock_timeout');
BEGIN
    FOR v_try IN 1..20 LOOP
        BEGIN
            -- Undone with the subtransaction when the lock times out.
            PERFORM pg_catalog.set_config('lock_timeout', '500ms', TRUE);
            LOCK TABLE pgq._jobs IN ACCESS EXCLUSIVE MODE;
            PERFORM pg_catalog.set_config('lock_timeout', v_timeout, TRUE);
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM pg_catalog.pg_sleep(0.1);
        END;
    END LOOP;
    RAISE EXCEPTION 'pgq: the job table stayed in use for 12 seconds: it was not locked'
    USING ERRCODE = 'lock_not_available',
          HINT = 'Look for a long transaction on pgq''s tables (pgq doctor names the oldest), then try again.';
END
$$;

COMMENT ON FUNCTION pgq._lock_jobs() IS
'Internal: locks the job table and its partitions for pgq.isolate and pgq.unisolate, in tries of 500 ms.';
