-- pgq.configure: per-entrypoint settings; every argument after entrypoint defaults to NULL,
-- which leaves that setting as it is. Call with named notation:
--   SELECT pgq.configure('email', max_attempts => 10, lease => '2 minutes');
-- max_attempts (1-1000, default 5): runs before a job is dead.
-- backoff_base, backoff_max (default 1 s, 1 h): retry delay base * 2^(attempt-1), capped.
-- lease (1 s to 1 day, default 30 s): how long a claimed job stays held without a heartbeat
--   before it is re-delivered.
-- timeout (default 1 h): the longest a handler may run; the worker stops it, the reaper
--   fails it after timeout + lease.
-- concurrency (1-1000000): the most running jobs across all workers; 0 removes the limit
--   (no limit by default).
-- rate (0.001-1000000): jobs started per second across all workers; 0 removes the limit
--   (no limit by default). See pgq.claim for the bucket.
-- retention (default 7 days): how long outcomes stay in the log.
-- max_deliveries (0-1000, default 10): a job whose worker is lost (crashed, killed, cut off
--   past its lease) this many times goes dead instead of being delivered again, so a job
--   that kills its worker cannot do so forever; 0 removes the cap.
-- key_concurrency (1-1000000): the most running jobs of one concurrency key across all
--   workers; 1 runs each key's jobs one at a time, in order (per-key FIFO); 0 removes the
--   limit (no limit by default).
-- max_snoozes (0-1000000, default 100): how often one job may snooze (pgq.snooze); a
--   snooze past it fails the job instead.
-- create_new (default NULL: TRUE, the behaviour of 0.2.0 and earlier): FALSE refuses an
--   entrypoint that nothing names yet (no job, settings, schedule or worker), so that a
--   typo does not leave a row in pgq.queues; TRUE sets one up before its first job.
-- Returns nothing. Raises PQ001 for invalid arguments; nothing changes then.
CREATE OR REPLACE FUNCTION pgq.configure(
    entrypoint text,
    max_attempts integer DEFAULT NULL,
    backoff_base interval DEFAULT NULL,
    backoff_max interval DEFAULT NULL,
    lease interval DEFAULT NULL,
    timeout interval DEFAULT NULL,
    concurrency integer DEFAULT NULL,
    rate numeric DEFAULT NULL,
    retention interval DEFAULT NULL,
    max_deliveries integer DEFAULT NULL,
    key_concurrency integer DEFAULT NULL,
    max_snoozes integer DEFAULT NULL,
    create_new boolean DEFAULT NULL
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_base interval;
    v_max interval;
BEGIN
    PERFORM pgq._check_entrypoint('entrypoint', entrypoint);
    IF max_attempts IS NOT NULL AND (max_attempts < 1 OR max_attempts > 1000) THEN
        PERFORM pgq._invalid('max_attempts', format('%s is out of range', max_attempts), 'Use 1 to 1000.');
    END IF;
    PERFORM pgq._check_interval('backoff_base', backoff_base, interval '0');
    PERFORM pgq._check_interval('backoff_max', backoff_max, interval '0');
    IF lease IS NOT NULL AND (lease < interval '1 second' OR lease > interval '1 day') THEN
        PERFORM pgq._invalid('lease', format('%s is out of range', lease), 'Use 1 second to 1 day.');
    END IF;
    PERFORM pgq._check_interval('timeout', timeout, interval '1 second');
    IF concurrency IS NOT NULL AND (concurrency < 0 OR concurrency > 1000000) THEN
        PERFORM pgq._invalid('concurrency', format('%s is out of range', concurrency),
            'Use 1 to 1000000, or 0 for no limit; to stop an entrypoint use pgq.pause().');
    END IF;
    IF rate IS NOT NULL AND rate <> 0 AND NOT rate BETWEEN 0.001 AND 1000000 THEN
        PERFORM pgq._invalid('rate', format('%s is out of range', rate),
            'Use 0.001 to 1000000 jobs per second, or 0 for no limit.');
    END IF;
    PERFORM pgq._check_interval('retention', retention, interval '1 minute');
    IF max_deliveries IS NOT NULL AND (max_deliveries < 0 OR max_deliveries > 1000) THEN
        PERFORM pgq._invalid('max_deliveries', format('%s is out of range', max_deliveries),
            'Use 1 to 1000 lost deliveries before a job is dead, or 0 for no cap.');
    END IF;
    IF key_concurrency IS NOT NULL AND (key_concurrency < 0 OR key_concurrency > 1000000) THEN
        PERFORM pgq._invalid('key_concurrency', format('%s is out of range', key_concurrency),
            'Use 1 to 1000000 running jobs per key (1: one at a time, in order), or 0 for no limit.');
    END IF;
    IF max_snoozes IS NOT NULL AND (max_snoozes < 0 OR max_snoozes > 1000000) THEN
        PERFORM pgq._invalid('max_snoozes', format('%s is out of range', max_snoozes),
            'Use 0 to 1000000 snoozes per job (0: a snooze fails the job).');
    END IF;

    SELECT coalesce(configure.backoff_base, q.backoff_base, (pgq._defaults()).backoff_base),
           coalesce(configure.backoff_max, q.backoff_max, (pgq._defaults()).backoff_max)
    INTO v_base, v_max
    FROM (SELECT 1) AS one
    LEFT JOIN pgq._queues AS q ON q.entrypoint = configure.entrypoint;
    IF v_max < v_base THEN
        PERFORM pgq._invalid('backoff_max', format('%s is below backoff_base %s', v_max, v_base),
            'backoff_max caps the delay, so it must be at least backoff_base.');
    END IF;
    -- Last: a wrong value is reported as such whatever the entrypoint.
    IF NOT coalesce(create_new, TRUE) THEN
        PERFORM pgq._check_known_entrypoint('entrypoint', entrypoint);
    END IF;

    INSERT INTO pgq._queues AS q (
        entrypoint, max_attempts, backoff_base, backoff_max, lease, timeout, concurrency, rate, retention,
        max_deliveries, key_concurrency, max_snoozes
    )
    VALUES (
        configure.entrypoint, configure.max_attempts, configure.backoff_base, configure.backoff_max,
        configure.lease, configure.timeout, nullif(configure.concurrency, 0),
        nullif(configure.rate, 0), configure.retention, configure.max_deliveries,
        nullif(configure.key_concurrency, 0), configure.max_snoozes
    )
    ON CONFLICT ON CONSTRAINT _queues_pkey DO UPDATE
    SET max_attempts = coalesce(excluded.max_attempts, q.max_attempts),
        backoff_base = coalesce(excluded.backoff_base, q.backoff_base),
        backoff_max = coalesce(excluded.backoff_max, q.backoff_max),
        lease = coalesce(excluded.lease, q.lease),
        timeout = coalesce(excluded.timeout, q.timeout),
        concurrency = CASE WHEN configure.concurrency = 0 THEN NULL
                           ELSE coalesce(excluded.concurrency, q.concurrency) END,
        rate = CASE WHEN configure.rate = 0 THEN NULL ELSE coalesce(excluded.rate, q.rate) END,
        -- A new rate starts with a full bucket.
        rate_tokens = CASE WHEN configure.rate IS NULL THEN q.rate_tokens END,
        rate_refilled_at = CASE WHEN configure.rate IS NULL THEN q.rate_refilled_at END,
        retention = coalesce(excluded.retention, q.retention),
        max_deliveries = coalesce(excluded.max_deliveries, q.max_deliveries),
        key_concurrency = CASE WHEN configure.key_concurrency = 0 THEN NULL
                               ELSE coalesce(excluded.key_concurrency, q.key_concurrency) END,
        max_snoozes = coalesce(excluded.max_snoozes, q.max_snoozes),
        updated_at = now();
END
$$;

COMMENT ON FUNCTION pgq.configure(
    text, integer, interval, interval, interval, interval, integer, numeric, interval, integer, integer, integer,
    boolean
) IS
'Set per-entrypoint settings (named arguments; NULL leaves a setting as it is).';
