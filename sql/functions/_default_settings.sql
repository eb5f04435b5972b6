-- pgq._default_settings: the settings of an entrypoint that pgq.configure never touched, and
-- the fallback for every setting left NULL: one row. One place, so code and docs cannot
-- disagree (pgq._defaults() returns the same row as a record).
-- A view of constants, so that reading it costs nothing: the planner sees the constants
-- (a function returning a record is never folded, and each call of it costs tens of
-- microseconds), and a view that reads it needs no privilege of its readers. It is created
-- with the functions, not the views: SQL functions that read it are checked at creation.
CREATE OR REPLACE VIEW pgq._default_settings AS
SELECT
    5 AS max_attempts,
    interval '1 second' AS backoff_base,
    interval '1 hour' AS backoff_max,
    interval '30 seconds' AS lease,
    interval '1 hour' AS timeout,
    interval '7 days' AS retention,
    10 AS max_deliveries,
    100 AS max_snoozes;

COMMENT ON VIEW pgq._default_settings IS
'Internal: the default settings of every entrypoint (one row of constants; pgq.settings shows the effective values).';
