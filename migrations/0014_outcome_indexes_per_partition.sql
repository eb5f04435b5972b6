-- The outcome log's indexes move from the partitioned table to each partition (see
-- sql/schema/tables.sql and pgq._index_outcomes): installed as the extension pgq, the
-- partitioned indexes belonged to the extension and the daily partitions did not, and
-- pg_restore met each daily partition's index twice. Dropping a partitioned index drops its
-- partitions' indexes; each partition gets the same three back, named after it. The BRIN
-- indexes are small; the dedupe index covers only the rows that had a dedupe key.
DROP INDEX pgq._outcomes_job_idx;
DROP INDEX pgq._outcomes_finished_idx;
DROP INDEX pgq._outcomes_dedupe_idx;

DO $$
DECLARE
    v_name text;
BEGIN
    FOR v_name IN
        SELECT c.relname
        FROM pg_catalog.pg_inherits AS i
        INNER JOIN pg_catalog.pg_class AS c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'pgq._outcomes'::regclass
        ORDER BY c.relname
    LOOP
        EXECUTE format(
            'CREATE INDEX %I ON pgq.%I USING brin (job_id) WITH (pages_per_range = 16)', v_name || '_job_idx', v_name
        );
        EXECUTE format('CREATE INDEX %I ON pgq.%I USING brin (finished_at)', v_name || '_finished_idx', v_name);
        EXECUTE format(
            'CREATE INDEX %I ON pgq.%I (entrypoint, dedupe_key, finished_at) WHERE dedupe_key IS NOT NULL',
            v_name || '_dedupe_idx', v_name
        );
    END LOOP;
END
$$;
