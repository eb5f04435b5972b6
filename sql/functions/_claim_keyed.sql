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
-- The offers are built twice at most: first each key offers only about its share of the
-- batch (allowed / keys + 1), which is the whole answer unless a key that had more to offer
-- could have ranked within the batch (few keys with many jobs, several priorities); only
-- then every key offers its full room. One claim costs about the batch, not keys x batch.
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
    v_priorities integer[];
    v_keys text[];
    v_cap integer;
    v_ids bigint[];
    v_chosen_keys text[];
    v_exact boolean;
BEGIN
    -- The (priority, key) pairs with queued jobs: one index probe per pair.
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
    )
    SELECT coalesce(array_agg(k.priority), '{}'), coalesce(array_agg(k.key), '{}') INTO v_priorities, v_keys
    FROM keys AS k;

    -- A key's share of the batch, plus one; jobs without a key always offer the batch.
    v_cap := least(_claim_keyed.allowed, _claim_keyed.allowed / greatest(cardinality(v_keys), 1) + 1);
    LOOP
        WITH pairs AS (
            SELECT u.priority, u.key FROM unnest(v_priorities, v_keys) AS u (priority, key)
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
            FROM (SELECT DISTINCT k.key FROM pairs AS k) AS d
        ),
        -- Each pair's oldest due jobs, one more than offered: that one tells whether the
        -- pair was cut short (`spare`), and is itself never offered.
        offers AS (
            SELECT c.id, k.priority, k.key, c.run_at, m.room,
                   row_number() OVER (PARTITION BY k.priority, k.key ORDER BY c.run_at, c.id) AS turn
            FROM pairs AS k
            JOIN room AS m ON m.key = k.key
            CROSS JOIN LATERAL (
                SELECT j.id, j.run_at
                FROM pgq._jobs AS j
                WHERE j.entrypoint = _claim_keyed.entrypoint AND j.status = 'queued'
                  AND j.concurrency_key IS NOT NULL AND j.priority = k.priority AND j.concurrency_key = k.key
                  AND j.run_at <= now()
                ORDER BY j.run_at, j.id
                LIMIT CASE WHEN m.room > v_cap THEN v_cap + 1 ELSE m.room END
            ) AS c
        ),
        pool AS (
            SELECT o.id, o.priority, o.key, o.run_at, o.room, o.turn
            FROM offers AS o
            WHERE o.turn <= least(o.room, v_cap)
            UNION ALL
            SELECT u.id, u.priority, '', u.run_at, _claim_keyed.allowed,
                   row_number() OVER (PARTITION BY u.priority ORDER BY u.run_at, u.id)
            FROM (
                SELECT j.id, j.priority, j.run_at, j.concurrency_key
                FROM pgq._jobs AS j
                WHERE j.entrypoint = _claim_keyed.entrypoint AND j.status = 'queued' AND j.run_at <= now()
                -- The claim index's order (-priority: one direction, see pgq._marks).
                ORDER BY -j.priority::bigint, j.run_at, j.id
                LIMIT _claim_keyed.allowed
            ) AS u
            WHERE u.concurrency_key IS NULL
        ),
        ranked AS (
            SELECT p.id, p.priority, p.key, p.turn, p.room,
                   row_number() OVER (PARTITION BY p.key ORDER BY p.priority DESC, p.run_at, p.id) AS nth
            FROM pool AS p
        ),
        ordered AS (
            SELECT r.id, r.priority, r.turn, r.key,
                   row_number() OVER (
                       ORDER BY r.priority DESC, r.turn, coalesce(r.key <= _claim_keyed.key_cursor, FALSE), r.key,
                                r.id
                   ) AS ord
            FROM ranked AS r
            WHERE r.nth <= r.room
        ),
        -- The first job a cut pair did not offer (turn v_cap + 1), in claim order terms:
        -- every offer ranked before it is where the full offers would rank it.
        spare AS (
            SELECT o.priority, o.turn, o.key
            FROM offers AS o
            WHERE o.turn = v_cap + 1
            ORDER BY -o.priority, o.turn, coalesce(o.key <= _claim_keyed.key_cursor, FALSE), o.key
            LIMIT 1
        ),
        exact AS (
            SELECT o.id, o.ord, o.key
            FROM ordered AS o
            LEFT JOIN spare AS s ON TRUE
            WHERE s.key IS NULL
               OR (-o.priority, o.turn, coalesce(o.key <= _claim_keyed.key_cursor, FALSE), o.key)
                  < (-s.priority, s.turn, coalesce(s.key <= _claim_keyed.key_cursor, FALSE), s.key)
        )
        SELECT
            coalesce(c.ids, '{}'), coalesce(c.keys, '{}'),
            NOT EXISTS (SELECT 1 FROM spare) OR (SELECT count(*) FROM exact) >= _claim_keyed.allowed
        INTO v_ids, v_chosen_keys, v_exact
        FROM (
            SELECT array_agg(e.id ORDER BY e.ord) AS ids, array_agg(e.key ORDER BY e.ord) AS keys
            FROM exact AS e
        ) AS c;
        EXIT WHEN v_exact OR v_cap >= _claim_keyed.allowed;
        v_cap := _claim_keyed.allowed;  -- a cut key might have ranked within the batch: all of it
    END LOOP;

    -- Lock in claim order up to allowed; a job another transaction holds is skipped, and the
    -- next in order takes its place. A job is locked only if it is still of the key it was
    -- chosen for, and due: a change committed since (a dedupe_mode 'replace' enqueue: another
    -- key or run_at) could put it past its new key's room or before its time, so it is left
    -- for the next claim (the lock re-checks these against the newest version).
    SELECT coalesce(array_agg(l.id ORDER BY l.ord), '{}') INTO v_ids
    FROM (
        SELECT j.id, u.ord
        FROM unnest(v_ids, v_chosen_keys) WITH ORDINALITY AS u (id, key, ord)
        JOIN pgq._jobs AS j ON j.id = u.id
        WHERE j.status = 'queued' AND j.entrypoint = _claim_keyed.entrypoint
          AND coalesce(j.concurrency_key, '') = u.key AND j.run_at <= now()
        ORDER BY u.ord
        LIMIT _claim_keyed.allowed
        FOR UPDATE OF j SKIP LOCKED
    ) AS l;
    RETURN v_ids;
END
$$;
