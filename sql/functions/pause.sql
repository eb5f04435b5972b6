-- pgq.pause: claims skip the entrypoint until pgq.resume; running jobs finish; enqueue
-- still accepts jobs. Returns nothing. Raises PQ001 for an invalid entrypoint.
CREATE OR REPLACE FUNCTION pgq.pause(entrypoint text)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pgq._check_entrypoint('entrypoint', entrypoint);
    INSERT INTO pgq._queues AS q (entrypoint, paused)
    VALUES (pause.entrypoint, TRUE)
    ON CONFLICT ON CONSTRAINT _queues_pkey DO UPDATE SET paused = TRUE, updated_at = now();
END
$$;

COMMENT ON FUNCTION pgq.pause(text) IS 'Stop claims of an entrypoint until pgq.resume.';
