-- pgq._check_known_entrypoint(argument, value): raise PQ001 unless something names the
-- entrypoint: a live job, a row of settings (pgq.configure, pgq.pause), a schedule, or a
-- worker registration (any state; rows of workers gone for a day are pruned). pgq.pause and
-- pgq.configure call it when asked not to create an entrypoint (create_new => false), so
-- that a typo does not leave a permanent row in pgq.queues.
-- Each lookup is an index probe or a scan of a small table (schedules, workers).
CREATE OR REPLACE FUNCTION pgq._check_known_entrypoint(argument text, value text)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pgq._queues AS q WHERE q.entrypoint = value)
        OR EXISTS (SELECT 1 FROM pgq._jobs AS j WHERE j.entrypoint = value)
        OR EXISTS (SELECT 1 FROM pgq._schedules AS s WHERE s.entrypoint = value)
        OR EXISTS (SELECT 1 FROM pgq._workers AS w WHERE value = ANY (w.entrypoints)) THEN
        RETURN;
    END IF;
    PERFORM pgq._invalid(argument,
        format('%L is unknown: no job, setting, schedule or worker names it', value),
        'Check the name (pgq.queues lists the entrypoints); to set up an entrypoint before '
        || 'its first job, pass create_new => true (on the command line: --create).');
END
$$;
