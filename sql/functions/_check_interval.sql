-- pgq._check_interval(argument, value, minimum): NULL passes (= leave as is / default).
CREATE OR REPLACE FUNCTION pgq._check_interval(argument text, value interval, minimum interval)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NOT NULL AND (value < minimum OR value > interval '10 years') THEN
        PERFORM pgq._invalid(argument, format('%s is out of range', value),
            format('Use an interval from %s to 10 years.', minimum));
    END IF;
END
$$;
