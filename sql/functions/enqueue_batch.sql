-- pgq.enqueue_batch: many jobs of one entrypoint in one statement.
-- Parameters: entrypoint; payloads (one job per element, at most 100000; a NULL element
--   is a job with a NULL payload); priority; run_at; concurrency_keys (optional: one key
--   per payload, NULL elements for jobs without a key; see pgq.enqueue); dedupe_keys
--   (optional: one dedupe key per payload, NULL elements for jobs without one) with
--   dedupe_scope, dedupe_window and dedupe_mode (see pgq.enqueue_job): each job goes in as
--   pgq.enqueue_job would put it, in the order of payloads, so two payloads with one key
--   make one job (with dedupe_mode 'replace', the later payload wins). That path runs job
--   by job; without dedupe_keys the batch is one statement. headers, max_attempts and
--   depends_on (optional) apply to every job of the batch, as pgq.enqueue takes them; with
--   depends_on, each job goes in as pgq.enqueue_job puts a dependent job (job by job).
--   batch (optional): a batch that pgq.batch opened in this transaction; every job of the
--   call becomes a member (not with dedupe_keys: a payload that found a standing job
--   would make a job of someone else's, maybe finished, a member; not once the batch has
--   finished, which only an explicit SET CONSTRAINTS ... IMMEDIATE can bring about).
-- Returns the job ids in the order of payloads (with dedupe_keys, the id of the job that
-- stands for a payload where one did). One NOTIFY per call, not per job.
-- Raises PQ001 for invalid arguments, PQ004 for an oversized payload.
CREATE OR REPLACE FUNCTION pgq.enqueue_batch(
    entrypoint text,
    payloads jsonb[],
    priority integer DEFAULT 0,
    run_at timestamptz DEFAULT NULL,
    concurrency_keys text[] DEFAULT NULL,
    dedupe_keys text[] DEFAULT NULL,
    dedupe_scope text DEFAULT NULL,
    dedupe_window interval DEFAULT NULL,
    dedupe_mode text DEFAULT NULL,
    headers jsonb DEFAULT NULL,
    max_attempts integer DEFAULT NULL,
    depends_on bigint[] DEFAULT NULL,
    batch bigint DEFAULT NULL
)
RETURNS SETOF bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_run_at timestamptz := greatest(coalesce(run_at, now()), now());
    v_too_big integer;
    v_bad integer;
    v_job record;
    v_ids bigint[];
    v_seqscan text := current_setting('enable_seqscan');
