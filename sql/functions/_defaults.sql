-- pgq._defaults(): the row of the view pgq._default_settings as one record, for
-- expressions such as (pgq._defaults()).lease in rarely run statements. Hot paths read the
-- view (constants to the planner); each call of this function costs tens of microseconds.
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
        d.max_attempts, d.backoff_base, d.backoff_max, d.lease, d.timeout, d.retention, d.max_deliveries,
        d.max_snoozes
    FROM pgq._default_settings AS d
$$;
