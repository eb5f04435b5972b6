-- pgq.explain(job_id): why a job is not running now, from the database's own state. One
-- row per reason, each with a code (`reason`), a sentence (`detail`), the time the reason
-- ends when the database knows it (`until`) and the jobs it names (`job_ids`):
--   finished         it succeeded or was canceled (the outcome log);
--   dead             out of attempts (or deliveries): its last error; pgq.retry requeues it;
--   held             running: held by worker W until its lease ends (a lost worker's job
--                    is re-delivered then);
--   waiting          waiting for its dependencies (depends_on) that have not succeeded;
--   scheduled        run_at is in the future;
--   paused           its entrypoint is paused;
--   concurrency      its entrypoint's concurrency limit is full (N of N running);
--   key_concurrency  its concurrency key is at key_concurrency (N of N running);
--   rate             its entrypoint's rate bucket is empty: the next token comes at until;
--   no_worker        no live worker registered its entrypoint;
--   behind           due, and N due jobs of its entrypoint come before it in claim order
--                    (counted up to 10000).
-- A queued or waiting job gets every reason that applies (a scheduled job of a paused
-- entrypoint: both); a running, dead or finished job gets the one. A due job that nothing
-- holds back gets no row: the next claim of its entrypoint takes it.
-- Parameters: job_id (a job the caller may read: its producer, the worker holding it,
--   pgq_admin; as pgq.job).
-- Returns the reasons, in the order above. Raises PQ001 for a NULL id, PQ005 for an
-- unknown id (never enqueued, or finished and pruned) or one the caller may not read.
CREATE OR REPLACE FUNCTION pgq.explain(job_id bigint)
RETURNS TABLE (reason text, detail text, until timestamptz, job_ids bigint[])
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
    v_queue pgq._queues;
    v_worker pgq._workers;
    v_lease interval;
    v_n bigint;
    v_ids bigint[];
    v_now timestamptz := clock_timestamp();
    v_bucket double precision;
