-- pgq._release(worker_ids, keep): running jobs held by these workers (stopped, dead, or
-- one that lost a claim's reply), except those in keep, go back to queued, or to canceled
-- when cancellation was requested. The UPDATE re-checks that the job
-- is still running under that worker, so a job completed meanwhile is never touched.
-- Returns the number of jobs released or canceled.
CREATE OR REPLACE FUNCTION pgq._release(worker_ids uuid[], keep bigint[] DEFAULT '{}')
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_released integer;
    v_canceled integer;
    v_parents bigint[];
    v_entrypoints text[];
BEGIN
    WITH canceled AS (
        DELETE FROM pgq._jobs AS j
        WHERE j.status = 'running' AND j.worker_id = ANY (worker_ids) AND j.cancel_requested
          AND j.id <> ALL (keep)
        RETURNING j.*
    ),
    logged AS (
        INSERT INTO pgq._outcomes (
            job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, started_at, worker_id, error,
            payload, headers, depends_on
        )
        SELECT c.id, c.entrypoint, 'canceled', c.priority, c.attempt, c.deliveries, c.enqueued_at,
               c.started_at, c.worker_id, 'canceled while its worker was lost',
               c.payload, c.headers, c.depends_on
        FROM canceled AS c
    )
    SELECT count(*), array_agg(c.id) FILTER (WHERE c.has_dependents) INTO v_canceled, v_parents
    FROM canceled AS c;
    IF v_parents IS NOT NULL THEN
        PERFORM pgq._cancel_dependents(v_parents, 'a dependency was canceled');
    END IF;

    WITH released AS (
        UPDATE pgq._jobs AS j
        SET status = 'queued', worker_id = NULL, started_at = NULL
        WHERE j.status = 'running' AND j.worker_id = ANY (worker_ids) AND j.id <> ALL (keep)
        RETURNING j.entrypoint
    )
    SELECT count(*), array_agg(DISTINCT r.entrypoint) INTO v_released, v_entrypoints
    FROM released AS r;
    -- Wake workers for the released jobs.
    PERFORM pg_notify('pgq', e.ep) FROM unnest(v_entrypoints) AS e (ep);
    RETURN v_released + v_canceled;
END
$$;
