-- pgq._fail(job_id, error, retry_in): the fate of a failed run, shared by pgq.fail and the
-- reaper's timeout. The caller has checked that the job is running (and who holds it) and
-- holds its row lock.
-- attempt counts failures; while attempt < max_attempts (the job's, else the entrypoint's)
-- the job is queued again after retry_in, else exponential backoff with jitter:
-- backoff_base * 2^(attempt - 1), capped at backoff_max, then scaled by a random factor
-- in [0.5, 1) so that jobs failing together do not retry together. Otherwise it is dead:
-- kept in the hot table, visible and retryable with pgq.retry. A job whose cancellation
-- was requested is canceled instead. Each failure is logged as a 'failed' outcome.
-- Workers are woken (NOTIFY pgq) when the job is due again at once or when it freed a slot
-- of a concurrency-limited entrypoint.
-- Returns 'queued', 'dead' or 'canceled'.
CREATE OR REPLACE FUNCTION pgq._fail(job_id bigint, error text, retry_in interval)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_job pgq._jobs;
    v_max integer;
    v_base interval;
    v_cap interval;
    v_limited boolean;
    v_delay interval;
    v_status text;
    v_error text := left(error, 65536);
    -- The wall clock: a transactional handler fails at the end of a long transaction.
    v_now timestamptz := clock_timestamp();
BEGIN
    SELECT j.* INTO v_job FROM pgq._jobs AS j WHERE j.id = _fail.job_id;
    SELECT
        coalesce(v_job.max_attempts, q.max_attempts, d.max_attempts),
        coalesce(q.backoff_base, d.backoff_base),
        coalesce(q.backoff_max, d.backoff_max),
        q.concurrency IS NOT NULL OR q.key_concurrency IS NOT NULL
    INTO v_max, v_base, v_cap, v_limited
    FROM pgq._default_settings AS d
    LEFT JOIN pgq._queues AS q ON q.entrypoint = v_job.entrypoint;

    IF v_job.cancel_requested THEN
        DELETE FROM pgq._jobs AS j WHERE j.id = v_job.id;
        INSERT INTO pgq._outcomes (
            job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, started_at, finished_at,
            worker_id, error, payload, headers, depends_on, concurrency_key, enqueued_by
        )
        VALUES (v_job.id, v_job.entrypoint, 'canceled', v_job.priority, v_job.attempt + 1, v_job.deliveries,
                v_job.enqueued_at, v_job.started_at, v_now, v_job.worker_id, v_error,
                v_job.payload, v_job.headers, v_job.depends_on, v_job.concurrency_key, v_job.enqueued_by);
        PERFORM pgq._cancel_dependents(ARRAY[v_job.id], format('dependency %s was canceled', v_job.id));
        IF v_limited THEN
            PERFORM pg_notify('pgq', v_job.entrypoint);
        END IF;
        RETURN 'canceled';
    END IF;

    IF v_job.attempt + 1 < v_max THEN
        -- In seconds (double precision), so that a large attempt cannot overflow an interval.
        v_delay := coalesce(
            retry_in,
            make_interval(secs => least(
                extract(EPOCH FROM v_base) * power(2, least(v_job.attempt, 60)),
                extract(EPOCH FROM v_cap)
            ) * (0.5 + random() / 2))
        );
        v_status := 'queued';
    ELSE
        v_status := 'dead';
    END IF;
    INSERT INTO pgq._outcomes (
        job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, started_at, finished_at,
        worker_id, error, fatal, concurrency_key
    )
    VALUES (v_job.id, v_job.entrypoint, 'failed', v_job.priority, v_job.attempt + 1, v_job.deliveries,
            v_job.enqueued_at, v_job.started_at, v_now, v_job.worker_id, v_error, v_status = 'dead',
            v_job.concurrency_key);
    UPDATE pgq._jobs AS j
    SET status = v_status,
        attempt = j.attempt + 1,
        run_at = CASE WHEN v_status = 'queued' THEN now() + v_delay ELSE j.run_at END,
        worker_id = NULL,
        started_at = NULL,
        last_error = v_error,
        delivery_reason = 'retry'
    WHERE j.id = v_job.id;
    IF v_status = 'dead' THEN
        PERFORM pgq._cancel_dependents(ARRAY[v_job.id], format('dependency %s is dead', v_job.id));
    END IF;
    IF v_limited OR (v_status = 'queued' AND v_delay <= interval '0') THEN
        PERFORM pg_notify('pgq', v_job.entrypoint);
    END IF;
    RETURN v_status;
END
$$;
