-- pgq._entrypoints_to_claim(entrypoints): each distinct entrypoint a claim asks for that is
-- not paused, with its timeout and max_attempts (the entrypoint's, else the defaults) and
-- where the claim's scan of its queued jobs starts (pgq._raise_mark): the lesser of its
-- mark and the lowest of its lows; the front without a mark (below any -priority; ids
-- start at 1). limited: it has a concurrency limit, a rate or keyed jobs, so the claim
-- may take its jobs only under the lock on its settings row (pgq.claim's first step): one
-- that step did not lock (it was paused then, or had none of them yet) is not claimed by
-- that call.
-- Written to be inlined into pgq.claim's statements (LANGUAGE sql, STABLE, no SET clause,
-- not STRICT): the planner then plans it as part of them, so each of their variants shares
-- this text and none pays for a function call.
CREATE OR REPLACE FUNCTION pgq._entrypoints_to_claim(entrypoints text[])
RETURNS TABLE (
    ep text,
    timeout interval,
    max_attempts integer,
    from_np bigint,
    from_run timestamptz,
    from_id bigint,
    limited boolean
)
LANGUAGE sql
STABLE
AS $$
    SELECT
        e.ep,
        coalesce(q.timeout, d.timeout),
        coalesce(q.max_attempts, d.max_attempts),
        CASE WHEN m.id IS NULL THEN -2147483648 WHEN lo.below THEN lo.neg_priority ELSE m.neg_priority END,
        CASE WHEN m.id IS NULL THEN '-infinity' WHEN lo.below THEN lo.run_at ELSE m.run_at END,
        CASE WHEN m.id IS NULL THEN 0 WHEN lo.below THEN lo.id ELSE m.id END,
        coalesce(q.concurrency IS NOT NULL OR q.rate IS NOT NULL OR q.keyed, FALSE)
    FROM (SELECT DISTINCT u.ep FROM pg_catalog.unnest(entrypoints) AS u (ep)) AS e
    CROSS JOIN pgq._default_settings AS d
    LEFT JOIN pgq._queues AS q ON q.entrypoint = e.ep
    LEFT JOIN pgq._marks AS m ON m.entrypoint = e.ep
    LEFT JOIN LATERAL (
        SELECT
            l.neg_priority, l.run_at, l.id,
            ROW(l.neg_priority, l.run_at, l.id) < ROW(m.neg_priority, m.run_at, m.id) AS below
        FROM pgq._mark_lows AS l
        WHERE l.entrypoint = e.ep
        ORDER BY l.neg_priority, l.run_at, l.id
        LIMIT 1
    ) AS lo ON TRUE
    WHERE NOT coalesce(q.paused, FALSE)
$$;
