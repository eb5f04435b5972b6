-- pgq._trg_count_outcomes(): statement trigger after INSERT on pgq._outcomes (see sql/setup.sql):
-- adds the statement's new outcomes to pgq._outcome_counts, one upsert per entrypoint and
-- outcome of the statement (a pgq.complete of 100 jobs of one entrypoint: one row updated).
-- The counted outcome: succeeded, failed (an attempt failed, the job will run again), dead
-- (an attempt failed and left the job dead: fatal), canceled, snoozed, discarded (a dead
-- job removed from the queue). The row is the writing backend's shard (pid modulo 16):
-- workers on other connections update other rows, so they do not wait for each other's
-- commit here.
CREATE OR REPLACE FUNCTION pgq._trg_count_outcomes()
RETURNS trigger
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO pgq._outcome_counts AS c (entrypoint, outcome, shard, jobs, wait_seconds, run_seconds)
    SELECT
        n.entrypoint,
        CASE
            WHEN n.fatal THEN 'dead'
            WHEN n.outcome = 'dead' THEN 'discarded'
            ELSE n.outcome
        END,
        (pg_catalog.pg_backend_pid() % 16)::smallint,
        count(*),
        coalesce(sum(extract(EPOCH FROM n.started_at - n.enqueued_at)), 0)::float8,
        coalesce(sum(extract(EPOCH FROM n.finished_at - n.started_at)), 0)::float8
    FROM new_outcomes AS n
    GROUP BY 1, 2
    -- In one order, so that two statements upserting the same rows cannot deadlock.
    ORDER BY 1, 2
    ON CONFLICT (entrypoint, outcome, shard) DO UPDATE
    SET jobs = c.jobs + excluded.jobs,
        wait_seconds = c.wait_seconds + excluded.wait_seconds,
        run_seconds = c.run_seconds + excluded.run_seconds;
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION pgq._trg_count_outcomes() IS
'Internal: trigger adding new outcomes to the cumulative counts of pgq.outcome_totals.';
