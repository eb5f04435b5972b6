-- pgq._trg_marks_updated(): row trigger after UPDATE on pgq._jobs, for a job that became queued
-- (a retry, a release, a snooze, a dependency that succeeded) or moved earlier in claim
-- order while queued (a higher priority, an earlier run_at); its WHEN clause (sql/setup.sql)
-- keeps claims and completions from calling it at all.
CREATE OR REPLACE FUNCTION pgq._trg_marks_updated()
RETURNS trigger
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pgq._lower_mark(new.entrypoint, -new.priority::bigint, new.run_at, new.id);
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION pgq._trg_marks_updated() IS
'Internal: trigger keeping the claim mark below a job that became queued or moved earlier.';
