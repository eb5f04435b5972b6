-- pgq._final_outcome(job_id): the row of the outcome log that says how a finished job ended
-- (succeeded, canceled, dead), or none. Other rows record attempts, not fates: 'failed' one
-- per failure, 'snoozed' one per snooze (and a cancel, stamped with its transaction's
-- start, can log an earlier time than a snooze of the same job). The one reading of a
-- job's fate for pgq.job_status, pgq.job and the dependency checks.
-- Written to be inlined (LANGUAGE sql, STABLE, no SET clause): the log's BRIN index on
-- job_id finds it.
CREATE OR REPLACE FUNCTION pgq._final_outcome(job_id bigint)
RETURNS SETOF pgq._outcomes
LANGUAGE sql
STABLE
AS $$
    SELECT o.*
    FROM pgq._outcomes AS o
    WHERE o.job_id = _final_outcome.job_id AND o.outcome IN ('succeeded', 'canceled', 'dead')
    ORDER BY o.finished_at DESC
    LIMIT 1
$$;
