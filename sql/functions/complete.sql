-- pgq.complete: batch completion, fenced. Acts only on jobs that worker_id holds now (a
-- worker presumed dead whose jobs were re-delivered completes nothing). Completed jobs
-- leave the hot table and their outcome ('succeeded', with enqueued/started/finished
-- times) is appended to the outcome log, in one statement. Jobs waiting for them
-- (depends_on) are queued when all their dependencies have succeeded.
-- Parameters: worker_id; job_ids (at most 10000); results (optional, one jsonb per job id,
--   stored in the outcome log).
-- Returns the ids it completed; ids not returned were not held by this worker.
-- Raises PQ001 for invalid arguments.
CREATE OR REPLACE FUNCTION pgq.complete(worker_id uuid, job_ids bigint[], results jsonb[] DEFAULT NULL)
RETURNS SETOF bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_done bigint[];
    v_parents bigint[];
BEGIN
    IF worker_id IS NULL THEN
        PERFORM pgq._invalid('worker_id', 'must not be NULL', 'Pass the id that pgq.register_worker returned.');
    END IF;
    PERFORM pgq._check_ids('job_ids', job_ids);
    IF results IS NOT NULL THEN
        IF array_ndims(results) > 1 OR cardinality(results) <> cardinality(job_ids) THEN
            PERFORM pgq._invalid('results', 'must have one element per job id',
                'Pass NULL, or a one-dimensional array as long as job_ids.');
        END IF;
        -- Whatever their lower bounds, pair the arrays by position.
        job_ids := ARRAY(SELECT unnest(job_ids));
        results := ARRAY(SELECT unnest(results));
    END IF;
    WITH done AS (
        DELETE FROM pgq._jobs AS j
        -- IS NOT DISTINCT FROM (worker_id is not NULL here) keeps the planner on the primary
        -- key: with `=` it may walk the running index, which a held snapshot fills with dead
        -- entries.
        WHERE j.id = ANY (job_ids) AND j.worker_id IS NOT DISTINCT FROM complete.worker_id
          AND j.status = 'running'
        RETURNING j.id, j.entrypoint, j.priority, j.attempt, j.deliveries, j.enqueued_at, j.started_at,
                  j.has_dependents, j.payload, j.headers, j.depends_on
    ),
    logged AS (
        INSERT INTO pgq._outcomes (
            job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, started_at,
            worker_id, result, payload, headers, depends_on
        )
        SELECT d.id, d.entrypoint, 'succeeded', d.priority, d.attempt, d.deliveries, d.enqueued_at,
               d.started_at, complete.worker_id,
               CASE WHEN results IS NOT NULL THEN results[array_position(job_ids, d.id)] END,
               d.payload, d.headers, d.depends_on
        FROM done AS d
    )
    SELECT coalesce(array_agg(d.id), '{}'), array_agg(d.id) FILTER (WHERE d.has_dependents)
    INTO v_done, v_parents
    FROM done AS d;
    IF v_parents IS NOT NULL THEN
        PERFORM pgq._release_dependents(v_parents);
    END IF;
    RETURN QUERY SELECT unnest(v_done);
END
$$;

COMMENT ON FUNCTION pgq.complete(uuid, bigint[], jsonb[]) IS
'Complete jobs the worker holds (fenced); returns the ids completed.';
