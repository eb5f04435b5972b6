-- pgq.stats: per-entrypoint throughput and latency over the last `since` (default 5
-- minutes), from the outcome log. succeeded: jobs completed; failed: failed attempts; dead:
-- those of the failed attempts that left their job dead; canceled: jobs canceled;
-- per_second: succeeded / since;
-- wait = started - enqueued and run = finished - started of the succeeded jobs, as the 50th,
-- 95th and 99th percentiles. The log's BRIN index on finished_at limits the scan to the
-- window, so it is cheap to call every second.
--   SELECT * FROM pgq.stats('1 hour');
-- Raises PQ001 for a NULL `since`, or one under 1 second or over 31 days.
CREATE OR REPLACE FUNCTION pgq.stats(since interval DEFAULT '5 minutes')
RETURNS TABLE (
    entrypoint text,
    succeeded bigint,
    failed bigint,
    dead bigint,
    canceled bigint,
    per_second numeric,
    wait_p50 interval,
    wait_p95 interval,
    wait_p99 interval,
    run_p50 interval,
    run_p95 interval,
    run_p99 interval
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    IF since IS NULL OR since < interval '1 second' OR since > interval '31 days' THEN
        PERFORM pgq._invalid('since', format('%s is out of range', coalesce(since::text, 'NULL')),
            'Use an interval from 1 second to 31 days, e.g. ''5 minutes''.');
    END IF;
    RETURN QUERY
    WITH w AS (
        SELECT
            o.entrypoint,
            o.outcome,
            o.fatal,
            extract(EPOCH FROM o.started_at - o.enqueued_at) AS wait_s,
            extract(EPOCH FROM o.finished_at - o.started_at) AS run_s
        FROM pgq._outcomes AS o
        WHERE o.finished_at >= now() - stats.since
    ),
    p AS (
        SELECT
            w.entrypoint,
            count(*) FILTER (WHERE w.outcome = 'succeeded') AS succeeded,
            count(*) FILTER (WHERE w.outcome = 'failed') AS failed,
            count(*) FILTER (WHERE w.fatal) AS dead,
            count(*) FILTER (WHERE w.outcome = 'canceled') AS canceled,
            percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY w.wait_s)
                FILTER (WHERE w.outcome = 'succeeded') AS wait_q,
            percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY w.run_s)
                FILTER (WHERE w.outcome = 'succeeded') AS run_q
        FROM w
        GROUP BY w.entrypoint
    )
    SELECT
        p.entrypoint,
        p.succeeded,
        p.failed,
        p.dead,
        p.canceled,
        p.succeeded / extract(EPOCH FROM stats.since),
        make_interval(secs => p.wait_q[1]),
        make_interval(secs => p.wait_q[2]),
        make_interval(secs => p.wait_q[3]),
        make_interval(secs => p.run_q[1]),
        make_interval(secs => p.run_q[2]),
        make_interval(secs => p.run_q[3])
    FROM p
    ORDER BY p.entrypoint;
END
$$;

COMMENT ON FUNCTION pgq.stats(interval) IS
'Per-entrypoint succeeded/failed/dead/canceled counts, jobs per second and wait/run latency percentiles over the last `since`.';
