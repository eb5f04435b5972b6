-- pgq._claim_limited(worker_id, entrypoints, batch_size, limited, allowed, keyed, keyed_ids, rated,
-- tokens, stamps): the claim statements of pgq.claim_v3 when some entrypoint has a
-- concurrency limit, a rate or keyed jobs; the caller holds the locks on their settings rows
-- and has decided, under them, what each may take.
-- Parameters (the caller's decisions, arrays in step with each other):
--   limited, allowed: the entrypoints locked, and how many jobs each may take;
--   keyed: those with keyed jobs (claimed by pgq._claim_keyed, not here);
--   keyed_ids: the jobs pgq._claim_keyed chose and locked for them, in claim order;
--   rated, tokens, stamps: the rate-limited ones, their buckets and the clock when locked.
-- Two statements, each a cached generic plan, so that a claim initializes only the plan it
-- needs: without keyed jobs taken (the same plan as before keys existed), and with them
-- (a UNION ALL of the two kinds of candidates). The batch is updated by an array of ids (a
-- join with the candidates turns into a hash join over the whole table when the planner
-- guesses the batch large). An entrypoint that has limits now but was not locked by the
-- caller (it was paused, or had no limit or keyed job yet) gets nothing.
-- Called by pgq.claim_v3 only, which has checked the arguments and the worker: it runs under
-- that function's settings (generic plans, index paths, no JIT), so it has none of its own
-- but search_path. Returns the rows of pgq.claim_v3, in claim order. (The claim of
-- entrypoints without limits, keys or rates is pgq.claim_v3's own statement: most claims
-- and every idle poll take it, and a function call would cost each of them.)
CREATE OR REPLACE FUNCTION pgq._claim_limited(
    worker_id uuid,
    entrypoints text[],
    batch_size integer,
    limited text[],
    allowed integer[],
    keyed text[],
    keyed_ids bigint[],
    rated text[],
    tokens double precision[],
    stamps timestamptz[]
)
RETURNS TABLE (
    id bigint,
    entrypoint text,
    payload jsonb,
    headers jsonb,
    priority integer,
    attempt integer,
    deliveries integer,
    enqueued_at timestamptz,
    run_at timestamptz,
    max_attempts integer,
    timeout interval,
    concurrency_key text,
    reason text
)
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    IF cardinality(_claim_limited.keyed_ids) = 0 THEN
        RETURN QUERY
        WITH allowance AS (
            SELECT
                s.*,
                CASE WHEN s.ep = ANY (_claim_limited.keyed) OR (s.limited AND l.ep IS NULL) THEN 0
                     ELSE least(_claim_limited.batch_size, coalesce(l.allowed, _claim_limited.batch_size)) END AS n
            FROM pgq._entrypoints_to_claim(entrypoints) AS s
            LEFT JOIN unnest(_claim_limited.limited, _claim_limited.allowed) AS l (ep, allowed) ON l.ep = s.ep
        ),
        candidates AS (
            SELECT c.id
            FROM allowance AS a
            CROSS JOIN LATERAL (
                SELECT j.id, j.priority, j.run_at
                FROM pgq._jobs AS j
                WHERE j.entrypoint = a.ep AND j.status = 'queued' AND j.run_at <= now()
                  AND ROW(-j.priority::bigint, j.run_at, j.id) >= ROW(a.from_np, a.from_run, a.from_id)
                ORDER BY -j.priority::bigint, j.run_at, j.id
                LIMIT a.n
                FOR UPDATE SKIP LOCKED
            ) AS c
            ORDER BY c.priority DESC, c.run_at, c.id
            LIMIT _claim_limited.batch_size
        ),
        claimed AS (
            UPDATE pgq._jobs AS j
            SET status = 'running',
                worker_id = _claim_limited.worker_id,
                deliveries = j.deliveries + 1,
                -- A rate-limited job starts when its token was taken (the clock once the
                -- entrypoint's lock was ours), not when this transaction began: a claim
                -- that waited for the lock must not date its jobs before the last claim's.
                started_at = CASE WHEN cardinality(_claim_limited.rated) = 0 THEN now() ELSE coalesce(
                    (SELECT t.stamp FROM unnest(_claim_limited.rated, _claim_limited.stamps) AS t (ep, stamp) WHERE t.ep = j.entrypoint),
                    now()) END
            WHERE j.id = ANY (ARRAY(SELECT c.id FROM candidates AS c))
            RETURNING j.id, j.entrypoint, j.payload, j.headers, j.priority, j.attempt, j.deliveries,
                      j.enqueued_at, j.run_at, j.max_attempts, j.concurrency_key, j.delivery_reason
        ),
        -- Rate limits: spend one token per job claimed (a bucket nothing was taken from keeps
        -- refilling from its last spend).
        spent AS (
            UPDATE pgq._queues AS q
            SET rate_tokens = t.tokens - n.claimed, rate_refilled_at = t.stamp
            FROM unnest(_claim_limited.rated, _claim_limited.tokens, _claim_limited.stamps) AS t (ep, tokens, stamp)
            JOIN (SELECT k.entrypoint, count(*) AS claimed FROM claimed AS k GROUP BY k.entrypoint) AS n
                ON n.entrypoint = t.ep
            WHERE q.entrypoint = t.ep
        )
        SELECT k.id, k.entrypoint, k.payload, k.headers, k.priority, k.attempt + 1, k.deliveries, k.enqueued_at,
               k.run_at, coalesce(k.max_attempts, a.max_attempts), a.timeout, k.concurrency_key,
               CASE WHEN k.deliveries = 1 THEN 'first' ELSE coalesce(k.delivery_reason, 'lost') END
        FROM claimed AS k
        JOIN allowance AS a ON a.ep = k.entrypoint
        ORDER BY k.priority DESC, k.run_at, k.id;
    ELSE
        RETURN QUERY
        WITH allowance AS (
            SELECT
                s.*,
                CASE WHEN s.ep = ANY (_claim_limited.keyed) OR (s.limited AND l.ep IS NULL) THEN 0
                     ELSE least(_claim_limited.batch_size, coalesce(l.allowed, _claim_limited.batch_size)) END AS n
            FROM pgq._entrypoints_to_claim(entrypoints) AS s
            LEFT JOIN unnest(_claim_limited.limited, _claim_limited.allowed) AS l (ep, allowed) ON l.ep = s.ep
        ),
        candidates AS (
            SELECT c.id, c.priority, c.run_at
            FROM allowance AS a
            CROSS JOIN LATERAL (
                SELECT j.id, j.priority, j.run_at
                FROM pgq._jobs AS j
                WHERE j.entrypoint = a.ep AND j.status = 'queued' AND j.run_at <= now()
                  AND ROW(-j.priority::bigint, j.run_at, j.id) >= ROW(a.from_np, a.from_run, a.from_id)
                ORDER BY -j.priority::bigint, j.run_at, j.id
                LIMIT a.n
                FOR UPDATE SKIP LOCKED
            ) AS c
            UNION ALL
            -- Chosen and locked by pgq._claim_keyed.
            SELECT k.id, k.priority, k.run_at
            FROM pgq._jobs AS k
            WHERE k.id = ANY (_claim_limited.keyed_ids)
            ORDER BY 2 DESC, 3, 1
            LIMIT _claim_limited.batch_size
        ),
        claimed AS (
            UPDATE pgq._jobs AS j
            SET status = 'running',
                worker_id = _claim_limited.worker_id,
                deliveries = j.deliveries + 1,
                -- A rate-limited job starts when its token was taken (the clock once the
                -- entrypoint's lock was ours), not when this transaction began: a claim
                -- that waited for the lock must not date its jobs before the last claim's.
                started_at = CASE WHEN cardinality(_claim_limited.rated) = 0 THEN now() ELSE coalesce(
                    (SELECT t.stamp FROM unnest(_claim_limited.rated, _claim_limited.stamps) AS t (ep, stamp) WHERE t.ep = j.entrypoint),
                    now()) END
            WHERE j.id = ANY (ARRAY(SELECT c.id FROM candidates AS c))
            RETURNING j.id, j.entrypoint, j.payload, j.headers, j.priority, j.attempt, j.deliveries,
                      j.enqueued_at, j.run_at, j.max_attempts, j.concurrency_key, j.delivery_reason
        ),
        -- Rate limits: spend one token per job claimed (a bucket nothing was taken from keeps
        -- refilling from its last spend).
        spent AS (
            UPDATE pgq._queues AS q
            SET rate_tokens = t.tokens - n.claimed, rate_refilled_at = t.stamp
            FROM unnest(_claim_limited.rated, _claim_limited.tokens, _claim_limited.stamps) AS t (ep, tokens, stamp)
            JOIN (SELECT k.entrypoint, count(*) AS claimed FROM claimed AS k GROUP BY k.entrypoint) AS n
                ON n.entrypoint = t.ep
            WHERE q.entrypoint = t.ep
        )
        SELECT k.id, k.entrypoint, k.payload, k.headers, k.priority, k.attempt + 1, k.deliveries, k.enqueued_at,
               k.run_at, coalesce(k.max_attempts, a.max_attempts), a.timeout, k.concurrency_key,
               CASE WHEN k.deliveries = 1 THEN 'first' ELSE coalesce(k.delivery_reason, 'lost') END
        FROM claimed AS k
        JOIN allowance AS a ON a.ep = k.entrypoint
        ORDER BY k.priority DESC, k.run_at, k.id;
    END IF;
END
$$;
