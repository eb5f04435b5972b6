-- pgq.queues: one row per entrypoint that has live jobs or settings. For psql:
--   SELECT * FROM pgq.queues;
-- queued: due now; scheduled: queued with run_at in the future; oldest_queued_age: how
-- long the oldest due job has waited; the settings columns show the effective values.
CREATE OR REPLACE VIEW pgq.queues AS
WITH counts AS (
    SELECT
        j.entrypoint,
        count(*) FILTER (WHERE j.status = 'queued' AND j.run_at <= now()) AS queued,
        count(*) FILTER (WHERE j.status = 'queued' AND j.run_at > now()) AS scheduled,
        count(*) FILTER (WHERE j.status = 'waiting') AS waiting,
        count(*) FILTER (WHERE j.status = 'running') AS running,
        count(*) FILTER (WHERE j.status = 'dead') AS dead,
        now() - min(j.run_at) FILTER (WHERE j.status = 'queued' AND j.run_at <= now()) AS oldest_queued_age
    FROM pgq._jobs AS j
    GROUP BY j.entrypoint
)

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
    coalesce(q.max_snoozes, d.max_snoozes) AS max_snoozes
FROM counts AS c
FULL JOIN pgq._queues AS q ON c.entrypoint = q.entrypoint
CROSS JOIN pgq._defaults() AS d
ORDER BY coalesce(c.entrypoint, q.entrypoint);

COMMENT ON VIEW pgq.queues IS 'One row per entrypoint: job counts by state, pause state and effective settings.';
