-- pgq.complete: batch completion, fenced. Acts only on jobs that worker_id holds now (a
-- worker presumed dead whose jobs were re-delivered completes nothing), and, when
-- deliveries is given, only on the delivery the worker ran: a job that was re-queued under
-- a live worker (its timeout) and claimed again is settled by the new run alone, never by
-- the late call of the first. Completed jobs leave the hot table and their outcome
-- ('succeeded', with enqueued/started/finished times and the dedupe key, which an enqueue's
-- dedupe_window looks for) is appended to the outcome log.
-- Jobs waiting for them (depends_on) are queued when all their dependencies have
-- succeeded. Completing a job of a concurrency-limited entrypoint frees a slot: workers
-- are woken (NOTIFY pgq) to claim again.
-- Parameters: worker_id; job_ids (at most 10000); results (optional, one jsonb per job id,
--   stored in the outcome log); deliveries (optional, one per job id: the `deliveries`
--   value its claim returned).
-- Returns the ids it completed; ids not returned were not held by this worker (or this
-- delivery). Raises PQ001 for invalid arguments.
CREATE OR REPLACE FUNCTION pgq.complete(
    worker_id uuid,
    job_ids bigint[],
    results jsonb[] DEFAULT NULL,
    deliveries integer[] DEFAULT NULL
)
RETURNS SETOF bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty):
-- tests/py/sql/test_empty_queue_plans.py says why; JIT off, which that cost would start.
SET enable_seqscan = off
SET jit = off
-- Its statements plan well without knowing the arguments (the jobs by primary key): a
-- custom plan for every call cost most of a small completion's time (~300 us). The setting
-- holds for pgq._release_dependents too, whose statements read the waiting jobs' GIN index
-- either way.
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_done bigint[];
    v_role name;
    v_entrypoints text[];
    -- The wall clock: a transactional handler completes at the end of a long transaction.
    v_now timestamptz := clock_timestamp();
BEGIN
    -- The checks of a well-formed call as expressions and one read of the worker's row;
    -- anything else takes the checking functions, which raise (a call of each costs tens
    -- of microseconds, on every completion).
    SELECT w.registered_by INTO v_role FROM pgq._workers AS w WHERE w.id = complete.worker_id;
    IF (
        worker_id IS NOT NULL AND (v_role IS NULL OR v_role = session_user)
        AND coalesce(array_ndims(job_ids), 1) = 1 AND cardinality(job_ids) <= 10000
        AND array_position(job_ids, NULL) IS NULL
    ) IS NOT TRUE THEN
        PERFORM pgq._check_worker_role(worker_id);
        IF worker_id IS NULL THEN
            PERFORM pgq._invalid('worker_id', 'must not be NULL', 'Pass the id that pgq.register_worker returned.');
        END IF;
        PERFORM pgq._check_ids('job_ids', job_ids);
    END IF;
    IF results IS NOT NULL AND (array_ndims(results) > 1 OR cardinality(results) <> cardinality(job_ids)) THEN
        PERFORM pgq._invalid('results', 'must have one element per job id',
            'Pass NULL, or a one-dimensional array as long as job_ids.');
    END IF;
    IF deliveries IS NOT NULL AND (
        array_ndims(deliveries) > 1 OR cardinality(deliveries) <> cardinality(job_ids)
        OR array_position(deliveries, NULL) IS NOT NULL
    ) THEN
        PERFORM pgq._invalid('deliveries', 'must have one non-NULL element per job id',
            'Pass NULL, or the deliveries values the claim returned, in the order of job_ids.');
    END IF;
    IF results IS NOT NULL OR deliveries IS NOT NULL THEN
        -- Whatever their lower bounds, pair the arrays by position.
        job_ids := ARRAY(SELECT unnest(job_ids));
        IF results IS NOT NULL THEN
            results := ARRAY(SELECT unnest(results));
        END IF;
        IF deliveries IS NOT NULL THEN
            deliveries := ARRAY(SELECT unnest(deliveries));
        END IF;
    END IF;
    WITH done AS (
        DELETE FROM pgq._jobs AS j
        -- Only running jobs have a worker (_jobs_held_check), so no test of status: with one,
        -- the planner may walk all of the running index (statistics taken while nothing ran
        -- call it tiny), which a held snapshot fills with dead entries. IS NOT DISTINCT FROM
        -- (worker_id is not NULL here) keeps it on the primary key too.
        WHERE j.id = ANY (job_ids) AND j.worker_id IS NOT DISTINCT FROM complete.worker_id
          -- By (id, delivery) pairs: one batch may name two deliveries of the same job (the
          -- first was re-queued by its timeout, then claimed again), and only one is current.
          AND (complete.deliveries IS NULL
               OR (j.id, j.deliveries) IN (SELECT p.id, p.d FROM unnest(job_ids, complete.deliveries) AS p (id, d)))
        RETURNING j.id, j.entrypoint, j.priority, j.attempt, j.deliveries, j.enqueued_at, j.started_at,
                  j.payload, j.headers, j.depends_on, j.dedupe_key, j.concurrency_key, j.enqueued_by
    ),
    logged AS (
        INSERT INTO pgq._outcomes (
            job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, started_at,
            finished_at, worker_id, result, payload, headers, depends_on, dedupe_key, concurrency_key,
            enqueued_by
        )
        SELECT d.id, d.entrypoint, 'succeeded', d.priority, d.attempt + 1, d.deliveries, d.enqueued_at,
               d.started_at, v_now, complete.worker_id,
               r.result, d.payload, d.headers, d.depends_on, d.dedupe_key, d.concurrency_key, d.enqueued_by
        FROM done AS d
        LEFT JOIN (
            SELECT DISTINCT ON (p.id, p.d) p.id, p.d, p.result
            FROM unnest(job_ids, complete.deliveries, results) AS p (id, d, result)
            WHERE results IS NOT NULL
        ) AS r ON r.id = d.id AND (complete.deliveries IS NULL OR r.d = d.deliveries)
    )
    SELECT coalesce(array_agg(d.id), '{}'), array_agg(DISTINCT d.entrypoint)
    INTO v_done, v_entrypoints
    FROM done AS d;
    IF v_done = '{}' THEN
        RETURN;
    END IF;
    -- Whether any job waits at all (one descent of _jobs_waiting_any_idx; every waiting job
    -- has no worker), and only then whether one waits for these (the GIN index, once per id).
    -- Newest first: under a held snapshot the entries of jobs that waited and were released
    -- since stay, and the newest waiting job, if any, is the likeliest still to wait.
    IF (
        SELECT w.id FROM pgq._jobs AS w WHERE w.status = 'waiting' AND w.worker_id IS NULL ORDER BY w.id DESC LIMIT 1
    ) IS NOT NULL
       AND EXISTS (SELECT 1 FROM pgq._jobs AS w WHERE w.status = 'waiting' AND w.depends_on && v_done) THEN
        PERFORM pgq._release_dependents(v_done);
    END IF;
    PERFORM pg_notify('pgq', q.entrypoint)
    FROM pgq._queues AS q
    WHERE q.entrypoint = ANY (v_entrypoints) AND (q.concurrency IS NOT NULL OR q.key_concurrency IS NOT NULL);
    RETURN QUERY SELECT unnest(v_done);
END
$$;

COMMENT ON FUNCTION pgq.complete(uuid, bigint[], jsonb[], integer[]) IS
'Complete jobs the worker holds (fenced, per delivery when deliveries is given); returns the ids completed.';
