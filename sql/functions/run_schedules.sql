-- pgq.run_schedules: enqueue every schedule due at `now` (default: the current time).
-- Exactly once per schedule and minute however many sessions call it at once: a due
-- schedule is locked (SKIP LOCKED) and moved to its next run in the same transaction, and
-- the job carries the dedupe key 'schedule:<name>:<fire time>'. After an outage, a
-- schedule that missed several runs fires once (for its earliest missed time), not once per
-- missed minute. The job's headers name the schedule and the fire time.
-- pg_cron runs it every minute; the workers' heartbeat sweep runs it too.
-- Returns the number of jobs enqueued.
CREATE OR REPLACE FUNCTION pgq.run_schedules(now timestamptz DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := coalesce(run_schedules.now, pg_catalog.now());
    v_schedule record;
    v_fire text;
    v_count integer := 0;
BEGIN
    IF v_now < '1970-01-01 00:00Z' OR v_now >= '10000-01-01 00:00Z' THEN
        PERFORM pgq._invalid('now', format('%s is out of range', v_now),
            'Pass a time between 1970 and 9999, or NULL for the current time.');
    END IF;
    FOR v_schedule IN
        SELECT s.name, s.cron, s.entrypoint, s.payload, s.next_run
        FROM pgq._schedules AS s
        WHERE s.next_run <= v_now
        ORDER BY s.next_run, s.name
        FOR UPDATE SKIP LOCKED
    LOOP
        v_fire := to_char(v_schedule.next_run AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI"Z"');
        PERFORM pgq.enqueue(
            entrypoint => v_schedule.entrypoint,
            payload => v_schedule.payload,
            dedupe_key => format('schedule:%s:%s', v_schedule.name, v_fire),
            headers => jsonb_build_object('schedule', v_schedule.name, 'fire_time', v_fire)
        );
        UPDATE pgq._schedules AS s
        SET last_run = v_schedule.next_run,
            next_run = pgq._cron_next(v_schedule.cron, greatest(v_now, v_schedule.next_run))
        WHERE s.name = v_schedule.name;
        v_count := v_count + 1;
    END LOOP;
    RETURN v_count;
END
$$;

COMMENT ON FUNCTION pgq.run_schedules(timestamptz) IS
'Enqueue the schedules due at now (default the current time), once per schedule and minute; returns how many.';
