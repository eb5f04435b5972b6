-- pgq._queue_counts(exact_limit): the job counts of pgq.queues, one row per entrypoint with
-- live jobs, read through the partial indexes of pgq._jobs so that a million queued jobs
-- cost no scan of the table:
-- - the entrypoints and priorities of queued jobs, and the entrypoints of dead jobs: loose
--   index scans (one index descent per step) of _jobs_claim_idx and _jobs_dead_idx;
--   running: _jobs_running_idx; waiting: _jobs_waiting_idx (exact, in proportion to the
--   waiting jobs);
-- - queued (due) and scheduled: the entrypoint's entries of the claim index, up to
--   exact_limit + 1 of them, by an index-only scan, split by run_at; the first entry of each
--   priority gives the oldest due job;
-- - dead: the dead index, counted up to exact_limit.
-- exact_limit is how many index entries are counted per entrypoint and state, whatever the
-- other entrypoints hold: a count up to it is exact. The cost grows with the jobs counted,
-- so one read counts at most 2 x exact_limit queued jobs in all: the entrypoints smallest
-- first (by the table's statistics); once that budget is spent, the others are counted up
-- to 1,000 each (docs/monitoring.md has the figures). Above its cap a count is an estimate
-- (approximate is TRUE): the state's index size from the statistics of the last VACUUM or
-- ANALYZE (scaled to the index's current size, as the planner does; without usable
-- statistics, from the index's size alone), less what was counted exactly, shared among the
-- entrypoints over their cap by their rows in the statistics of their partitions; never less than
-- what was counted.
-- exact_limit NULL: the setting pgq.queues_exact_limit, else 100000.
-- Raises PQ001 when the limit (argument or setting) is not a whole number from 0 up.
-- SECURITY DEFINER: the readers of pgq.queues may not read pgq._jobs or its statistics.
CREATE OR REPLACE FUNCTION pgq._queue_counts(exact_limit integer DEFAULT NULL)
RETURNS TABLE (
    entrypoint text,
    queued bigint,
    scheduled bigint,
    waiting bigint,
    running bigint,
    dead bigint,
    oldest_queued_age interval,
    approximate boolean
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty):
-- tests/py/sql/test_empty_queue_plans.py says why.
SET enable_seqscan = off
-- Compiling these short index probes would cost seconds (their estimated costs can cross
-- the JIT thresholds), running them a few milliseconds.
SET jit = off
-- One plan per session: planning this statement costs more than running it, and its
-- parameters (the entrypoints, the shares) do not change the best plan.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_setting text := pg_catalog.current_setting('pgq.queues_exact_limit', TRUE);
    v_limit integer := _queue_counts.exact_limit;
    v_pair_ep text[];
    v_pair_pr integer[];
    v_pair_first timestamptz[];
    v_dead text[];
    v_share_dead integer;
    v_budget bigint;
    v_ep text;
    v_cap integer;
    v_due bigint;
    v_later bigint;
    v_c_ep text[] := '{}';
    v_c_due bigint[] := '{}';
    v_c_later bigint[] := '{}';
    v_c_cap integer[] := '{}';
BEGIN
    IF v_limit IS NULL AND coalesce(v_setting, '') <> '' THEN
        IF v_setting !~ '^\s*[0-9]{1,9}\s*$' THEN
            PERFORM pgq._invalid(
                'pgq.queues_exact_limit',
                format('%L is not a whole number from 0 to 999999999', v_setting),
                'SET pgq.queues_exact_limit = 100000 (jobs counted per entrypoint and state; more are estimated), or RESET it'
            );
        END IF;
        v_limit := v_setting::integer;
    END IF;
    IF v_limit < 0 THEN
        PERFORM pgq._invalid(
            'exact_limit', format('%s is negative', v_limit), 'pass a count from 0 up, or NULL for the default'
        );
    END IF;
    v_limit := coalesce(v_limit, 100000);

    -- The (entrypoint, priority) pairs of queued jobs with the run_at of each pair's first
    -- (oldest) job: a loose index scan of the claim index in its order, one descent per
    -- pair (a row comparison on the index's first two columns: the next priority of the
    -- same entrypoint, else the next entrypoint).
    SELECT coalesce(array_agg(t.ep), '{}'), coalesce(array_agg(t.pr), '{}'), coalesce(array_agg(t.first), '{}')
    INTO v_pair_ep, v_pair_pr, v_pair_first
    FROM (
        WITH RECURSIVE t AS (
            (
                SELECT j.entrypoint AS ep, j.priority AS pr, j.run_at AS first FROM pgq._jobs AS j
                WHERE j.status = 'queued' ORDER BY j.entrypoint, -j.priority::bigint, j.run_at LIMIT 1
            )
            UNION ALL
            SELECT n.ep, n.pr, n.first
            FROM t
            CROSS JOIN LATERAL (
                SELECT j.entrypoint AS ep, j.priority AS pr, j.run_at AS first FROM pgq._jobs AS j
                WHERE j.status = 'queued' AND ROW(j.entrypoint, -j.priority::bigint) > ROW(t.ep, -t.pr::bigint)
                ORDER BY j.entrypoint, -j.priority::bigint, j.run_at LIMIT 1
            ) AS n
        )
        SELECT t.ep, t.pr, t.first FROM t
    ) AS t;
    -- The entrypoints with dead jobs: a loose index scan of the dead index.
    v_dead := ARRAY(
        WITH RECURSIVE e AS (
            (
                SELECT j.entrypoint AS ep FROM pgq._jobs AS j
                WHERE j.status = 'dead' ORDER BY j.entrypoint LIMIT 1
            )
            UNION ALL
            SELECT (
                SELECT j.entrypoint FROM pgq._jobs AS j
                WHERE j.status = 'dead' AND j.entrypoint > e.ep ORDER BY j.entrypoint LIMIT 1
            )
            FROM e WHERE e.ep IS NOT NULL
        )
        SELECT e.ep FROM e WHERE e.ep IS NOT NULL
    );
    -- Not shared: each entrypoint's counts are exact up to the limit, whatever the others
    -- hold, within a budget of 2 x the limit index entries per read: the entrypoints are
    -- counted smallest first (by their rows in the partitions' statistics), and once the
    -- budget is spent the rest are counted up to 1,000 each (so a small queue stays exact)
    -- and estimated above that.
    v_share_dead := v_limit;
    v_budget := 2::bigint * v_limit;
    FOR v_ep IN
        SELECT e.ep
        FROM (SELECT DISTINCT u.ep FROM unnest(v_pair_ep) AS u (ep)) AS e
        LEFT JOIN (
            -- Rows, not frequencies: each partition of pgq._jobs has statistics of its own.
            -- (summed: one may still list an entrypoint that moved out of it).
            SELECT m.val, sum(m.freq * greatest(t.reltuples, 0)) AS freq
            FROM pg_catalog.pg_partition_tree('pgq._jobs') AS p
            INNER JOIN pg_catalog.pg_class AS t ON p.relid = t.oid
            INNER JOIN pg_catalog.pg_stats AS s ON s.schemaname = 'pgq' AND s.tablename = t.relname,
                unnest(s.most_common_vals::text::text [], s.most_common_freqs) AS m (val, freq)
            WHERE p.isleaf AND s.attname = 'entrypoint'
            GROUP BY m.val
        ) AS f ON e.ep = f.val
        ORDER BY coalesce(f.freq, 0), e.ep
    LOOP
        v_cap := least(v_limit, greatest(v_budget, least(v_limit, 1000)))::integer;
        -- An index-only scan of the entrypoint's entries in the claim index: the query names
        -- plain columns of the index only (a condition on its expression -priority would
        -- fetch every counted job from the heap, about 100 times slower).
        SELECT count(*) FILTER (WHERE s.run_at <= now()), count(*) FILTER (WHERE s.run_at > now())
        INTO v_due, v_later
        FROM (
            SELECT j.run_at FROM pgq._jobs AS j
            WHERE j.status = 'queued' AND j.entrypoint = v_ep
            ORDER BY j.entrypoint LIMIT v_cap + 1
        ) AS s;
        v_c_ep := v_c_ep || v_ep;
        v_c_due := v_c_due || v_due;
        v_c_later := v_c_later || v_later;
        v_c_cap := v_c_cap || v_cap;
        v_budget := v_budget - v_due - v_later;
    END LOOP;

    RETURN QUERY
    WITH RECURSIVE
    -- Queued jobs per entrypoint, as counted above (over: more than its cap).
    per_ep AS MATERIALIZED (
        SELECT
            e.ep,
            -- Over the cap, a kind that was not among the entries counted may still exist
            -- further on: counted as 1 when it does (the first due entry of a priority, or
            -- one probe per priority for a scheduled one), so that a count is 0 exactly
            -- when there are no such jobs.
            greatest(c.due, CASE WHEN c.over AND e.oldest IS NOT NULL THEN 1 ELSE 0 END) AS due,
            greatest(
                c.later,
                CASE WHEN c.over AND c.later = 0 AND EXISTS (
                    SELECT 1 FROM unnest(v_pair_ep, v_pair_pr) AS p (ep, pr)
                    WHERE p.ep = e.ep AND EXISTS (
                        SELECT 1 FROM pgq._jobs AS j
                        WHERE j.status = 'queued' AND j.entrypoint = p.ep AND -j.priority::bigint = -p.pr::bigint
                          AND j.run_at > now()
                    )
                ) THEN 1 ELSE 0 END
            ) AS later,
            c.over AS due_over,
            c.over AS later_over,
            e.oldest
        FROM (
            SELECT p.ep, min(p.first_run_at) FILTER (WHERE p.first_run_at <= now()) AS oldest
            FROM unnest(v_pair_ep, v_pair_first) AS p (ep, first_run_at)
            GROUP BY p.ep
        ) AS e
        INNER JOIN (
            SELECT u.ep, u.due, u.later, u.due + u.later > u.cap AS over
            FROM unnest(v_c_ep, v_c_due, v_c_later, v_c_cap) AS u (ep, due, later, cap)
        ) AS c ON e.ep = c.ep
    ),
    dead_counts AS MATERIALIZED (
        SELECT
            d.ep,
            (
                SELECT count(*) FROM (
                    SELECT 1 FROM pgq._jobs AS j WHERE j.status = 'dead' AND j.entrypoint = d.ep
                    ORDER BY j.id LIMIT v_share_dead + 1
                ) AS s
            ) AS n
        FROM unnest(v_dead) AS d (ep)
    ),
    -- Jobs per state from the statistics of its index (density at the last VACUUM or
    -- ANALYZE times the index's current size); from the size alone when the statistics are
    -- missing or plainly stale (fewer than were just counted): entries of about `width`
    -- bytes (line pointer included) filling 90% of a page, as jobs appended in run_at order
    -- fill them (jobs of many entrypoints interleaved leave pages emptier: an overestimate
    -- until autovacuum analyzes the table). Summed over the partitions' indexes.
    totals AS (
        SELECT
            x.status,
            CASE
                WHEN x.by_stats >= x.counted THEN x.by_stats
                ELSE greatest(x.by_size, x.counted)
            END AS n
        FROM (
            SELECT
                i.status,
                -- Rounded: 8 / 1361 * 1361 is 7.999... in floating point, under a count of 8.
                sum(
                    CASE WHEN c.relpages > 1 AND c.reltuples >= 0 THEN round(c.reltuples / c.relpages * i.pages) END
                ) AS by_stats,
                sum(greatest(i.pages - 1, 0) * (i.block - 40) * 0.9 / i.width) AS by_size,
                (
                    SELECT coalesce(sum(e.due + e.later), 0) FROM per_ep AS e WHERE i.status = 'queued'
                ) + (
                    SELECT coalesce(sum(d.n), 0) FROM dead_counts AS d WHERE i.status = 'dead'
                ) AS counted
            FROM (
                SELECT
                    v.status, p.relid AS idx, v.width,
                    pg_catalog.current_setting('block_size')::float8 AS block,
                    pg_catalog.pg_relation_size(p.relid)
                    / pg_catalog.current_setting('block_size')::float8 AS pages
                FROM (
                    VALUES ('queued', 'pgq._jobs_claim_idx'::regclass, 52), ('dead', 'pgq._jobs_dead_idx'::regclass, 32)
                ) AS v (status, idx, width)
                CROSS JOIN LATERAL pg_catalog.pg_partition_tree(v.idx) AS p
                WHERE p.isleaf
            ) AS i
            INNER JOIN pg_catalog.pg_class AS c ON i.idx = c.oid
            GROUP BY i.status
        ) AS x
    ),
    -- The statistics of each partition, as rows (a frequency times the partition's rows):
    -- the default partition's stand for an entrypoint that none of them lists.
    ep_stats AS MATERIALIZED (
        SELECT
            t.oid = 'pgq._jobs_default'::regclass AS is_default,
            s.most_common_vals::text::text [] AS vals,
            s.most_common_freqs AS freqs,
            greatest(t.reltuples, 0) AS tuples,
            greatest(t.reltuples, 0)
            * (1 - s.null_frac - coalesce((SELECT sum(f) FROM unnest(s.most_common_freqs) AS f), 0))
            / greatest(
                CASE WHEN s.n_distinct >= 0 THEN s.n_distinct
                    ELSE -s.n_distinct * greatest(t.reltuples, 0) END
                - coalesce(cardinality(s.most_common_freqs), 0),
                1
            ) AS other_freq
        FROM pg_catalog.pg_partition_tree('pgq._jobs') AS p
        INNER JOIN pg_catalog.pg_class AS t ON p.relid = t.oid
        INNER JOIN pg_catalog.pg_stats AS s ON s.schemaname = 'pgq' AND s.tablename = t.relname
        WHERE p.isleaf AND s.attname = 'entrypoint'
    ),
    mcv AS MATERIALIZED (
        -- Summed: a partition's statistics may still list an entrypoint that moved out of it.
        SELECT u.val, sum(u.freq * st.tuples) AS freq
        FROM ep_stats AS st, unnest(st.vals, st.freqs) AS u (val, freq)
        GROUP BY u.val
    ),
    -- The counts that went over the limit, with what was counted (a lower bound) and the
    -- entrypoint's weight: its rows in the partitions' statistics.
    over AS (
        SELECT
            o.ep, o.kind, o.status, o.counted,
            greatest(
                coalesce(m.freq, (SELECT st.other_freq FROM ep_stats AS st WHERE st.is_default), 1), 1e-9
            )::float8 AS weight
        FROM (
            SELECT e.ep, 'due' AS kind, 'queued' AS status, e.due AS counted FROM per_ep AS e WHERE e.due_over
            UNION ALL
            SELECT e.ep, 'later', 'queued', e.later FROM per_ep AS e WHERE e.later_over
            UNION ALL
            SELECT d.ep, 'dead', 'dead', d.n FROM dead_counts AS d WHERE d.n > v_share_dead
        ) AS o
        LEFT JOIN mcv AS m ON o.ep = m.val
    ),
    exact_sums AS (
        SELECT 'queued' AS status, coalesce(sum(e.due) FILTER (WHERE NOT e.due_over), 0)
            + coalesce(sum(e.later) FILTER (WHERE NOT e.later_over), 0) AS n
        FROM per_ep AS e
        UNION ALL
        SELECT 'dead', coalesce(sum(d.n) FILTER (WHERE d.n <= v_share_dead), 0) FROM dead_counts AS d
    ),
    -- Within an entrypoint whose due and scheduled counts both went over, the weight is
    -- split by what was counted of each.
    estimates AS (
        SELECT
            o.ep, o.kind,
            greatest(
                o.counted,
                round(
                    (t.n - x.n) * o.weight * o.counted
                    / sum(o.weight * o.counted) OVER (PARTITION BY o.status)
                )
            )::bigint AS n
        FROM over AS o
        INNER JOIN totals AS t ON o.status = t.status
        INNER JOIN exact_sums AS x ON o.status = x.status
    ),
    -- Per entrypoint: the estimates, and the running and waiting jobs.
    est AS (
        SELECT
            x.ep,
            max(x.n) FILTER (WHERE x.kind = 'due') AS due,
            max(x.n) FILTER (WHERE x.kind = 'later') AS later,
            max(x.n) FILTER (WHERE x.kind = 'dead') AS dead
        FROM estimates AS x
        GROUP BY x.ep
    ),
    live AS (
        SELECT l.ep, sum(l.running)::bigint AS running, sum(l.waiting)::bigint AS waiting
        FROM (
            SELECT j.entrypoint AS ep, count(*) AS running, 0 AS waiting
            FROM pgq._jobs AS j WHERE j.status = 'running' GROUP BY j.entrypoint
            UNION ALL
            SELECT j.entrypoint, 0, count(*)
            FROM pgq._jobs AS j WHERE j.status = 'waiting' GROUP BY j.entrypoint
        ) AS l
        GROUP BY l.ep
    ),
    eps AS (
        SELECT e.ep FROM per_ep AS e
        UNION
        SELECT d.ep FROM dead_counts AS d
        UNION
        SELECT l.ep FROM live AS l
    )
    SELECT
        eps.ep,
        coalesce(x.due, q.due, 0),
        coalesce(x.later, q.later, 0),
        coalesce(l.waiting, 0),
        coalesce(l.running, 0),
        coalesce(x.dead, d.n, 0),
        now() - q.oldest,
        coalesce(q.due_over OR q.later_over, FALSE) OR coalesce(d.n > v_share_dead, FALSE)
    FROM eps
    LEFT JOIN per_ep AS q ON eps.ep = q.ep
    LEFT JOIN dead_counts AS d ON eps.ep = d.ep
    LEFT JOIN est AS x ON eps.ep = x.ep
    LEFT JOIN live AS l ON eps.ep = l.ep;
END
$$;
