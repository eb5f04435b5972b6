-- pgq.cancel: queued and waiting jobs are canceled at once (they leave the hot table; the
-- outcome 'canceled' is logged); dead jobs are discarded (outcome 'dead'). For a running
-- job, cancellation is requested: its worker is notified at once, learns which jobs from
-- the heartbeat it then sends, and stops the handler; the job then ends canceled (if the
-- handler still finishes, it ends succeeded). Unknown or finished ids
-- are ignored. Jobs waiting for a canceled job (depends_on) are canceled too.
-- The jobs are locked in id order first, and then acted on as they are once locked: a
-- cancel never deadlocks with a completion (which locks a job, then its dependents), and
-- one that waited for a pgq.fail in flight cancels the job that fail re-queued.
-- Returns the number of jobs canceled or marked for cancellation (not counting the
-- dependents canceled with them). Raises PQ001.
CREATE OR REPLACE FUNCTION pgq.cancel(job_ids bigint[])
RETURNS integer
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
    v_canceled integer;
    v_requested integer;
    v_parents bigint[];
    v_holders uuid[];
BEGIN
    PERFORM pgq._check_ids('job_ids', job_ids);
    PERFORM 1 FROM pgq._jobs AS j WHERE j.id = ANY (job_ids) ORDER BY j.id FOR UPDATE;
    WITH canceled AS (
        DELETE FROM pgq._jobs AS j
        WHERE j.id = ANY (job_ids) AND j.status IN ('queued', 'waiting', 'dead')
        RETURNING j.*
    ),
    logged AS (
        INSERT INTO pgq._outcomes (
            job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, error,
            payload, headers, depends_on, concurrency_key, enqueued_by
        )
        SELECT c.id, c.entrypoint, CASE WHEN c.status = 'dead' THEN 'dead' ELSE 'canceled' END,
               c.priority, c.attempt, c.deliveries, c.enqueued_at,
               CASE WHEN c.status = 'dead' THEN c.last_error ELSE 'canceled by pgq.cancel' END,
               c.payload, c.headers, c.depends_on, c.concurrency_key, c.enqueued_by
        FROM canceled AS c
    )
    SELECT count(*), array_agg(c.id) INTO v_canceled, v_parents
    FROM canceled AS c;
    IF v_parents IS NOT NULL THEN
        PERFORM pgq._cancel_dependents(v_parents, 'a dependency was canceled');
    END IF;

    -- The holders are told at once (NOTIFY pgq, payload 'cancel:<worker id>'): their next
    -- heartbeat, which they send when told, returns the ids to stop.
    WITH requested AS (
        UPDATE pgq._jobs AS j
        SET cancel_requested = TRUE
        -- Running jobs are those with a worker (_jobs_held_check); tested that way, the
        -- planner keeps to the primary key instead of walking the running index (see
        -- pgq.complete).
        WHERE j.id = ANY (job_ids) AND j.worker_id IS NOT NULL AND NOT j.cancel_requested
        RETURNING j.worker_id
    )
    SELECT count(*), array_agg(DISTINCT r.worker_id) INTO v_requested, v_holders FROM requested AS r;
    PERFORM pg_notify('pgq', 'cancel:' || h.id) FROM unnest(v_holders) AS h (id);
    RETURN v_canceled + v_requested;
END
$$;

COMMENT ON FUNCTION pgq.cancel(bigint[]) IS
'Cancel jobs: queued, waiting and dead at once, running ones at their next heartbeat; returns how many.';
