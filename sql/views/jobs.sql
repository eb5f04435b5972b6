-- pgq.jobs: the live jobs (queued, waiting, running, dead), for psql and `pgq jobs`:
--   SELECT id, status, attempt, last_error FROM pgq.jobs WHERE entrypoint = 'email';
-- Finished jobs are in pgq.outcomes. depends_on: the jobs a waiting job waits for.
CREATE OR REPLACE VIEW pgq.jobs AS
SELECT
    j.id,
    j.entrypoint,
    j.status,
    j.priority,
    j.run_at,
    -- From 1: the run under way, the next run of a queued or waiting job, the last (failed)
    -- run of a dead one. The table counts failures.
    j.attempt + CASE WHEN j.status = 'dead' THEN 0 ELSE 1 END AS attempt,
    j.deliveries,
    coalesce(j.max_attempts, q.max_attempts, d.max_attempts) AS max_attempts,
    j.enqueued_at,
    j.started_at,
    j.worker_id,
    j.cancel_requested,
    j.dedupe_key,
    j.last_error,
    j.payload,
    j.headers,
    j.depends_on,
    j.concurrency_key,
    j.snoozes
FROM pgq._jobs AS j
LEFT JOIN pgq._queues AS q ON j.entrypoint = q.entrypoint
-- Inlined: constants (pgq._defaults() would run once per job listed).
CROSS JOIN pgq._default_settings AS d;

COMMENT ON VIEW pgq.jobs IS 'Live jobs: queued, waiting, running and dead.';
