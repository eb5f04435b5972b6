-- pgq._cancel_dependents(job_ids, reason): these jobs ended dead or canceled, so the jobs
-- waiting for them can never run: cancel them (logged with the reason), and theirs in turn.
-- Each round locks the dependents in id order before it deletes them: every function that
-- locks several jobs takes them in id order (dependencies before dependents), so none can
-- deadlock with another. With no job waiting, each round is one probe of an empty index.
-- Returns the number of jobs canceled.
CREATE OR REPLACE FUNCTION pgq._cancel_dependents(job_ids bigint[], reason text)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ids bigint[] := job_ids;
    v_locked bigint[];
    v_count integer := 0;
    v_round integer;
BEGIN
    WHILE v_ids IS NOT NULL AND v_ids <> '{}' LOOP
        SELECT array_agg(l.id) INTO v_locked
        FROM (
            SELECT w.id FROM pgq._jobs AS w
            WHERE w.status = 'waiting' AND w.depends_on && v_ids
            ORDER BY w.id
            FOR UPDATE
        ) AS l;
        EXIT WHEN v_locked IS NULL;
        WITH canceled AS (
            DELETE FROM pgq._jobs AS w
            WHERE w.id = ANY (v_locked) AND w.status = 'waiting'
            RETURNING w.*
        ),
        logged AS (
            INSERT INTO pgq._outcomes (
                job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, error,
                payload, headers, depends_on, concurrency_key, enqueued_by
            )
            SELECT c.id, c.entrypoint, 'canceled', c.priority, c.attempt, c.deliveries, c.enqueued_at, reason,
                   c.payload, c.headers, c.depends_on, c.concurrency_key, c.enqueued_by
            FROM canceled AS c
        )
        SELECT count(*), array_agg(c.id) INTO v_round, v_ids
        FROM canceled AS c;
        v_count := v_count + v_round;
    END LOOP;
    RETURN v_count;
END
$$;
