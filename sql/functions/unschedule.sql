-- pgq.unschedule: remove a periodic job. Jobs it already enqueued are not touched.
-- Returns true when the schedule existed. Raises PQ001 for a NULL name.
CREATE OR REPLACE FUNCTION pgq.unschedule(name text)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    IF name IS NULL THEN
        PERFORM pgq._invalid('name', 'must not be NULL', 'Pass the name given to pgq.schedule.');
    END IF;
    DELETE FROM pgq._schedules AS s WHERE s.name = unschedule.name;
    RETURN FOUND;
END
$$;

COMMENT ON FUNCTION pgq.unschedule(text) IS 'Remove a periodic job; returns whether it existed.';
