-- pgq.isolate: gives an entrypoint a partition of pgq._jobs of its own, and moves its live
-- jobs (queued, waiting, running, dead) there, ids and all, in one transaction. Until then
-- every entrypoint's jobs share pgq._jobs_default, where the jobs of many entrypoints
-- enqueued together lie interleaved: a claim of one of them then reads and writes a page
-- per job, and draining it from behind a big backlog of others is slower (docs/scaling.md
-- has the figures). In a partition of its own its jobs fill pages of their own.
-- What it costs: each partition is a table with its indexes. Statements that take job ids
-- (complete, fail, cancel, job, ...) look the ids up in every partition, and PostgreSQL
-- locks every partition of a generic plan: give partitions to the few entrypoints that
-- need them (the ones with big backlogs among many others), not to every one.
-- Locks: the job table and all its partitions (pgq._lock_jobs), from the start to the
-- commit: every statement on them waits for this one, which reads the whole default
-- partition twice (to move the jobs, and when the partition is attached): 0.17-0.24 s for
-- 10k jobs among a million (docs/scaling.md). The moved jobs' workers settle them as
-- before (a move is no delivery and no end: nobody waiting for a job is told it finished).
-- Parameters: entrypoint.
-- Returns the number of jobs moved; 0 when the entrypoint had a partition already (nothing
-- changes). Raises PQ001 for an invalid entrypoint, PQ007 in a transaction other than
-- READ COMMITTED, 0A000 where pgq is the extension
-- (CREATE EXTENSION pgq), 55P03 when the job table stays in use (pgq._lock_jobs); nothing
-- changes then.
CREATE OR REPLACE FUNCTION pgq.isolate(entrypoint text)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_name text := pgq._job_partition(isolate.entrypoint);
    v_columns text;
    v_moved bigint;
BEGIN
    PERFORM pgq._check_entrypoint('entrypoint', entrypoint);
    -- Under its lock the move looks again for the partition and moves the jobs it then
    -- sees: an older snapshot would miss what was committed while it waited.
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'pgq: pgq.isolate needs READ COMMITTED, not %', current_setting('transaction_isolation')
        USING ERRCODE = 'PQ007',
              HINT = 'Call pgq.isolate outside explicit REPEATABLE READ or SERIALIZABLE transactions.';
    END IF;
    -- In an install made by CREATE EXTENSION the partitioned table and its indexes are
    -- members of the extension and a partition made here would not be: pg_restore then
    -- creates the partition's indexes twice, and fails (tests/py/lifecycle/test_extension.py).
    IF EXISTS (
        SELECT 1 FROM pg_catalog.pg_depend AS d
        WHERE d.classid = 'pg_class'::regclass AND d.objid = 'pgq._jobs'::regclass AND d.deptype = 'e'
    ) THEN
        RAISE EXCEPTION 'pgq: pgq.isolate is not available where pgq is the extension'
        USING ERRCODE = 'feature_not_supported',
              HINT = 'A dump of the database could not be restored with such a partition. Install pgq with pgq install, or pgq sql install, to use it.';
    END IF;
    -- Looked for before the lock (a call for an entrypoint isolated already stops no one)
    -- and again under it (another call may have made it meanwhile).
    IF pgq._partition_of(isolate.entrypoint) IS NOT NULL THEN
        RETURN 0;
    END IF;
    PERFORM pgq._lock_jobs();
    IF pgq._partition_of(isolate.entrypoint) IS NOT NULL THEN
        RETURN 0;
    END IF;
    SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO v_columns
    FROM pg_catalog.pg_attribute AS a
    WHERE a.attrelid = 'pgq._jobs'::regclass AND a.attnum > 0 AND NOT a.attisdropped;

    -- A table of its own first, filled and then attached: the indexes are built once, over
    -- the moved jobs, and no trigger fires on the way in.
    EXECUTE format(
        'CREATE TABLE pgq.%I (LIKE pgq._jobs INCLUDING DEFAULTS INCLUDING CONSTRAINTS) WITH ('
        '  fillfactor = 70, autovacuum_vacuum_scale_factor = 0.02,'
        '  autovacuum_vacuum_insert_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.05,'
        '  autovacuum_vacuum_cost_delay = 0)',
        v_name
    );
    PERFORM pg_catalog.set_config('pgq.moving', pg_catalog.pg_current_xact_id()::text, TRUE);
    EXECUTE format(
        'WITH moved AS (DELETE FROM pgq._jobs_default AS j WHERE j.entrypoint = $1 RETURNING j.*)'
        ' INSERT INTO pgq.%1$I (%2$s) SELECT %2$s FROM moved',
        v_name, v_columns
    ) USING entrypoint;
    GET DIAGNOSTICS v_moved = ROW_COUNT;
    PERFORM pg_catalog.set_config('pgq.moving', '', TRUE);
    EXECUTE format('ALTER TABLE pgq.%1$I ADD CONSTRAINT %2$I PRIMARY KEY (id)', v_name, v_name || '_pkey');
    EXECUTE format('ALTER TABLE pgq._jobs ATTACH PARTITION pgq.%I FOR VALUES IN (%L)', v_name, entrypoint);
    PERFORM pgq._name_partition_indexes(v_name);
    EXECUTE format('COMMENT ON TABLE pgq.%I IS %L', v_name, format('The jobs of entrypoint %s (pgq.isolate).', entrypoint));
    RETURN v_moved;
END
$$;

COMMENT ON FUNCTION pgq.isolate(text) IS
'Give an entrypoint a partition of the job table of its own and move its jobs there; returns the jobs moved.';
