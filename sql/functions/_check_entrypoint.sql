-- pgq._check_entrypoint(argument, value): an entrypoint is a non-empty name of at most 200
-- characters without control characters (it travels in NOTIFY payloads and log lines).
-- pgq.enqueue's plain-call condition mirrors these checks: a change here changes it too.
CREATE OR REPLACE FUNCTION pgq._check_entrypoint(argument text, value text)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL OR btrim(value) = '' THEN
        PERFORM pgq._invalid(argument, 'must not be NULL or empty',
            'Pass the name of the entrypoint, e.g. ''send_email''.');
    ELSIF length(value) > 200 THEN
        PERFORM pgq._invalid(argument, format('is %s characters long', length(value)),
            'Entrypoint names are at most 200 characters.');
    ELSIF value <> btrim(value) THEN
        PERFORM pgq._invalid(argument, format('%L has leading or trailing spaces', value),
            'Remove the spaces: '' email'' and ''email'' would be different entrypoints.');
    ELSIF value ~ '[[:cntrl:]]' THEN
        PERFORM pgq._invalid(argument, 'contains control characters',
            'Use printable characters only.');
    END IF;
END
$$;
