-- pgq._trg_marks_inserted(): statement trigger after INSERT on pgq._jobs (see sql/setup.sql):
-- the first new queued job of each entrypoint, in claim order, lowers its mark if needed.
-- Once per statement, so an enqueue_batch of 1000 jobs pays for one check, not 1000.
CREATE OR REPLACE FUNCTION pgq._trg_marks_inserted()
RETURNS trigger
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_first record;
BEGIN
    FOR v_first IN
        SELECT DISTINCT ON (n.entrypoint) n.entrypoint, -n.priority::bigint AS neg_priority, n.run_at, n.id
        FROM new_jobs AS n
        WHERE n.status = 'queued'
        ORDER BY n.entrypoint, -n.priority::bigint, n.run_at, n.id
    LOOP
        PERFORM pgq._lower_mark(v_first.entrypoint, v_first.neg_priority, v_first.run_at, v_first.id);
    END LOOP;
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION pgq._trg_marks_inserted() IS
'Internal: trigger keeping the claim marks below newly inserted queued jobs.';
