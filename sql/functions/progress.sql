-- pgq.progress: a handler reports how far its job has come: a value (a fraction 0-1, or a
-- count of items done) and an optional note. Stored on the job (pgq.job's `progress`: the
-- last report, also after the job finished, until its outcome is pruned) and notified on
-- channel pgq_progress (payload: {"id", "value", "note", "delivery"} as JSON) at commit.
-- Fenced like pgq.complete: only the delivery that worker_id holds now may report.
-- Parameters: worker_id; job_id; delivery (the `deliveries` value pgq.claim returned);
--   value (0 to 1e15); note (optional, at most 1000 characters).
-- Returns TRUE when stored, NULL when this delivery does not hold the job (nothing stored,
-- nothing notified).
-- Raises PQ001 for invalid arguments, PQ010 for another role's worker.
CREATE OR REPLACE FUNCTION pgq.progress(
    worker_id uuid,
    job_id bigint,
    delivery integer,
    value numeric,
    note text DEFAULT NULL
)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty):
-- tests/py/sql/test_empty_queue_plans.py says why; JIT off, which that cost would start.
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pgq._check_step(worker_id, job_id, delivery, 'progress');
    IF value IS NULL OR value < 0 OR value > 1e15 OR value = 'NaN'::numeric THEN
        PERFORM pgq._invalid('value', format('%s is out of range', coalesce(value::text, 'NULL')),
            'Report a fraction from 0 to 1, or a count of items done.');
    END IF;
    IF char_length(note) > 1000 THEN
        PERFORM pgq._invalid('note', 'must be at most 1000 characters', 'Keep the note short: "page 3 of 10".');
    END IF;
    PERFORM FROM pgq._jobs AS j
    WHERE j.id = progress.job_id AND j.worker_id = progress.worker_id AND j.deliveries = progress.delivery
    FOR SHARE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    INSERT INTO pgq._progress AS p (job_id, value, note, delivery, updated_at)
    VALUES (progress.job_id, progress.value, progress.note, progress.delivery, clock_timestamp())
    ON CONFLICT ON CONSTRAINT _progress_pkey DO UPDATE
    SET value = excluded.value, note = excluded.note, delivery = excluded.delivery, updated_at = excluded.updated_at;
    PERFORM pg_notify('pgq_progress', jsonb_build_object(
        'id', progress.job_id, 'value', progress.value, 'note', progress.note, 'delivery', progress.delivery
    )::text);
    RETURN TRUE;
END
$$;

COMMENT ON FUNCTION pgq.progress(uuid, bigint, integer, numeric, text) IS
'Report a job''s progress (a fraction or a count, and a note) for the delivery holding it (fenced): stored (pgq.job) and notified on pgq_progress; NULL when this delivery no longer holds the job.';
