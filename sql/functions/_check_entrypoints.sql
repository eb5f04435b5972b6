-- pgq._check_entrypoints(argument, value): a non-empty array of valid entrypoints.
CREATE OR REPLACE FUNCTION pgq._check_entrypoints(argument text, value text[])
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_entrypoint text;
BEGIN
    IF value IS NULL OR cardinality(value) = 0 THEN
        PERFORM pgq._invalid(argument, 'must be a non-empty array',
            'Pass the entrypoints to work on, e.g. ARRAY[''send_email''].');
    END IF;
    IF array_ndims(value) > 1 THEN
        PERFORM pgq._invalid(argument, format('has %s dimensions', array_ndims(value)),
            'Pass a one-dimensional array, e.g. ARRAY[''send_email''].');
    END IF;
    IF cardinality(value) > 1000 THEN
        PERFORM pgq._invalid(argument, format('has %s elements', cardinality(value)),
            'At most 1000 entrypoints per call.');
    END IF;
    FOREACH v_entrypoint IN ARRAY value LOOP
        PERFORM pgq._check_entrypoint(argument || ' element', v_entrypoint);
    END LOOP;
END
$$;
