-- pgq.resume: claims take the entrypoint's jobs again; idle workers are woken.
-- Returns nothing. Raises PQ001 for an invalid entrypoint.
CREATE OR REPLACE FUNCTION pgq.resume(entrypoint text)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pgq._check_entrypoint('entrypoint', entrypoint);
    UPDATE pgq._queues AS q
    SET paused = FALSE, updated_at = now()
    WHERE q.entrypoint = resume.entrypoint AND q.paused;
    IF FOUND THEN
        PERFORM pg_notify('pgq', resume.entrypoint);
    END IF;
END
$$;

COMMENT ON FUNCTION pgq.resume(text) IS 'Let claims take an entrypoint''s jobs again.';
