-- pgq.unisolate: the reverse of pgq.isolate. The entrypoint's partition is detached, its live
-- jobs move back into pgq._jobs_default, ids and all, and the partition is dropped, in one
-- transaction.
-- Locks: pgq._jobs and all its partitions in ACCESS EXCLUSIVE mode (a partition is detached
-- under that lock), from the start to the commit: it waits for every open transaction that
-- uses the job table, and every statement on it waits for this one; the moved jobs are
-- written again, with their indexes. A move is no delivery and no end, as in pgq.isolate.
-- Parameters: entrypoint.
-- Returns the number of jobs moved; 0 when the entrypoint had no partition of its own
-- (nothing changes). Raises PQ001 for an invalid entrypoint; nothing changes then.
CREATE OR REPLACE FUNCTION pgq.unisolate(entrypoint text)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_name text := pgq._job_partition(unisolate.entrypoint);
    v_columns text;
    v_moved bigint;
BEGIN
    PERFORM pgq._check_entrypoint('entrypoint', entrypoint);
    -- Looked for before the lock (a call for an entrypoint without a partition stops no
    -- one) and again under it (another call may have dropped it meanwhile).
    IF to_regclass(format('pgq.%I', v_name)) IS NULL THEN
        RETURN 0;
    END IF;
    LOCK TABLE pgq._jobs IN ACCESS EXCLUSIVE MODE;
    IF to_regclass(format('pgq.%I', v_name)) IS NULL THEN
        RETURN 0;
    END IF;
    SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO v_columns
    FROM pg_catalog.pg_attribute AS a
    WHERE a.attrelid = 'pgq._jobs'::regclass AND a.attnum > 0 AND NOT a.attisdropped;

    EXECUTE format('ALTER TABLE pgq._jobs DETACH PARTITION pgq.%I', v_name);
    -- Into the default partition itself, not through pgq._jobs, whose statement trigger
    -- would treat the jobs as new ones (pgq._trg_marks_inserted).
    PERFORM pg_catalog.set_config('pgq.moving', 'on', TRUE);
    EXECUTE format(
        'INSERT INTO pgq._jobs_default (%2$s) SELECT %2$s FROM pgq.%1$I', v_name, v_columns
    );
    GET DIAGNOSTICS v_moved = ROW_COUNT;
    PERFORM pg_catalog.set_config('pgq.moving', '', TRUE);
    EXECUTE format('DROP TABLE pgq.%I', v_name);
    RETURN v_moved;
END
$$;

COMMENT ON FUNCTION pgq.unisolate(text) IS
'Move an entrypoint''s jobs back from its own partition into the shared one and drop the partition; returns the jobs moved.';
