-- pgq._default_settings(): the settings of an entrypoint that pgq.configure never touched,
-- and the fallback for every setting left NULL: one row. One place, so code and docs cannot
-- disagree (pgq._defaults() returns the same row as a record).
-- A set-returning SQL function (STABLE or IMMUTABLE, no SET clause, not STRICT) is inlined
-- where it is read in FROM: the planner sees constants. A function returning a record is
-- never folded, and each call of it costs tens of microseconds: the claim reads this one.
CREATE OR REPLACE FUNCTION pgq._default_settings()
RETURNS TABLE (
    max_attempts integer,
    backoff_base interval,
    backoff_max interval,
    lease interval,
    timeout interval,
    retention interval,
    max_deliveries integer,
    max_snoozes integer
)
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $$
    SELECT
        5,
        interval '1 second',
        interval '1 hour',
        interval '30 seconds',
        interval '1 hour',
        interval '7 days',
        10,
        100
$$;