BEGIN
    IF job_id IS NULL THEN
        PERFORM pgq._invalid('job_id', 'must not be NULL', 'Pass a job id returned by pgq.enqueue.');
    END IF;

    SELECT j.* INTO v_job FROM pgq._jobs AS j WHERE j.id = explain.job_id;
    IF NOT FOUND THEN
        SELECT o.* INTO v_out FROM pgq._final_outcome(explain.job_id) AS o;
        IF NOT FOUND OR NOT pgq._may_read(v_out.enqueued_by, NULL) THEN
            RAISE EXCEPTION 'pgq: job % is unknown', explain.job_id
                USING ERRCODE = 'PQ005',
                DETAIL = 'It was never enqueued, its outcome was pruned, or it is not yours to read.',
                HINT = 'Pass a job id returned by pgq.enqueue; finished jobs are kept for their entrypoint''s retention.';
        END IF;
        reason := 'finished';
        detail := format('%s at %s', v_out.outcome, v_out.finished_at);
        until := NULL;
        job_ids := NULL;
        RETURN NEXT;
        RETURN;
    END IF;
    IF NOT pgq._may_read(v_job.enqueued_by, v_job.worker_id) THEN
        RAISE EXCEPTION 'pgq: job % is unknown', explain.job_id
            USING ERRCODE = 'PQ005',
            DETAIL = 'It was never enqueued, its outcome was pruned, or it is not yours to read.',
            HINT = 'Pass a job id returned by pgq.enqueue; finished jobs are kept for their entrypoint''s retention.';
    END IF;

    SELECT q.* INTO v_queue FROM pgq._queues AS q WHERE q.entrypoint = v_job.entrypoint;

    IF v_job.status = 'dead' THEN
        reason := 'dead';
        detail := format('dead after attempt %s (%s deliveries): %s', v_job.attempt, v_job.deliveries,
            coalesce(substr(v_job.last_error, 1, 1000), 'no error recorded'));
        RETURN NEXT;
        RETURN;
    END IF;

    IF v_job.status = 'running' THEN
        SELECT w.* INTO v_worker FROM pgq._workers AS w WHERE w.id = v_job.worker_id;
        v_lease := coalesce(v_worker.lease, v_queue.lease, (pgq._defaults()).lease);
        reason := 'held';
        detail := format('held by worker %s (%s, %s) until its lease ends at %s', v_job.worker_id,
            coalesce(v_worker.name, 'gone'), coalesce(v_worker.state, 'gone'), v_worker.heartbeat_at + v_lease);
        until := v_worker.heartbeat_at + v_lease;
        RETURN NEXT;
        RETURN;
    END IF;

    IF v_job.status = 'waiting' THEN
        SELECT array_agg(d.id ORDER BY d.id) INTO v_ids
        FROM unnest(v_job.depends_on) AS d (id)
        WHERE NOT EXISTS (SELECT 1 FROM pgq._final_outcome(d.id) AS o WHERE o.outcome = 'succeeded');
        reason := 'waiting';
        detail := format('waiting for jobs %s', array_to_string(v_ids, ', '));
        until := NULL;
        job_ids := v_ids;
        RETURN NEXT;
        job_ids := NULL;
    END IF;

    IF v_job.run_at > v_now THEN
        reason := 'scheduled';
        detail := format('scheduled until %s', v_job.run_at);
        until := v_job.run_at;
        RETURN NEXT;
        until := NULL;
    END IF;

    IF coalesce(v_queue.paused, FALSE) THEN
        reason := 'paused';
        detail := format('entrypoint %s is paused', v_job.entrypoint);
        RETURN NEXT;
    END IF;

    IF v_queue.concurrency IS NOT NULL THEN
        SELECT count(*) INTO v_n FROM pgq._jobs AS j WHERE j.entrypoint = v_job.entrypoint AND j.status = 'running';
        IF v_n >= v_queue.concurrency THEN
            reason := 'concurrency';
            detail := format('concurrency limit full (%s of %s running)', v_n, v_queue.concurrency);
            RETURN NEXT;
        END IF;
    END IF;

    IF v_queue.key_concurrency IS NOT NULL AND v_job.concurrency_key IS NOT NULL THEN
        SELECT count(*) INTO v_n FROM pgq._jobs AS j
        WHERE j.entrypoint = v_job.entrypoint AND j.status = 'running' AND j.concurrency_key = v_job.concurrency_key;
        IF v_n >= v_queue.key_concurrency THEN
            reason := 'key_concurrency';
            detail := format('key %s at key_concurrency (%s of %s running)', v_job.concurrency_key, v_n,
                v_queue.key_concurrency);
            RETURN NEXT;
        END IF;
    END IF;

    IF v_queue.rate IS NOT NULL THEN
        -- The bucket as pgq.claim computes it.
        v_bucket := greatest(1, v_queue.rate / 10);
        v_bucket := least(
            v_bucket,
            coalesce(v_queue.rate_tokens, v_bucket)
            + v_queue.rate * extract(EPOCH FROM v_now - coalesce(v_queue.rate_refilled_at, v_now))
        );
        IF v_bucket < 1 THEN
            reason := 'rate';
            until := v_now + make_interval(secs => (1 - v_bucket) / v_queue.rate);
            detail := format('rate limit %s/s: the next token at %s', v_queue.rate, until);
            RETURN NEXT;
            until := NULL;
        END IF;
    END IF;

    IF NOT EXISTS (
        SELECT 1 FROM pgq._workers AS w WHERE w.state = 'alive' AND v_job.entrypoint = ANY (w.entrypoints)
    ) THEN
        reason := 'no_worker';
        detail := format('no live worker serves entrypoint %s', v_job.entrypoint);
        RETURN NEXT;
    END IF;

    IF v_job.status = 'queued' AND v_job.run_at <= v_now THEN
        SELECT count(*) INTO v_n FROM (
            SELECT 1 FROM pgq._jobs AS j
            WHERE j.entrypoint = v_job.entrypoint AND j.status = 'queued' AND j.run_at <= v_now
              AND ROW(-j.priority::bigint, j.run_at, j.id) < ROW(-v_job.priority::bigint, v_job.run_at, v_job.id)
            LIMIT 10000
        ) AS ahead;
        IF v_n > 0 THEN
            reason := 'behind';
            detail := format('%s%s due jobs of %s come first in claim order', v_n,
                CASE WHEN v_n >= 10000 THEN ' or more' ELSE '' END, v_job.entrypoint);
            RETURN NEXT;
        END IF;
    END IF;
END
$$;

COMMENT ON FUNCTION pgq.explain(bigint) IS
'Why a job is not running now: one row per reason (finished, dead, held, waiting, scheduled, paused, concurrency, key_concurrency, rate, no_worker, behind).';
