-- pgq._sweep(): what every heartbeat runs, so that a queue works without pg_cron and
-- recovers from a crashed worker within a lease: pgq.reap, pgq.run_schedules (an index
-- lookup when nothing is due), and pgq.prune when the last prune is over two hours old
-- (pg_cron prunes hourly, so with pg_cron the workers never do).
CREATE OR REPLACE FUNCTION pgq._sweep()
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pgq.reap();
    PERFORM pgq.run_schedules();
    IF NOT EXISTS (
        SELECT 1 FROM pgq._maintenance AS m
        WHERE m.task = 'prune' AND m.last_run > now() - interval '2 hours'
    ) THEN
        PERFORM pgq.prune();
    END IF;
END
$$;
