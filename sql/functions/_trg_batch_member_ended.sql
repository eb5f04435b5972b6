-- pgq._trg_batch_member_ended(): trigger after DELETE and after UPDATE OF status on pgq._jobs,
-- for members of a batch only (the WHEN clauses in sql/setup.sql test batch_id: jobs in no
-- batch never call it). A member left the hot table (succeeded, canceled, discarded), went
-- dead, or came back from dead (pgq.retry): its member row is marked with this transaction,
-- and pgq._trg_batch_settle counts it at commit, when every statement of the transaction has
-- run (the outcome of a job that left the table is in the log then, whatever the order of
-- the function's statements). It reads nothing and locks no batch: members of one batch
-- ending on many connections do not wait for each other here.
CREATE OR REPLACE FUNCTION pgq._trg_batch_member_ended()
RETURNS trigger
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_xact xid8 := pg_catalog.pg_current_xact_id();
BEGIN
    -- A job that pgq.isolate or pgq.unisolate moves to another partition has not ended:
    -- they set pgq.moving to their transaction's id (a value no other transaction matches).
    IF pg_catalog.current_setting('pgq.moving', TRUE) = pg_catalog.pg_current_xact_id()::text THEN
        RETURN NULL;
    END IF;
    IF tg_op = 'DELETE' THEN
        UPDATE pgq._batch_members AS m SET ended_xact = v_xact
        WHERE m.batch_id = old.batch_id AND m.job_id = old.id AND m.ended_xact IS DISTINCT FROM v_xact;
    ELSE
        UPDATE pgq._batch_members AS m SET ended_xact = v_xact
        WHERE m.batch_id = new.batch_id AND m.job_id = new.id AND m.ended_xact IS DISTINCT FROM v_xact;
    END IF;
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION pgq._trg_batch_member_ended() IS
'Internal: trigger marking a batch member that ended or came back, for pgq._trg_batch_settle at commit.';
