-- pgq._claim_keyed(entrypoint, allowed, key_limit, key_cursor): the claim of an entrypoint
-- that has jobs with a concurrency key (see pgq.claim). The caller holds the lock on the
-- entrypoint's settings row, so keyed claims of one entrypoint take turns and the running
-- jobs counted here cannot change under it (in READ COMMITTED each statement sees the
-- claims committed before the lock was granted).
-- The keys with queued jobs are found priority by priority with a skip scan of
-- _jobs_key_idx (one index probe per key, not per job). Each key offers its oldest due jobs,
-- at most its room: allowed, or key_limit minus its running jobs. The offers are ordered by
-- priority, then turn (a key's first job before any key's second), then key order starting
-- after key_cursor (the key the previous claim ended on), and locked in that order (SKIP
-- LOCKED) up to allowed. Jobs without a key take part as the key '' (before every real
-- key, which is never empty), from the head of the entrypoint's plain claim order.
-- Returns the ids locked, in claim order (empty when nothing is due).
CREATE OR REPLACE FUNCTION pgq._claim_keyed(entrypoint text, allowed integer, key_limit integer, key_cursor text)
RETURNS bigint[]
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
-- pgq.claim forces generic plans; these statements are planned per call.
SET plan_cache_mode = auto
AS $$
#variable_conflict use_column
DECLARE
    v_ids bigint[];
BEGIN
    WITH RECURSIVE keys AS (
        (
            SELECT j.priority, j.concurrency_key AS key
            FROM pgq._jobs AS j
            WHERE j.entrypoint = _claim_keyed.entrypoint AND j.status = 'queued' AND j.concurrency_key IS NOT NULL
            ORDER BY j.priority DESC, j.concurrency_key
            LIMIT 1
        )
        UNION ALL
        SELECT nx.priority, nx.key
        FROM keys AS k
        CROSS JOIN LATERAL (
            SELECT s.priority, s.key
            FROM (
                (
                    SELECT j.priority, j.concurrency_key AS key
                    FROM pgq._jobs AS j
                    WHERE j.entrypoint = _claim_keyed.entrypoint AND j.status = 'queued'
                      AND j.concurrency_key IS NOT NULL AND j.priority = k.priority AND j.concurrency_key > k.key
                    ORDER BY j.priority DESC, j.concurrency_key
                    LIMIT 1
                )
                UNION ALL
                (
                    SELECT j.priority, j.concurrency_key AS key
                    FROM pgq._jobs AS j
                    WHERE j.entrypoint = _claim_keyed.entrypoint AND j.status = 'queued'
                      AND j.concurrency_key IS NOT NULL AND j.priority < k.priority
                    ORDER BY j.priority DESC, j.concurrency_key
                    LIMIT 1
                )
            ) AS s
            LIMIT 1
        ) AS nx
    ),
    room AS (
        SELECT d.key,
               CASE WHEN _claim_keyed.key_limit IS NULL THEN _claim_keyed.allowed
                    ELSE least(_claim_keyed.allowed, greatest(_claim_keyed.key_limit - (
                        SELECT count(*)
                        FROM pgq._jobs AS r
                        WHERE r.entrypoint = _claim_keyed.entrypoint AND r.status = 'running'
                          AND r.concurrency_key = d.key
                    ), 0))::integer
               END AS room
        FROM (SELECT DISTINCT k.key FROM keys AS k) AS d
    ),
    pool AS (
        SELECT c.id, k.priority, k.key, c.run_at, m.room
        FROM keys AS k
        JOIN room AS m ON m.key = k.key
        CROSS JOIN LATERAL (
            SELECT j.id, j.run_at
            FROM pgq._jobs AS j
            WHERE j.entrypoint = _claim_keyed.entrypoint AND j.status = 'queued'
              AND j.concurrency_key IS NOT NULL AND j.priority = k.priority AND j.concurrency_key = k.key
              AND j.run_at <= now()
            ORDER BY j.run_at, j.id
            LIMIT m.room
        ) AS c
        UNION ALL
        SELECT u.id, u.priority, '', u.run_at, _claim_keyed.allowed
        FROM (
            SELECT j.id, j.priority, j.run_at, j.concurrency_key
            FROM pgq._jobs AS j
            WHERE j.entrypoint = _claim_keyed.entrypoint AND j.status = 'queued' AND j.run_at <= now()
            ORDER BY j.priority DESC, j.run_at, j.id
            LIMIT _claim_keyed.allowed
        ) AS u
        WHERE u.concurrency_key IS NULL
    ),
    ranked AS (
        SELECT p.id, p.priority, p.key, p.run_at, p.room,
               row_number() OVER (PARTITION BY p.priority, p.key ORDER BY p.run_at, p.id) AS turn,
               row_number() OVER (PARTITION BY p.key ORDER BY p.priority DESC, p.run_at, p.id) AS nth
        FROM pool AS p
    ),
    ordered AS (
        SELECT r.id,
               row_number() OVER (
                   ORDER BY r.priority DESC, r.turn, coalesce(r.key <= _claim_keyed.key_cursor, FALSE), r.key,
                            r.run_at, r.id
               ) AS ord
        FROM ranked AS r
        WHERE r.nth <= r.room
    )
    SELECT coalesce(array_agg(l.id ORDER BY l.ord), '{}') INTO v_ids
    FROM (
        SELECT j.id, o.ord
        FROM ordered AS o
        JOIN pgq._jobs AS j ON j.id = o.id
        WHERE j.status = 'queued'
        ORDER BY o.ord
        LIMIT _claim_keyed.allowed
        FOR UPDATE OF j SKIP LOCKED
    ) AS l;
    RETURN v_ids;
END
$$;
