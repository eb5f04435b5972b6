-- pgq._trg_notify_finished(): the trigger function that tells waiters a job has finished. A job
-- someone waits for (pgq.watch set `watched`) notifies channel pgq_finished, payload its
-- id, when it leaves the hot table (succeeded, canceled, discarded) or goes dead. The WHEN
-- clauses of its triggers (sql/setup.sql) look only at the row's own flag, so jobs nobody
-- waits for never call this function and the functions that finish jobs stay as they are.
CREATE OR REPLACE FUNCTION pgq._trg_notify_finished()
RETURNS trigger
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- A job that pgq.isolate or pgq.unisolate moves to another partition has not ended:
    -- they set pgq.moving to their transaction's id (a value no other transaction matches).
    IF pg_catalog.current_setting('pgq.moving', TRUE) = pg_catalog.pg_current_xact_id()::text THEN
        RETURN NULL;
    END IF;
    IF tg_op = 'DELETE' THEN
        PERFORM pg_catalog.pg_notify('pgq_finished', old.id::text);
    ELSE
        PERFORM pg_catalog.pg_notify('pgq_finished', new.id::text);
    END IF;
    RETURN NULL;
END
$$;
