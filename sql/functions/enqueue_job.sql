-- pgq.enqueue_job: add one job, and tell whether this call created it. pgq.enqueue is this
-- function returning the id alone; a plain call (no key, dependency or dedupe option) it
-- runs itself, with a copy of this function's INSERT and NOTIFY: change them together.
-- Joins the caller's transaction.
-- Parameters: those of pgq.enqueue (entrypoint, payload, priority, run_at, dedupe_key,
--   headers, max_attempts, depends_on, concurrency_key), then how the dedupe_key counts:
--   dedupe_scope: which jobs with the same entrypoint and dedupe_key stand for this one:
--     'live' (the default): queued, waiting and running jobs (a dead job does not);
--     'queued': jobs not started yet (queued, waiting). A running job does not block: it
--       gives its key up (it runs on, and its pgq.job shows no dedupe_key) and a new job
--       is created.
--   dedupe_window: also a job with the key that succeeded within this interval (counted
--     back from now; needs the 'live' scope). The outcome log keeps successes for the
--     entrypoint's retention: a longer window sees only what is kept. Canceled and dead
--     jobs never block.
--   dedupe_mode: 'keep' (the default): the job that stands for this one is left as it is;
--     'replace': a standing job not started yet (queued or waiting) takes this call's
--     payload, priority, run_at, headers, max_attempts and concurrency_key (its
--     dependencies stay); a running or finished one is kept.
-- Returns one row: id (the new job, or the one that stands for it), created (this call
--   made a new job), replaced (this call rewrote the standing job; created is then false).
-- Race-proof: the unique index on live keys decides between concurrent calls; a replaced
--   job is not claimed before the replacing transaction commits. Raises PQ001 for invalid
--   arguments, PQ004 for an oversized payload, PQ007 for a dedupe_window in a REPEATABLE
--   READ or SERIALIZABLE transaction (the window is checked with a fresh snapshot).
CREATE OR REPLACE FUNCTION pgq.enqueue_job(
    entrypoint text,
    payload jsonb DEFAULT NULL,
    priority integer DEFAULT 0,
    run_at timestamptz DEFAULT NULL,
    dedupe_key text DEFAULT NULL,
    headers jsonb DEFAULT NULL,
    max_attempts integer DEFAULT NULL,
    depends_on bigint[] DEFAULT NULL,
    concurrency_key text DEFAULT NULL,
    dedupe_scope text DEFAULT NULL,
    dedupe_window interval DEFAULT NULL,
    dedupe_mode text DEFAULT NULL,
    OUT id bigint,
    OUT created boolean,
    OUT replaced boolean
)
RETURNS record
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
    v_id bigint;
    v_run_at timestamptz := greatest(coalesce(run_at, now()), now());
    v_waits_for bigint[];
    v_failed text;
    v_scope text := coalesce(dedupe_scope, 'live');
    v_holder bigint;
    v_status text;
