-- pgq._check_dedupe(...): validation of the uniqueness options of pgq.enqueue_job (and so
-- pgq.enqueue, pgq.enqueue_batch). Each option needs a dedupe key: without one it would
-- silently do nothing. A window counts running and finished jobs, so it goes with the
-- 'live' scope only.
CREATE OR REPLACE FUNCTION pgq._check_dedupe(
    has_key boolean,
    dedupe_scope text,
    dedupe_mode text,
    dedupe_window interval,
    key_argument text DEFAULT 'dedupe_key'
)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF dedupe_scope IS NOT NULL AND dedupe_scope NOT IN ('queued', 'live') THEN
        PERFORM pgq._invalid('dedupe_scope', format('%L is not a scope', dedupe_scope),
            'Use ''queued'' (until the job starts), ''live'' (until it finishes; the default), or NULL.');
    END IF;
    IF dedupe_mode IS NOT NULL AND dedupe_mode NOT IN ('keep', 'replace') THEN
        PERFORM pgq._invalid('dedupe_mode', format('%L is not a mode', dedupe_mode),
            'Use ''keep'' (the existing job stays as it is; the default), ''replace'' (a job not started yet '
            || 'takes the new payload, priority, run_at, headers, max_attempts and concurrency_key), or NULL.');
    END IF;
    IF dedupe_window IS NOT NULL AND (dedupe_window <= interval '0' OR dedupe_window > interval '10 years') THEN
        PERFORM pgq._invalid('dedupe_window', format('%s is out of range', dedupe_window),
            'Use a positive interval up to 10 years, e.g. ''1 hour'', or NULL for no window.');
    END IF;
    IF dedupe_window IS NOT NULL AND dedupe_scope = 'queued' THEN
        PERFORM pgq._invalid('dedupe_window', 'cannot be combined with dedupe_scope ''queued''',
            'A window also counts running and finished jobs: use dedupe_scope ''live'' (or NULL) with it.');
    END IF;
    IF NOT has_key AND coalesce(dedupe_scope, dedupe_mode, dedupe_window::text) IS NOT NULL THEN
        PERFORM pgq._invalid(
            CASE WHEN dedupe_scope IS NOT NULL THEN 'dedupe_scope'
                 WHEN dedupe_mode IS NOT NULL THEN 'dedupe_mode'
                 ELSE 'dedupe_window' END,
            format('needs a %s', key_argument),
            format('Pass %s as well, or leave dedupe_scope, dedupe_mode and dedupe_window NULL.', key_argument));
    END IF;
END
$$;
