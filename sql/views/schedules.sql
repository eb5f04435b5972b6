-- pgq.schedules: periodic jobs (pgq.schedule), with the time each last fired and will next.
CREATE OR REPLACE VIEW pgq.schedules AS
SELECT
    s.name,
    s.cron,
    s.entrypoint,
    s.payload,
    s.last_run,
    s.next_run,
    s.created_at
FROM pgq._schedules AS s
ORDER BY s.name;

COMMENT ON VIEW pgq.schedules IS 'Periodic jobs: cron (UTC), entrypoint, payload, last and next run.';
