-- pgq.queues: one row per entrypoint that has live jobs or settings. For psql:
--   SELECT * FROM pgq.queues;
-- queued: due now; scheduled: queued with run_at in the future; oldest_queued_age: how
-- long the oldest due job has waited; the settings columns show the effective values.
-- The counts come from pgq._queue_counts through the partial indexes, without a scan of
-- the job table: up to pgq.queues_exact_limit jobs per state (default 10000, shared among
-- the entrypoints with jobs in that state, at least 100 each) are counted exactly; a larger
-- count is an estimate and the row's `approximate` is TRUE.
CREATE OR REPLACE VIEW pgq.queues AS
SELECT
    coalesce(c.entrypoint, q.entrypoint) AS entrypoint,
    coalesce(c.queued, 0) AS queued,
    coalesce(c.scheduled, 0) AS scheduled,
    coalesce(c.waiting, 0) AS waiting,
    coalesce(c.running, 0) AS running,
    coalesce(c.dead, 0) AS dead,
    c.oldest_queued_age,
    coalesce(q.paused, FALSE) AS paused,
    q.concurrency,
    q.rate,
    coalesce(q.max_attempts, d.max_attempts) AS max_attempts,
    coalesce(q.lease, d.lease) AS lease,
    coalesce(q.timeout, d.timeout) AS timeout,
    coalesce(q.backoff_base, d.backoff_base) AS backoff_base,
    coalesce(q.backoff_max, d.backoff_max) AS backoff_max,
    coalesce(q.retention, d.retention) AS retention,
    coalesce(q.max_deliveries, d.max_deliveries) AS max_deliveries,
    q.key_concurrency,
    coalesce(q.max_snoozes, d.max_snoozes) AS max_snoozes,
    coalesce(c.approximate, FALSE) AS approximate
FROM pgq._queue_counts() AS c
FULL JOIN pgq._queues AS q ON c.entrypoint = q.entrypoint
CROSS JOIN pgq._default_settings AS d
ORDER BY coalesce(c.entrypoint, q.entrypoint);

COMMENT ON VIEW pgq.queues IS
'One row per entrypoint: job counts by state (exact up to pgq.queues_exact_limit, estimated above it: approximate), pause state and effective settings.';
