-- pgq.sweeps: when each periodic sweep last ran, and how late it is. reap: the last
-- pgq.reap() (pg_cron every minute); prune: the last pgq.prune()
-- (pg_cron hourly, or a worker's pgq.sweep when pg_cron is absent); run_schedules: the
-- last time a schedule fired, and it is late when a schedule has been due for longer than
-- a minute. late: how far past `every` the sweep is (NULL: on time, or it never ran).
CREATE OR REPLACE VIEW pgq.sweeps AS
SELECT
    t.sweep,
    t.every,
    t.last_run,
    now() - t.last_run AS age,
    CASE WHEN t.due < now() - t.every THEN now() - t.every - t.due END AS late
FROM (
    SELECT
        'reap'::text AS sweep,
        interval '1 minute' AS every,
        max(m.last_run) AS last_run,
        max(m.last_run) AS due
    FROM pgq._maintenance AS m
    WHERE m.task = 'reap'
    UNION ALL
    SELECT
        'run_schedules' AS sweep,
        interval '1 minute' AS every,
        max(s.last_run) AS last_run,
        min(s.next_run) AS due
    FROM pgq._schedules AS s
    UNION ALL
    SELECT
        'prune' AS sweep,
        interval '1 hour' AS every,
        max(m.last_run) AS last_run,
        max(m.last_run) AS due
    FROM pgq._maintenance AS m
    WHERE m.task = 'prune'
) AS t;

COMMENT ON VIEW pgq.sweeps IS 'When each sweep (reap, run_schedules, prune) last ran, and how late it is.';
