-- pgq.snooze: a handler puts its job back without spending an attempt (the rate limit of an
-- API it calls, a resource not ready yet). Fenced like pgq.fail: acts only when worker_id
-- still holds the job and, when delivery is given, only on that delivery.
-- The job is queued again with run_at = now() + delay; attempt is unchanged, snoozes + 1;
-- the outcome log gets a 'snoozed' row (attempt, deliveries, started/finished, worker).
-- A job may snooze max_snoozes times (pgq.configure, default 100): past that, the snooze
-- fails the job instead (an attempt spent, retry or dead by the entrypoint's policy), so
-- that a job cannot snooze forever. A job whose cancellation was requested is canceled.
-- Parameters: worker_id; job_id; delay (0 to 10 years); delivery (optional: the
--   `deliveries` value the claim returned).
-- Returns 'snoozed'; 'queued', 'dead' or 'canceled' when it failed or canceled the job
-- instead (see pgq.fail); NULL when the worker no longer holds the job.
-- Raises PQ001 for invalid arguments.
CREATE OR REPLACE FUNCTION pgq.snooze(
    worker_id uuid,
    job_id bigint,
    delay interval,
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
    v_cap integer;
    v_limited boolean;
    v_now timestamptz := clock_timestamp();
BEGIN
    IF worker_id IS NULL THEN
        PERFORM pgq._invalid('worker_id', 'must not be NULL', 'Pass the id that pgq.register_worker returned.');
    END IF;
    IF job_id IS NULL THEN
        PERFORM pgq._invalid('job_id', 'must not be NULL', 'Pass the id of the job to snooze.');
    END IF;
    IF delay IS NULL THEN
        PERFORM pgq._invalid('delay', 'must not be NULL', 'Pass how long to wait, e.g. interval ''30 seconds''.');
    END IF;
    PERFORM pgq._check_worker_role(worker_id);
    PERFORM pgq._check_interval('delay', delay, interval '0');
    -- By the primary key alone (see pgq.fail); held by this worker means running
    -- (_jobs_held_check: a non-NULL worker_id means status = 'running').
    SELECT j.* INTO v_job
    FROM pgq._jobs AS j
    WHERE j.id = snooze.job_id AND j.worker_id IS NOT DISTINCT FROM snooze.worker_id
      AND (snooze.delivery IS NULL OR j.deliveries = snooze.delivery)
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT coalesce(q.max_snoozes, d.max_snoozes),
           q.concurrency IS NOT NULL OR q.key_concurrency IS NOT NULL
    INTO v_cap, v_limited
    FROM pgq._default_settings AS d
    LEFT JOIN pgq._queues AS q ON q.entrypoint = v_job.entrypoint;
    IF v_job.cancel_requested OR v_job.snoozes >= v_cap THEN
        RETURN pgq._fail(v_job.id,
            format('snoozed %s times (max_snoozes %s): a job may not snooze forever', v_job.snoozes + 1, v_cap),
            NULL);
    END IF;
    INSERT INTO pgq._outcomes (
        job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, started_at, finished_at,
        worker_id, error, concurrency_key
    )
    VALUES (v_job.id, v_job.entrypoint, 'snoozed', v_job.priority, v_job.attempt + 1, v_job.deliveries,
            v_job.enqueued_at, v_job.started_at, v_now, v_job.worker_id, format('snoozed for %s', delay),
            v_job.concurrency_key);
    UPDATE pgq._jobs AS j
    SET status = 'queued',
        run_at = now() + snooze.delay,
        snoozes = j.snoozes + 1,
        delivery_reason = 'snooze',
        worker_id = NULL,
        started_at = NULL
    WHERE j.id = v_job.id;
    IF v_limited OR delay = interval '0' THEN
        PERFORM pg_notify('pgq', v_job.entrypoint);
    END IF;
    RETURN 'snoozed';
END
$$;

COMMENT ON FUNCTION pgq.snooze(uuid, bigint, interval, integer) IS
'Put a held job back for delay without spending an attempt (fenced, per delivery when given): ''snoozed'', or NULL if not held.';
