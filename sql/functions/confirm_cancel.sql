-- pgq.confirm_cancel: the worker stopped the handler of a job whose cancellation was
-- requested (pgq.cancel; the worker learns the ids from pgq.heartbeat) and settles it as
-- canceled. Unlike pgq.fail on such a job (which 0.2.0 workers call, and which logs the
-- cancellation as a spent attempt), no attempt is spent: the outcome log's 'canceled' row
-- carries the job's attempt as it was, like a cancel of a queued job. Fenced like pgq.fail:
-- acts only when worker_id still holds the job and, when delivery is given, only on that
-- delivery. Jobs waiting for it (depends_on) are canceled too.
-- Parameters: worker_id; job_id; delivery (optional: the `deliveries` value the claim
--   returned).
-- Returns 'canceled', or NULL when the worker no longer holds the job (that delivery).
-- Raises PQ001 for invalid arguments, and when the job is held but its cancellation was
-- not requested (settle it with pgq.complete or pgq.fail; nothing is changed); PQ010 for a
-- worker of another role.
CREATE OR REPLACE FUNCTION pgq.confirm_cancel(
    worker_id uuid,
    job_id bigint,
    delivery integer DEFAULT NULL
)
RETURNS text
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
DECLARE
    v_job pgq._jobs;
    v_limited boolean;
BEGIN
    IF worker_id IS NULL THEN
        PERFORM pgq._invalid('worker_id', 'must not be NULL', 'Pass the id that pgq.register_worker returned.');
    END IF;
    IF job_id IS NULL THEN
        PERFORM pgq._invalid('job_id', 'must not be NULL',
            'Pass the id of a job that pgq.heartbeat returned as to be canceled.');
    END IF;
    IF delivery IS NOT NULL AND delivery < 1 THEN
        PERFORM pgq._invalid('delivery', format('%s is out of range', delivery),
            'Pass the deliveries value that pgq.claim returned with the job (1 or more).');
    END IF;
    PERFORM pgq._check_worker_role(worker_id);
    -- By the primary key alone (see pgq.fail); held by this worker means running
    -- (_jobs_held_check: a non-NULL worker_id means status = 'running').
    SELECT j.* INTO v_job
    FROM pgq._jobs AS j
    WHERE j.id = confirm_cancel.job_id AND j.worker_id IS NOT DISTINCT FROM confirm_cancel.worker_id
      AND (confirm_cancel.delivery IS NULL OR j.deliveries = confirm_cancel.delivery)
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF NOT v_job.cancel_requested THEN
        PERFORM pgq._invalid('job_id', format('job %s: its cancellation was not requested', v_job.id),
            'Only a job that pgq.heartbeat returned is canceled this way; settle others with pgq.complete or pgq.fail.');
    END IF;
    SELECT q.concurrency IS NOT NULL OR q.key_concurrency IS NOT NULL INTO v_limited
    FROM pgq._queues AS q
    WHERE q.entrypoint = v_job.entrypoint;
    DELETE FROM pgq._jobs AS j WHERE j.id = v_job.id;
    INSERT INTO pgq._outcomes (
        job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, started_at, finished_at,
        worker_id, error, payload, headers, depends_on, concurrency_key, enqueued_by
    )
    VALUES (v_job.id, v_job.entrypoint, 'canceled', v_job.priority, v_job.attempt, v_job.deliveries,
            v_job.enqueued_at, v_job.started_at, clock_timestamp(), v_job.worker_id,
            'canceled by pgq.cancel while running', v_job.payload, v_job.headers, v_job.depends_on,
            v_job.concurrency_key, v_job.enqueued_by);
    PERFORM pgq._cancel_dependents(ARRAY[v_job.id], format('dependency %s was canceled', v_job.id));
    IF coalesce(v_limited, FALSE) THEN
        PERFORM pg_notify('pgq', v_job.entrypoint);
    END IF;
    RETURN 'canceled';
END
$$;

COMMENT ON FUNCTION pgq.confirm_cancel(uuid, bigint, integer) IS
'Settle a held job whose cancellation was requested as canceled, no attempt spent (fenced, per delivery when given): ''canceled'', or NULL if not held.';
