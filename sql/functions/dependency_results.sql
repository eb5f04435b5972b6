-- pgq.dependency_results(job_id): the jobs a job depends on (its depends_on), each with its
-- status and, once it succeeded, its result: what a dependent job's handler reads to join
-- the results of the jobs it waited for (fan-in). A dependency that had already succeeded
-- when the job was enqueued is not among them: pgq.enqueue keeps in depends_on only the
-- jobs it must wait for (pass such a result in the payload).
-- Who may call it: whoever may read the dependent job (pgq._may_read: its producer, the
-- worker holding it, pgq_admin), for all of its dependencies: its producer chose them.
-- Parameters: job_id (live, or finished while its outcome is kept).
-- Returns one row per dependency, in id order: id, status (as
-- pgq.job_status; NULL once its outcome was pruned), result (of a succeeded dependency,
-- else NULL). Empty for a job without dependencies.
-- Raises PQ001 for a NULL id, PQ005 for an unknown id or one the caller may not read.
CREATE OR REPLACE FUNCTION pgq.dependency_results(job_id bigint)
RETURNS TABLE (id bigint, status text, result jsonb)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty):
-- tests/py/sql/test_empty_queue_plans.py says why; JIT off, which that cost would start.
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_depends_on bigint[];
    v_enqueued_by text;
    v_worker uuid;
BEGIN
    IF job_id IS NULL THEN
        PERFORM pgq._invalid('job_id', 'must not be NULL', 'Pass a job id returned by pgq.enqueue.');
    END IF;
    SELECT j.depends_on, j.enqueued_by, j.worker_id INTO v_depends_on, v_enqueued_by, v_worker
    FROM pgq._jobs AS j WHERE j.id = dependency_results.job_id;
    IF NOT FOUND THEN
        SELECT o.depends_on, o.enqueued_by INTO v_depends_on, v_enqueued_by
        FROM pgq._final_outcome(dependency_results.job_id) AS o;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'pgq: job % is unknown', dependency_results.job_id
                USING ERRCODE = 'PQ005',
                DETAIL = 'It was never enqueued, its outcome was pruned, or it is not yours to read.',
                HINT = 'Pass a job id returned by pgq.enqueue; finished jobs are kept for their entrypoint''s retention.';
        END IF;
    END IF;
    IF NOT pgq._may_read(v_enqueued_by, v_worker) THEN
        RAISE EXCEPTION 'pgq: job % is unknown', dependency_results.job_id
            USING ERRCODE = 'PQ005',
            DETAIL = 'It was never enqueued, its outcome was pruned, or it is not yours to read.',
            HINT = 'Pass a job id returned by pgq.enqueue; finished jobs are kept for their entrypoint''s retention.';
    END IF;
    RETURN QUERY
    SELECT d.id, coalesce(l.status, f.outcome), f.result
    FROM unnest(v_depends_on) AS d (id)
    LEFT JOIN pgq._jobs AS l ON l.id = d.id
    LEFT JOIN LATERAL (
        SELECT o.outcome, CASE WHEN o.outcome = 'succeeded' THEN o.result END AS result
        FROM pgq._final_outcome(d.id) AS o
        WHERE l.id IS NULL
    ) AS f ON TRUE
    ORDER BY d.id;
END
$$;

COMMENT ON FUNCTION pgq.dependency_results(bigint) IS
'The jobs a job depends on, in id order, with their status and (once succeeded) result: the fan-in of a dependent job.';
