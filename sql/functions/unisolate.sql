-- pgq.unisolate: the reverse of pgq.isolate. The entrypoint's partition is detached, its live
-- jobs move back into pgq._jobs_default, ids and all, and the partition is dropped, in one
-- transaction.
-- Locks: the job table and all its partitions (pgq._lock_jobs; a partition is detached
-- under that lock), from the start to the commit: every statement on them waits for this
-- one; the moved jobs are written again, with their indexes. A move is no delivery and no
-- end, as in pgq.isolate.
-- Parameters: entrypoint.
-- Returns the number of jobs moved; 0 when the entrypoint had no partition of its own
-- (nothing changes). Raises PQ001 for an invalid entrypoint, PQ007 in a transaction other
-- than READ COMMITTED; nothing changes then.
CREATE OR REPLACE FUNCTION pgq.unisolate(entrypoint text)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_name text;
    v_columns text;
    v_moved bigint;
BEGIN
    PERFORM pgq._check_entrypoint('entrypoint', entrypoint);
    -- Under its lock the move looks again for the partition and moves the jobs it then
    -- sees: an older snapshot would miss what was committed while it waited.
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'pgq: pgq.unisolate needs READ COMMITTED, not %', current_setting('transaction_isolation')
        USING ERRCODE = 'PQ007',
              HINT = 'Call pgq.unisolate outside explicit REPEATABLE READ or SERIALIZABLE transactions.';
    END IF;
    -- Looked for before the lock (a call for an entrypoint without a partition stops no
    -- one) and again under it (another call may have dropped it meanwhile).
    IF pgq._partition_of(unisolate.entrypoint) IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM pgq._lock_jobs();
    v_name := pgq._partition_of(unisolate.entrypoint);
    IF v_name IS NULL THEN
        RETURN 0;
    END IF;
    SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO v_columns
    FROM pg_catalog.pg_attribute AS a
    WHERE a.attrelid = 'pgq._jobs'::regclass AND a.attnum > 0 AND NOT a.attisdropped;

    EXECUTE format('ALTER TABLE pgq._jobs DETACH PARTITION pgq.%I', v_name);
    -- Into the default partition itself, not through pgq._jobs, whose statement trigger
    -- would treat the jobs as new ones (pgq._trg_marks_inserted); the deferred check of
    -- waiting jobs (pgq._trg_check_waiting) runs again for the moved ones, which changes
    -- nothing. OVERRIDING SYSTEM VALUE: from PostgreSQL 17 on, the partition has the
    -- identity of pgq._jobs.
    PERFORM pg_catalog.set_config('pgq.moving', pg_catalog.pg_current_xact_id()::text, TRUE);
    EXECUTE format(
        'INSERT INTO pgq._jobs_default (%2$s) OVERRIDING SYSTEM VALUE SELECT %2$s FROM pgq.%1$I', v_name, v_columns
    );
    GET DIAGNOSTICS v_moved = ROW_COUNT;
    PERFORM pg_catalog.set_config('pgq.moving', '', TRUE);
    EXECUTE format('DROP TABLE pgq.%I', v_name);
    RETURN v_moved;
END
$$;

COMMENT ON FUNCTION pgq.unisolate(text) IS
'Move an entrypoint''s jobs back from its own partition into the shared one and drop the partition; returns the jobs moved.';
