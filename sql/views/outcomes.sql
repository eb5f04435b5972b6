-- pgq.outcomes: the append-only outcome log. outcome: succeeded, canceled, dead (a dead job
-- that was discarded) are terminal, one per job; failed is one row per failed attempt.
CREATE OR REPLACE VIEW pgq.outcomes AS
SELECT
    o.job_id,
    o.entrypoint,
    o.outcome,
    o.priority,
    o.attempt,
    o.deliveries,
    o.enqueued_at,
    o.started_at,
    o.finished_at,
    o.worker_id,
    o.error,
    o.result,
    o.concurrency_key
FROM pgq._outcomes AS o;

COMMENT ON VIEW pgq.outcomes IS 'Outcome log: one terminal row per finished job, one failed row per failed attempt.';
