-- pgq._check_ids(argument, value): a non-NULL array of job ids without NULL elements, at
-- most 10000 long (an empty array is valid and means "nothing").
CREATE OR REPLACE FUNCTION pgq._check_ids(argument text, value bigint[])
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL THEN
        PERFORM pgq._invalid(argument, 'must not be NULL', 'Pass an array of job ids, e.g. ARRAY[1, 2].');
    ELSIF array_ndims(value) > 1 THEN
        PERFORM pgq._invalid(argument, format('has %s dimensions', array_ndims(value)),
            'Pass a one-dimensional array of job ids, e.g. ARRAY[1, 2].');
    ELSIF cardinality(value) > 10000 THEN
        PERFORM pgq._invalid(argument, format('has %s elements', cardinality(value)),
            'At most 10000 job ids per call; split the call.');
    ELSIF array_position(value, NULL) IS NOT NULL THEN
        PERFORM pgq._invalid(argument, 'contains NULL', 'Remove the NULL elements.');
    END IF;
END
$$;
