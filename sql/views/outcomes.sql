-- pgq.outcomes: the append-only outcome log. outcome: succeeded, canceled, dead (a dead job
-- that was discarded) are terminal, one per job; failed is one row per failed attempt.
-- attempt: the run the row is about, from 1 (a canceled or discarded job that was not
-- running: the runs it had made, 0 for none). Rows written before 0.3.0 counted the
-- attempt of a succeeded or snoozed row from 0.
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
