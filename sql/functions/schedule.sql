-- pgq.schedule: create or replace a periodic job. Every minute that matches `cron` (5
-- fields, UTC: minute hour day-of-month month day-of-week, with ranges, lists, steps and
-- names; or @hourly, @daily, @weekly, @monthly, @yearly), one job is enqueued to
-- `entrypoint` with `payload`, by pgq.run_schedules (pg_cron and the workers' sweep).
-- The schedule is a row in this database, so it works whatever database pg_cron lives in.
--   SELECT pgq.schedule('nightly-report', '30 2 * * *', 'send_report', '{"kind": "daily"}');
-- Replacing a schedule keeps its last run, and its next run too when the cron text is the
-- same (re-declaring schedules at every deploy skips no due run). Returns the next run.
-- Raises PQ001 for an invalid name or entrypoint, PQ006 for an invalid cron expression or
-- one that matches no date (such as '0 0 31 2 *').
CREATE OR REPLACE FUNCTION pgq.schedule(name text, cron text, entrypoint text, payload jsonb DEFAULT NULL)
RETURNS timestamptz
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_next timestamptz;
BEGIN
    IF name IS NULL OR btrim(name) = '' OR length(name) > 200 OR name ~ '[[:cntrl:]]' THEN
        PERFORM pgq._invalid('name', 'must be 1 to 200 printable characters',
            'Name the schedule, e.g. ''nightly-report''.');
    END IF;
    PERFORM pgq._cron_parse(cron);
    PERFORM pgq._check_job(entrypoint, payload, NULL, NULL, NULL, NULL);
    v_next := pgq._cron_next(cron, now());
    IF v_next IS NULL THEN
        RAISE EXCEPTION 'pgq: invalid cron expression: % matches no date', cron
            USING ERRCODE = 'PQ006', HINT = 'Check the day of month against the month, e.g. no 31 in February.';
    END IF;
    INSERT INTO pgq._schedules AS s (name, cron, entrypoint, payload, next_run)
    VALUES (schedule.name, btrim(schedule.cron), schedule.entrypoint, schedule.payload, v_next)
    ON CONFLICT ON CONSTRAINT _schedules_pkey DO UPDATE
    SET cron = excluded.cron,
        entrypoint = excluded.entrypoint,
        payload = excluded.payload,
        next_run = CASE WHEN s.cron = excluded.cron THEN s.next_run ELSE excluded.next_run END
    RETURNING s.next_run INTO v_next;
    RETURN v_next;
END
$$;

COMMENT ON FUNCTION pgq.schedule(text, text, text, jsonb) IS
'Create or replace a periodic job (5-field cron, UTC); returns its next run time.';
