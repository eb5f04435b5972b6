-- pgq.trigger_schedule: enqueue a schedule's job now, outside its cron times; its last and
-- next run stay as they are (the next cron time still fires). The job carries the headers
-- of a scheduled run ('schedule', and 'fire_time' the current minute) plus 'manual': true,
-- and the dedupe key 'schedule:<name>:manual': while a job triggered so is still live, a
-- second trigger returns that job instead of enqueueing another (a double click runs once).
-- Returns the job's id. Raises PQ001 for a NULL name or one no schedule has.
CREATE OR REPLACE FUNCTION pgq.trigger_schedule(name text)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_schedule record;
BEGIN
    IF name IS NULL THEN
        PERFORM pgq._invalid('name', 'must not be NULL', 'Pass the name given to pgq.schedule.');
    END IF;
    -- Shared: triggers do not wait for each other, but pgq.schedule and pgq.unschedule
    -- (and run_schedules' SKIP LOCKED) wait for this one to commit.
    SELECT s.name, s.entrypoint, s.payload INTO v_schedule
    FROM pgq._schedules AS s
    WHERE s.name = trigger_schedule.name
    FOR SHARE;
    IF NOT FOUND THEN
        PERFORM pgq._invalid('name', format('no schedule is named %L', left(name, 200)),
            'See the schedules in pgq.schedules (pgq schedule adds one).');
    END IF;
    RETURN pgq.enqueue(
        entrypoint => v_schedule.entrypoint,
        payload => v_schedule.payload,
        dedupe_key => format('schedule:%s:manual', v_schedule.name),
        headers => jsonb_build_object(
            'schedule', v_schedule.name,
            'fire_time', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI"Z"'),
            'manual', TRUE
        )
    );
END
$$;

COMMENT ON FUNCTION pgq.trigger_schedule(text) IS
'Enqueue a schedule''s job now, outside its cron times (once while that job is live); returns its id.';
