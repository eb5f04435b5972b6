-- pgq.job(job_id): one job's whole story, live or finished (while its outcome is kept), as
-- one jsonb document:
--   id, entrypoint, status (as pgq.job_status), finished (true for succeeded, canceled and
--   dead), payload, headers, priority, run_at (live jobs), attempt (from 1: the run under
--   way, the next run of a queued job, the last run of a finished one; 0 for a job
--   canceled before it ran), max_attempts (live jobs), deliveries, dedupe_key (live and succeeded jobs), concurrency_key, snoozes (live
--   jobs), worker_id (running jobs, or the worker of the last run), cancel_requested,
--   enqueued_at, started_at, finished_at, result (of a succeeded job), error (the last
--   error, or why it was canceled),
--   attempts: every failed attempt, oldest first: {attempt, deliveries, started_at,
--     finished_at, worker_id, error (in full)},
--   depends_on: the jobs it waits or waited for: [{id, status}],
--   dependents: the jobs waiting for it now: [{id, status}],
--   steps: the durable steps it completed (pgq.record_step), in the order recorded:
--     [{name, result, delivery, recorded_at}],
--   progress: the last progress its handler reported (pgq.progress), or NULL:
--     {value, note, delivery, updated_at}.
-- Returns NULL for an unknown id (or one pruned from the outcome log), and for a job the
-- caller may not read (pgq._may_read: its producer, the worker holding it, pgq_admin);
-- dependencies and dependents it may not read show no status / are left out.
-- Raises PQ001 for a NULL id.
CREATE OR REPLACE FUNCTION pgq.job(job_id bigint)
RETURNS jsonb
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
    v_job pgq._jobs;
    v_out pgq._outcomes;
    v_doc jsonb;
    v_attempts jsonb;
    v_last_failure timestamptz;
    v_depends_on bigint[];
BEGIN
    IF job_id IS NULL THEN
        PERFORM pgq._invalid('job_id', 'must not be NULL', 'Pass a job id returned by pgq.enqueue.');
    END IF;

    SELECT
        coalesce(jsonb_agg(jsonb_build_object(
            'attempt', o.attempt, 'deliveries', o.deliveries, 'started_at', o.started_at,
            'finished_at', o.finished_at, 'worker_id', o.worker_id, 'error', o.error
        ) ORDER BY o.finished_at, o.attempt), '[]'::jsonb),
        max(o.finished_at)
    INTO v_attempts, v_last_failure
    FROM pgq._outcomes AS o
    WHERE o.job_id = job.job_id AND o.outcome = 'failed';

    SELECT j.* INTO v_job FROM pgq._jobs AS j WHERE j.id = job.job_id;
    IF FOUND THEN
        IF NOT pgq._may_read(v_job.enqueued_by, v_job.worker_id) THEN
            RETURN NULL;
        END IF;
        v_depends_on := v_job.depends_on;
        v_doc := jsonb_build_object(
            'id', v_job.id,
            'entrypoint', v_job.entrypoint,
            'status', v_job.status,
            'finished', v_job.status = 'dead',
            'payload', v_job.payload,
            'headers', v_job.headers,
            'priority', v_job.priority,
            'run_at', v_job.run_at,
            -- From 1: the run under way or the next one; a dead job's, its last (failed) one.
            'attempt', v_job.attempt + CASE WHEN v_job.status = 'dead' THEN 0 ELSE 1 END,
            'max_attempts', (
                SELECT coalesce(v_job.max_attempts, q.max_attempts, (pgq._defaults()).max_attempts)
                FROM (SELECT 1) AS one
                LEFT JOIN pgq._queues AS q ON q.entrypoint = v_job.entrypoint
            ),
            'deliveries', v_job.deliveries,
            'dedupe_key', v_job.dedupe_key,
            'concurrency_key', v_job.concurrency_key,
            'snoozes', v_job.snoozes,
            'worker_id', v_job.worker_id,
            'cancel_requested', v_job.cancel_requested,
            'enqueued_at', v_job.enqueued_at,
            'started_at', v_job.started_at,
            'finished_at', CASE WHEN v_job.status = 'dead' THEN v_last_failure END,
            'result', NULL,
            'error', v_job.last_error
        );
    ELSE
        SELECT o.* INTO v_out FROM pgq._final_outcome(job.job_id) AS o;
        IF NOT FOUND OR NOT pgq._may_read(v_out.enqueued_by, NULL) THEN
            RETURN NULL;
        END IF;
        v_depends_on := v_out.depends_on;
        v_doc := jsonb_build_object(
            'id', v_out.job_id,
            'entrypoint', v_out.entrypoint,
            'status', v_out.outcome,
            'finished', TRUE,
            'payload', v_out.payload,
            'headers', v_out.headers,
            'priority', v_out.priority,
            'run_at', NULL,
            'attempt', v_out.attempt,
            'max_attempts', NULL,
            'deliveries', v_out.deliveries,
            'dedupe_key', v_out.dedupe_key,
            'concurrency_key', v_out.concurrency_key,
            'worker_id', v_out.worker_id,
            'cancel_requested', FALSE,
            'enqueued_at', v_out.enqueued_at,
            'started_at', v_out.started_at,
            'finished_at', v_out.finished_at,
            'result', v_out.result,
            'error', v_out.error
        );
    END IF;

    RETURN v_doc || jsonb_build_object(
        'attempts', v_attempts,
        'depends_on', (
            SELECT coalesce(jsonb_agg(jsonb_build_object('id', d.id, 'status', pgq.job_status(d.id))
                ORDER BY d.id), '[]'::jsonb)
            FROM unnest(v_depends_on) AS d (id)
        ),
        'dependents', (
            SELECT coalesce(jsonb_agg(jsonb_build_object('id', w.id, 'status', w.status) ORDER BY w.id), '[]'::jsonb)
            FROM pgq._jobs AS w
            WHERE w.status = 'waiting' AND w.depends_on @> ARRAY[job.job_id]
              AND pgq._may_read(w.enqueued_by, w.worker_id)
        ),
        'steps', (
            SELECT coalesce(jsonb_agg(jsonb_build_object(
                'name', s.name, 'result', s.result, 'delivery', s.delivery, 'recorded_at', s.recorded_at
            ) ORDER BY s.recorded_at, s.name), '[]'::jsonb)
            FROM pgq._steps AS s
            WHERE s.job_id = job.job_id
        ),
        'progress', (
            SELECT jsonb_build_object('value', p.value, 'note', p.note, 'delivery', p.delivery, 'updated_at', p.updated_at)
            FROM pgq._progress AS p
            WHERE p.job_id = job.job_id
        )
    );
END
$$;

COMMENT ON FUNCTION pgq.job(bigint) IS
'One job''s whole story as jsonb: status, payload, attempts with their errors, result, timings, dependencies; NULL if unknown or not the caller''s to read (its producer, its worker, admins).';
