-- pgq._defaults(): the settings of an entrypoint that pgq.configure never touched, and the
-- fallback for every setting left NULL. One place, so code and docs cannot disagree.
CREATE OR REPLACE FUNCTION pgq._defaults(
    OUT max_attempts integer,
    OUT backoff_base interval,
    OUT backoff_max interval,
    OUT lease interval,
    OUT timeout interval,
    OUT retention interval,
    OUT max_deliveries integer,
    OUT max_snoozes integer
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
