-- pgq.settings: the effective settings of entrypoints, defaults filled in, whether or not
-- pgq.configure was ever called for them. Workers read the lease here to pace their
-- heartbeats and the timeout to stop handlers; from psql:
--   SELECT * FROM pgq.settings(ARRAY['email']);
-- Two call shapes, as pgq.claim has (a call shape keeps its result shape across releases;
-- new columns come through a new form):
--   pgq.settings(entrypoints, protocol => 2): this function, the row of 0.2.0 on
--     (max_deliveries, key_concurrency, max_snoozes added);
--   pgq.settings(entrypoints): the row of 0.1.0, the same settings (below).
-- Returns one row per distinct entrypoint. Raises PQ001 for invalid entrypoints or a
-- protocol other than 2.
CREATE OR REPLACE FUNCTION pgq.settings(entrypoints text[], protocol integer)
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
    IF protocol IS DISTINCT FROM 2 THEN
        PERFORM pgq._invalid('protocol', format('%s is not a settings protocol', coalesce(protocol::text, 'NULL')),
            'protocol => 2 returns the rows of 0.2.0 on; call pgq.settings without protocol for those of 0.1.0.');
    END IF;
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

COMMENT ON FUNCTION pgq.settings(text[], integer) IS
'Effective settings of entrypoints (defaults filled in): paused, max_attempts, backoff, lease, timeout, limits, retention, max_deliveries, key_concurrency, max_snoozes.';

-- The 0.1.0 form: the same settings, the columns of 0.1.0 ($1: entrypoints).
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
    retention interval
)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT
        s.entrypoint,
        s.paused,
        s.max_attempts,
        s.backoff_base,
        s.backoff_max,
        s.lease,
        s.timeout,
        s.concurrency,
        s.rate,
        s.retention
    FROM pgq.settings($1, 2) AS s;
END;

COMMENT ON FUNCTION pgq.settings(text[]) IS
'Effective settings of entrypoints (defaults filled in): paused, max_attempts, backoff, lease, timeout, limits, retention; the rows of 0.1.0.';
