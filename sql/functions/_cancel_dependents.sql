-- pgq._cancel_dependents(job_ids, reason): these jobs ended dead or canceled, so the jobs
-- waiting for them can never run: cancel them (logged with the reason), and theirs in turn.
-- Returns the number of jobs canceled.
CREATE OR REPLACE FUNCTION pgq._cancel_dependents(job_ids bigint[], reason text)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ids bigint[] := job_ids;
    v_count integer := 0;
    v_round integer;
BEGIN
    WHILE v_ids IS NOT NULL LOOP
        WITH canceled AS (
            DELETE FROM pgq._jobs AS w
            WHERE w.status = 'waiting' AND w.depends_on && v_ids
            RETURNING w.*
        ),
        logged AS (
            INSERT INTO pgq._outcomes (
                job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, error,
                payload, headers, depends_on
            )
            SELECT c.id, c.entrypoint, 'canceled', c.priority, c.attempt, c.deliveries, c.enqueued_at, reason,
                   c.payload, c.headers, c.depends_on
            FROM canceled AS c
        )
        SELECT count(*), array_agg(c.id) FILTER (WHERE c.has_dependents) INTO v_round, v_ids
        FROM canceled AS c;
        v_count := v_count + v_round;
    END LOOP;
    RETURN v_count;
END
$$;