BEGIN
    PERFORM pgq._check_job(entrypoint, payload, run_at, dedupe_key, headers, max_attempts);
    PERFORM pgq._check_dedupe(dedupe_key IS NOT NULL, dedupe_scope, dedupe_mode, dedupe_window);
    IF concurrency_key IS NOT NULL THEN
        PERFORM pgq._check_keys('concurrency_key', ARRAY[concurrency_key], TRUE);
    END IF;
    IF dedupe_window IS NOT NULL AND current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'pgq: an enqueue with dedupe_window needs READ COMMITTED, not %',
            current_setting('transaction_isolation')
            USING ERRCODE = 'PQ007',
            DETAIL = 'The window is checked after the key is taken, with a fresh snapshot; an older one '
                || 'would miss a job that succeeded meanwhile.',
            HINT = 'Enqueue with a window outside explicit REPEATABLE READ or SERIALIZABLE transactions.';
    END IF;
    created := FALSE;
    replaced := FALSE;
    IF depends_on IS NOT NULL THEN
        SELECT d.waits_for, d.failed INTO v_waits_for, v_failed FROM pgq._dependencies(depends_on) AS d;
        IF v_failed IS NOT NULL THEN
            -- A job with the dedupe key stands for this one.
            SELECT j.id INTO v_id
            FROM pgq._jobs AS j
            WHERE j.entrypoint = enqueue_job.entrypoint AND j.dedupe_key = enqueue_job.dedupe_key
              AND j.status <> 'dead' AND (v_scope = 'live' OR j.status <> 'running');
            IF v_id IS NULL AND dedupe_window IS NOT NULL THEN
                v_id := pgq._recent_success(enqueue_job.entrypoint, enqueue_job.dedupe_key, dedupe_window);
            END IF;
            IF v_id IS NOT NULL THEN
                id := v_id;
                RETURN;
            END IF;
            -- Nothing to wait for: the job is born canceled, and says why.
            v_id := nextval(pg_get_serial_sequence('pgq._jobs', 'id'));
            INSERT INTO pgq._outcomes (
                job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, error,
                payload, headers, depends_on, concurrency_key, enqueued_by
            )
            VALUES (v_id, enqueue_job.entrypoint, 'canceled', coalesce(enqueue_job.priority, 0), 0, 0, now(),
                    v_failed, enqueue_job.payload, enqueue_job.headers, enqueue_job.depends_on,
                    enqueue_job.concurrency_key, session_user);
            id := v_id;
            created := TRUE;
            RETURN;
        END IF;
    END IF;
    IF dedupe_window IS NOT NULL THEN
        -- The common case of a window, a recent success and no live job, without touching
        -- the hot table. (A live job stands first: it may be replaced.)
        v_id := pgq._recent_success(enqueue_job.entrypoint, enqueue_job.dedupe_key, dedupe_window);
        IF v_id IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM pgq._jobs AS j
            WHERE j.entrypoint = enqueue_job.entrypoint AND j.dedupe_key = enqueue_job.dedupe_key
              AND j.status <> 'dead'
        ) THEN
            id := v_id;
            RETURN;
        END IF;
    END IF;
    LOOP
        INSERT INTO pgq._jobs AS j (
            entrypoint, payload, priority, run_at, dedupe_key, headers, max_attempts, status, depends_on,
            concurrency_key
        )
        VALUES (enqueue_job.entrypoint, enqueue_job.payload, coalesce(enqueue_job.priority, 0), v_run_at,
                enqueue_job.dedupe_key, enqueue_job.headers, enqueue_job.max_attempts,
                CASE WHEN v_waits_for IS NULL THEN 'queued' ELSE 'waiting' END, v_waits_for,
                enqueue_job.concurrency_key)
        ON CONFLICT (entrypoint, dedupe_key) WHERE dedupe_key IS NOT NULL AND status <> 'dead'
        DO NOTHING
        RETURNING j.id INTO v_id;
        IF v_id IS NOT NULL THEN
            IF dedupe_window IS NOT NULL THEN
                -- The key is ours now (a concurrent enqueue waits for this transaction). A job
                -- that held it may have succeeded while this call waited: a
                -- fresh read (pgq._recent_success) sees its outcome.
                v_holder := pgq._recent_success(enqueue_job.entrypoint, enqueue_job.dedupe_key, dedupe_window);
                IF v_holder IS NOT NULL THEN
                    DELETE FROM pgq._jobs AS j WHERE j.id = v_id;
                    id := v_holder;
                    RETURN;
                END IF;
            END IF;
            IF enqueue_job.concurrency_key IS NOT NULL THEN
                PERFORM pgq._mark_keyed(enqueue_job.entrypoint);
            END IF;
            EXIT;
        END IF;
        -- A live job holds the key. It can finish (or start) between the two statements:
        -- then loop.
        SELECT j.id, j.status INTO v_holder, v_status
        FROM pgq._jobs AS j
        WHERE j.entrypoint = enqueue_job.entrypoint
          AND j.dedupe_key = enqueue_job.dedupe_key
          AND j.status <> 'dead';
        IF NOT FOUND THEN
            CONTINUE;
        END IF;
        IF v_status = 'running' THEN
            IF v_scope = 'live' THEN
                id := v_holder;
                RETURN;
            END IF;
            -- Scope 'queued': the running job gives its key up (it runs on). Its row lock,
            -- held to commit, makes a concurrent call wait here and then find the new job.
            UPDATE pgq._jobs AS j SET dedupe_key = NULL
            WHERE j.id = v_holder AND j.status = 'running' AND j.dedupe_key = enqueue_job.dedupe_key;
            CONTINUE;
        END IF;
        IF dedupe_mode IS DISTINCT FROM 'replace' THEN
            id := v_holder;
            RETURN;
        END IF;
        -- A claim may take the job first: then the row no longer matches, and the loop
        -- looks again.
        UPDATE pgq._jobs AS j
        SET payload = enqueue_job.payload,
            priority = coalesce(enqueue_job.priority, 0),
            run_at = v_run_at,
            headers = enqueue_job.headers,
            max_attempts = enqueue_job.max_attempts,
            concurrency_key = enqueue_job.concurrency_key
        WHERE j.id = v_holder AND j.status IN ('queued', 'waiting')
          AND j.dedupe_key = enqueue_job.dedupe_key
        RETURNING j.status INTO v_status;
        IF FOUND THEN
            IF enqueue_job.concurrency_key IS NOT NULL THEN
                PERFORM pgq._mark_keyed(enqueue_job.entrypoint);
            END IF;
            IF v_run_at <= now() AND v_status = 'queued' THEN
                PERFORM pg_notify('pgq', enqueue_job.entrypoint);
            END IF;
            id := v_holder;
            replaced := TRUE;
            RETURN;
        END IF;
    END LOOP;
    IF v_run_at <= now() AND v_waits_for IS NULL THEN
        PERFORM pg_notify('pgq', enqueue_job.entrypoint);
    END IF;
    id := v_id;
    created := TRUE;
END
$$;

COMMENT ON FUNCTION pgq.enqueue_job(
    text, jsonb, integer, timestamptz, text, jsonb, integer, bigint[], text, text, interval, text
) IS
'Enqueue one job in the current transaction; returns (id, created, replaced): the new job, or the job that stands for it.';
