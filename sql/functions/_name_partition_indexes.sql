-- pgq._name_partition_indexes(partition): names the indexes of a partition of pgq._jobs
-- after the partitioned indexes they belong to (_jobs_claim_idx: <partition>_claim_idx),
-- as sql/schema/tables.sql and migrations/0020_jobs_partitioned.sql name the default
-- partition's; PostgreSQL would name them after their columns.
CREATE OR REPLACE FUNCTION pgq._name_partition_indexes(partition text)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_index record;
BEGIN
    FOR v_index IN
        SELECT c.relname AS child, partition || substr(p.relname, length('_jobs') + 1) AS name
        FROM pg_catalog.pg_inherits AS i
        INNER JOIN pg_catalog.pg_class AS c ON i.inhrelid = c.oid
        INNER JOIN pg_catalog.pg_class AS p ON i.inhparent = p.oid
        INNER JOIN pg_catalog.pg_index AS x ON c.oid = x.indexrelid
        WHERE x.indrelid = format('pgq.%I', partition)::regclass
    LOOP
        IF v_index.child <> v_index.name THEN
            EXECUTE format('ALTER INDEX pgq.%I RENAME TO %I', v_index.child, v_index.name);
        END IF;
    END LOOP;
END
$$;

COMMENT ON FUNCTION pgq._name_partition_indexes(text) IS
'Internal: names the indexes of a partition of pgq._jobs after the partitioned indexes.';