BEGIN
    PERFORM pgq._check_job(entrypoint, NULL, run_at, NULL, headers, max_attempts);
    IF payloads IS NULL THEN
        PERFORM pgq._invalid('payloads', 'must not be NULL', 'Pass an array of jsonb payloads.');
    ELSIF array_ndims(payloads) > 1 THEN
        PERFORM pgq._invalid('payloads', format('has %s dimensions', array_ndims(payloads)),
            'Pass a one-dimensional array of jsonb payloads.');
    ELSIF cardinality(payloads) > 100000 THEN
        PERFORM pgq._invalid('payloads', format('has %s elements', cardinality(payloads)),
            'At most 100000 jobs per call; split the batch.');
    END IF;
    IF concurrency_keys IS NOT NULL THEN
        IF array_ndims(concurrency_keys) > 1 OR cardinality(concurrency_keys) <> cardinality(payloads) THEN
            PERFORM pgq._invalid('concurrency_keys', 'must have one element per payload',
                'Pass NULL, or a one-dimensional array as long as payloads (NULL elements: no key).');
        END IF;
        PERFORM pgq._check_keys('concurrency_keys', concurrency_keys);
        IF EXISTS (SELECT 1 FROM unnest(concurrency_keys) AS k (key) WHERE k.key IS NOT NULL) THEN
            PERFORM pgq._mark_keyed(entrypoint);
        END IF;
    END IF;
    PERFORM pgq._check_dedupe(dedupe_keys IS NOT NULL, dedupe_scope, dedupe_mode, dedupe_window, 'dedupe_keys');
    IF dedupe_keys IS NOT NULL THEN
        IF array_ndims(dedupe_keys) > 1 OR cardinality(dedupe_keys) <> cardinality(payloads) THEN
            PERFORM pgq._invalid('dedupe_keys', 'must have one element per payload',
                'Pass NULL, or a one-dimensional array as long as payloads (NULL elements: no key).');
        END IF;
        SELECT k.ord INTO v_bad
        FROM unnest(dedupe_keys) WITH ORDINALITY AS k (key, ord)
        WHERE k.key = '' OR octet_length(k.key) > 1000
        LIMIT 1;
        IF v_bad IS NOT NULL THEN
            PERFORM pgq._invalid(format('dedupe_keys[%s]', v_bad), 'must be 1 to 1000 bytes long',
                'Pass NULL for a job without a dedupe key.');
        END IF;
    END IF;
    IF batch IS NOT NULL THEN
        IF dedupe_keys IS NOT NULL THEN
            PERFORM pgq._invalid('batch', 'cannot be combined with dedupe_keys',
                'A member is a job the call creates; enqueue deduplicated jobs outside the batch.');
        END IF;
        IF NOT EXISTS (
            SELECT 1 FROM pgq._batches AS b
            WHERE b.id = enqueue_batch.batch AND b.created_xact = pg_current_xact_id()
        ) THEN
            PERFORM pgq._invalid('batch', format('%s is not a batch opened in this transaction', batch),
                'Open the batch with pgq.batch() in the same transaction as its members.');
        END IF;
        IF EXISTS (
            SELECT 1 FROM pgq._batches AS b WHERE b.id = enqueue_batch.batch AND b.finished_at IS NOT NULL
        ) THEN
            -- Only an explicit SET CONSTRAINTS ... IMMEDIATE counts a batch before its commit.
            PERFORM pgq._invalid('batch', format('%s has finished already (its callbacks are enqueued)', batch),
                'SET CONSTRAINTS ... IMMEDIATE counted it after its members had all ended: add members before that.');
        END IF;
    END IF;
    SELECT p.ord INTO v_too_big
    FROM unnest(payloads) WITH ORDINALITY AS p (payload, ord)
    WHERE pg_column_size(p.payload) > 1048576
    LIMIT 1;
    IF v_too_big IS NOT NULL THEN
        RAISE EXCEPTION 'pgq: payloads[%] is over the 1 MiB limit', v_too_big
            USING ERRCODE = 'PQ004', HINT = 'Store large data in a table and put its key in the payload.';
    END IF;
    IF dedupe_keys IS NOT NULL OR depends_on IS NOT NULL THEN
        -- Job by job, in order: a payload may find the job an earlier one made; a dependent
        -- job is checked and made waiting (or canceled) as pgq.enqueue_job does it.
        v_ids := '{}';
        FOR v_job IN
            SELECT p.payload, dedupe_keys[array_lower(dedupe_keys, 1) + p.ord - 1] AS dedupe_key,
                   concurrency_keys[array_lower(concurrency_keys, 1) + p.ord - 1] AS concurrency_key
            FROM unnest(payloads) WITH ORDINALITY AS p (payload, ord)
            ORDER BY p.ord
        LOOP
            v_ids := v_ids || (
                SELECT e.id
                FROM pgq.enqueue_job(
                    entrypoint => enqueue_batch.entrypoint,
                    payload => v_job.payload,
                    priority => enqueue_batch.priority,
                    run_at => enqueue_batch.run_at,
                    dedupe_key => v_job.dedupe_key,
                    concurrency_key => v_job.concurrency_key,
                    headers => enqueue_batch.headers,
                    max_attempts => enqueue_batch.max_attempts,
                    depends_on => enqueue_batch.depends_on,
                    dedupe_scope => CASE WHEN v_job.dedupe_key IS NOT NULL THEN dedupe_scope END,
                    dedupe_window => CASE WHEN v_job.dedupe_key IS NOT NULL THEN dedupe_window END,
                    dedupe_mode => CASE WHEN v_job.dedupe_key IS NOT NULL THEN dedupe_mode END
                ) AS e
            );
        END LOOP;
        IF batch IS NOT NULL THEN
            -- A job born canceled (a dependency had failed) has no row: a member that ended.
            -- By primary key, whatever the job table's statistics say (an empty queue's).
            PERFORM set_config('enable_seqscan', 'off', TRUE);
            UPDATE pgq._jobs AS j SET batch_id = enqueue_batch.batch WHERE j.id = ANY (v_ids);
            INSERT INTO pgq._batch_members AS m (batch_id, job_id, ended_xact)
            SELECT enqueue_batch.batch, i.id,
                   CASE WHEN NOT EXISTS (SELECT 1 FROM pgq._jobs AS j WHERE j.id = i.id) THEN pg_current_xact_id() END
            FROM unnest(v_ids) AS i (id);
            UPDATE pgq._batches AS b SET total = b.total + cardinality(v_ids) WHERE b.id = enqueue_batch.batch;
            PERFORM set_config('enable_seqscan', v_seqscan, TRUE);
        END IF;
        RETURN QUERY SELECT unnest(v_ids);
        RETURN;
    END IF;
    -- Identity values follow the insertion order, which follows ord.
    IF batch IS NULL THEN
        RETURN QUERY
        WITH inserted AS (
            INSERT INTO pgq._jobs AS j (entrypoint, payload, priority, run_at, concurrency_key, headers, max_attempts)
            SELECT enqueue_batch.entrypoint, p.payload, coalesce(enqueue_batch.priority, 0), v_run_at,
                   concurrency_keys[array_lower(concurrency_keys, 1) + p.ord - 1], enqueue_batch.headers,
                   enqueue_batch.max_attempts
            FROM unnest(payloads) WITH ORDINALITY AS p (payload, ord)
            ORDER BY p.ord
            RETURNING j.id
        )
        SELECT i.id FROM inserted AS i ORDER BY i.id;
    ELSE
        -- Members: the jobs, their member rows and the batch's total in one statement.
        RETURN QUERY
        WITH inserted AS (
            INSERT INTO pgq._jobs AS j (
                entrypoint, payload, priority, run_at, concurrency_key, headers, max_attempts, batch_id
            )
            SELECT enqueue_batch.entrypoint, p.payload, coalesce(enqueue_batch.priority, 0), v_run_at,
                   concurrency_keys[array_lower(concurrency_keys, 1) + p.ord - 1], enqueue_batch.headers,
                   enqueue_batch.max_attempts, enqueue_batch.batch
            FROM unnest(payloads) WITH ORDINALITY AS p (payload, ord)
            ORDER BY p.ord
            RETURNING j.id
        ),
        members AS (
            INSERT INTO pgq._batch_members AS m (batch_id, job_id)
            SELECT enqueue_batch.batch, i.id FROM inserted AS i
        ),
        counted AS (
            UPDATE pgq._batches AS b SET total = b.total + cardinality(payloads) WHERE b.id = enqueue_batch.batch
        )
        SELECT i.id FROM inserted AS i ORDER BY i.id;
    END IF;
    IF cardinality(payloads) > 0 AND v_run_at <= now() THEN
        PERFORM pg_notify('pgq', enqueue_batch.entrypoint);
    END IF;
END
$$;

COMMENT ON FUNCTION pgq.enqueue_batch(
    text, jsonb[], integer, timestamptz, text[], text[], text, interval, text, jsonb, integer, bigint[], bigint
) IS
'Enqueue one job per payload in one statement; returns the ids in payload order.';
