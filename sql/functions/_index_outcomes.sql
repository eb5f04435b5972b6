-- pgq._index_outcomes(partition): give one partition of the outcome log its indexes, if
-- missing: BRIN on job_id and finished_at, and the partial btree of dedupe keys. The outcome
-- log has no indexes of its own (see sql/schema/tables.sql): each partition has these three,
-- named after it. Called by pgq._ensure_partitions for each partition it makes.
-- Parameters: partition, a partition of pgq._outcomes. Returns the number of indexes made.
CREATE OR REPLACE FUNCTION pgq._index_outcomes(partition regclass)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_name text;
    v_made integer := 0;
BEGIN
    SELECT c.relname INTO STRICT v_name FROM pg_catalog.pg_class AS c WHERE c.oid = partition;
    IF to_regclass(format('pgq.%I', v_name || '_job_idx')) IS NULL THEN
        EXECUTE format(
            'CREATE INDEX %I ON pgq.%I USING brin (job_id) WITH (pages_per_range = 16)', v_name || '_job_idx', v_name
        );
        v_made := v_made + 1;
    END IF;
    IF to_regclass(format('pgq.%I', v_name || '_finished_idx')) IS NULL THEN
        EXECUTE format('CREATE INDEX %I ON pgq.%I USING brin (finished_at)', v_name || '_finished_idx', v_name);
        v_made := v_made + 1;
    END IF;
    IF to_regclass(format('pgq.%I', v_name || '_dedupe_idx')) IS NULL THEN
        EXECUTE format(
            'CREATE INDEX %I ON pgq.%I (entrypoint, dedupe_key, finished_at) WHERE dedupe_key IS NOT NULL',
            v_name || '_dedupe_idx', v_name
        );
        v_made := v_made + 1;
    END IF;
    RETURN v_made;
END
$$;

COMMENT ON FUNCTION pgq._index_outcomes(regclass) IS
'Gives a partition of the outcome log its three indexes (job_id and finished_at BRIN, dedupe keys), if missing.';
