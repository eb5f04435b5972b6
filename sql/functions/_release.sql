-- pgq._release(worker_ids, keep, lost): running jobs held by these workers (stopped, dead,
-- or a live one that does not run them), except those in keep, go back to queued, or to
-- canceled when cancellation was requested. Rows are locked with SKIP LOCKED:
-- a job that another transaction is settling right now (a late complete, a cancel) is left
-- to it, and the sweep never waits or deadlocks; what is skipped, the next sweep finds.
-- lost: the workers were lost (reaped), so each job counts a lost delivery, and a job that
-- lost its worker max_deliveries times goes dead (a poison pill: it keeps killing its
-- worker) instead of being delivered again.
-- max_jobs (NULL: all): release at most that many (a sweep's batch; the rest stay held, for
-- the next batch or sweep).
-- claimed_before (NULL: any): only jobs claimed before then. A worker's own list of the jobs
-- it runs (keep) is true of the moment it was sent: a heartbeat or pgq.release the worker
-- gave up on (its deadline passed) can still run later, once a lock it waited for is free,
-- and must not release a job the worker claimed after it (the job would run twice at once).
-- Returns the number of jobs released, canceled or killed.
CREATE OR REPLACE FUNCTION pgq._release(
    worker_ids uuid[],
    keep bigint[] DEFAULT '{}',
    lost boolean DEFAULT FALSE,
    max_jobs integer DEFAULT NULL,
    claimed_before timestamptz DEFAULT NULL
)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_ids bigint[];
    v_canceled bigint[];
    v_dead bigint[];
    v_released integer;
    v_entrypoints text[];
    v_now timestamptz := clock_timestamp();
BEGIN
    -- One lookup per worker, by equality: the running index then skips the entries of
    -- other workers inside the index, without visiting their rows (`= ANY` on its second
    -- column is only a filter, checked on each row, and under a held snapshot the running
    -- index keeps an entry for every job claimed since). `j.entrypoint >= ''` holds for every
    -- job: it bounds the index's first column so that PostgreSQL 18's planner skips through
    -- it by worker_id, as 14 to 17 do without it, instead of walking _jobs_started_idx.
    SELECT array_agg(b.id ORDER BY b.id) INTO v_ids
    FROM (
        SELECT l.id
        FROM (SELECT DISTINCT u.id FROM unnest(worker_ids) AS u (id)) AS w
        CROSS JOIN LATERAL (
            SELECT j.id FROM pgq._jobs AS j
            WHERE j.status = 'running' AND j.entrypoint >= '' AND j.worker_id = w.id AND j.id <> ALL (keep)
              -- A claim's started_at is its transaction's start (or, rate-limited, a clock
              -- read later): a claim that began after the caller's statement is left alone.
              AND (_release.claimed_before IS NULL OR j.started_at < _release.claimed_before)
            LIMIT _release.max_jobs
            FOR UPDATE SKIP LOCKED
        ) AS l
        -- Rows past the limit are not fetched, so not locked.
        LIMIT _release.max_jobs
    ) AS b;
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;

    WITH canceled AS (
        DELETE FROM pgq._jobs AS j
        WHERE j.id = ANY (v_ids) AND j.cancel_requested
        RETURNING j.*
    ),
    logged AS (
        INSERT INTO pgq._outcomes (
            job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, started_at, finished_at,
            worker_id, error, payload, headers, depends_on, concurrency_key, enqueued_by
        )
        SELECT c.id, c.entrypoint, 'canceled', c.priority, c.attempt + 1, c.deliveries, c.enqueued_at,
               c.started_at, v_now, c.worker_id, 'canceled while its worker was lost',
               c.payload, c.headers, c.depends_on, c.concurrency_key, c.enqueued_by
        FROM canceled AS c
    )
    SELECT array_agg(c.id) INTO v_canceled FROM canceled AS c;
    IF v_canceled IS NOT NULL THEN
        PERFORM pgq._cancel_dependents(v_canceled, 'a dependency was canceled');
    END IF;

    WITH held AS (
        SELECT k.id, k.worker_id,
               _release.lost AND cap.n > 0 AND k.lost + 1 >= cap.n AS poisoned, cap.n AS cap
        FROM pgq._jobs AS k
        LEFT JOIN pgq._queues AS q ON q.entrypoint = k.entrypoint
        CROSS JOIN LATERAL (
            SELECT coalesce(q.max_deliveries, d.max_deliveries) AS n FROM pgq._default_settings AS d
        ) AS cap
        -- Held means running (_jobs_held_check), and by the primary key: a test of status
        -- would let the planner walk the running index (see pgq.fail).
        WHERE k.id = ANY (v_ids) AND k.worker_id IS NOT NULL
    ),
    released AS (
        UPDATE pgq._jobs AS j
        SET status = CASE WHEN h.poisoned THEN 'dead' ELSE 'queued' END,
            lost = j.lost + CASE WHEN _release.lost THEN 1 ELSE 0 END,
            -- The poison pill's last delivery is a failed attempt (logged below): counted, as
            -- pgq._fail counts one, so that a dead job's attempt is always its last run's.
            attempt = j.attempt + CASE WHEN h.poisoned THEN 1 ELSE 0 END,
            delivery_reason = 'lost',
            last_error = CASE WHEN h.poisoned
                THEN format('lost its worker %s times (max_deliveries %s): it may crash its worker',
                            j.lost + 1, h.cap)
                ELSE j.last_error END,
            worker_id = NULL,
            started_at = NULL
        FROM held AS h
        WHERE j.id = h.id
        RETURNING j.id, j.entrypoint, j.priority, j.attempt, j.deliveries, j.enqueued_at, j.last_error,
                  j.concurrency_key, h.poisoned, h.worker_id AS held_by
    ),
    logged AS (
        INSERT INTO pgq._outcomes (
            job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, finished_at, worker_id,
            error, fatal, concurrency_key
        )
        SELECT r.id, r.entrypoint, 'failed', r.priority, r.attempt, r.deliveries, r.enqueued_at, v_now,
               r.held_by, r.last_error, TRUE, r.concurrency_key
        FROM released AS r
        WHERE r.poisoned
    )
    SELECT count(*), array_agg(DISTINCT r.entrypoint) FILTER (WHERE NOT r.poisoned),
           array_agg(r.id) FILTER (WHERE r.poisoned)
    INTO v_released, v_entrypoints, v_dead
    FROM released AS r;
    IF v_dead IS NOT NULL THEN
        PERFORM pgq._cancel_dependents(v_dead, 'a dependency is dead');
    END IF;
    -- Wake workers for the released jobs.
    PERFORM pg_notify('pgq', e.ep) FROM unnest(v_entrypoints) AS e (ep);
    RETURN v_released + coalesce(cardinality(v_canceled), 0);
END
$$;
