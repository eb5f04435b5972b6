-- pgq.pause: claims skip the entrypoint until pgq.resume; running jobs finish; enqueue
-- still accepts jobs.
-- Parameters: entrypoint; create_new (default NULL: TRUE, the behaviour of 0.2.0 and
--   earlier): FALSE refuses an entrypoint that nothing names yet (no job, settings,
--   schedule or worker), so that a typo does not leave a paused row in pgq.queues; TRUE
--   pauses it before its first job.
-- Returns nothing. Raises PQ001 for an invalid entrypoint, or an unknown one with
-- create_new => false; nothing changes then.
CREATE OR REPLACE FUNCTION pgq.pause(entrypoint text, create_new boolean DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pgq._check_entrypoint('entrypoint', entrypoint);
    IF NOT coalesce(create_new, TRUE) THEN
        PERFORM pgq._check_known_entrypoint('entrypoint', entrypoint);
    END IF;
    INSERT INTO pgq._queues AS q (entrypoint, paused)
    VALUES (pause.entrypoint, TRUE)
    ON CONFLICT ON CONSTRAINT _queues_pkey DO UPDATE SET paused = TRUE, updated_at = now();
END
$$;

COMMENT ON FUNCTION pgq.pause(text, boolean) IS
'Stop claims of an entrypoint until pgq.resume; create_new => false refuses an unknown entrypoint.';
