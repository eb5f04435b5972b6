-- pgq.settings: the effective settings of entrypoints, defaults filled in, whether or not
-- pgq.configure was ever called for them. Workers read the lease here to pace their
-- heartbeats and the timeout to stop handlers; from psql:
--   SELECT * FROM pgq.settings(ARRAY['email']);
-- Returns one row per distinct entrypoint. Raises PQ001 for invalid entrypoints.
CREATE OR REPLACE FUNCTION pgq.settings(entrypoints text[])
RETURNS TABLE (
    entrypoint text,
    paused boolean,
    max_attempts integer,
    backoff_base interval,
    backoff_max interval,
    lease interval,
    timeout interval,
    concurrency integer,
    rate numeric,
    retention interval,
    max_deliveries integer,
    key_concurrency integer,
    max_snoozes integer
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pgq._check_entrypoints('entrypoints', entrypoints);
    RETURN QUERY
    SELECT
        e.ep,
        coalesce(q.paused, FALSE),
        coalesce(q.max_attempts, d.max_attempts),
        coalesce(q.backoff_base, d.backoff_base),
        coalesce(q.backoff_max, d.backoff_max),
        coalesce(q.lease, d.lease),
        coalesce(q.timeout, d.timeout),
        q.concurrency,
        q.rate,
        coalesce(q.retention, d.retention),
        coalesce(q.max_deliveries, d.max_deliveries),
        q.key_concurrency,
        coalesce(q.max_snoozes, d.max_snoozes)
    FROM (SELECT DISTINCT u.ep FROM unnest(settings.entrypoints) AS u (ep)) AS e
    CROSS JOIN pgq._defaults() AS d
    LEFT JOIN pgq._queues AS q ON q.entrypoint = e.ep
    ORDER BY e.ep;
END
$$;

COMMENT ON FUNCTION pgq.settings(text[]) IS
'Effective settings of entrypoints (defaults filled in): paused, max_attempts, backoff, lease, timeout, limits, retention, max_deliveries, key_concurrency, max_snoozes.';
