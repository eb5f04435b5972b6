-- pgq.batch: open a batch in the current transaction. Members are added in the same
-- transaction by pgq.enqueue_batch(..., batch => id); at its commit the batch is closed,
-- and from then on its callbacks are enqueued, each exactly once, in the transaction that
-- brings it about: on_death when a member first goes dead, on_finish when every member has
-- ended (succeeded, dead or canceled) for the first time, on_success when every member has
-- succeeded (possibly later, after pgq.retry of dead members). A batch without members
-- finishes and succeeds at its commit. Rolled back, the batch and its members never were.
-- Parameters: on_finish, on_success, on_death: each NULL (no callback), an entrypoint as a
--   JSON string, or {"entrypoint", "payload" (an object), "priority", "headers",
--   "max_attempts"}. The callback job's payload is that payload with "batch": {"id",
--   "event" (finish, success, death), "total", "succeeded", "dead", "canceled"} added; it
--   is enqueued as the batch's producer (who may read it, and pgq.batch_results).
-- The count of this transaction's batches stays deferred to its commit, even under SET
-- CONSTRAINTS ALL IMMEDIATE (else the batch would finish at this statement, without
-- members); an explicit SET CONSTRAINTS ... IMMEDIATE later counts it then, and a batch it
-- finished takes no more members.
-- Returns the batch id. Raises PQ001 (naming the callback and key) and PQ004; nothing is
-- created then.
CREATE OR REPLACE FUNCTION pgq.batch(
    on_finish jsonb DEFAULT NULL,
    on_success jsonb DEFAULT NULL,
    on_death jsonb DEFAULT NULL
)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_id bigint;
    v_on_finish jsonb := pgq._check_callback('on_finish', batch.on_finish);
    v_on_success jsonb := pgq._check_callback('on_success', batch.on_success);
    v_on_death jsonb := pgq._check_callback('on_death', batch.on_death);
BEGIN
    -- After the checks: a call that raises leaves the transaction's settings as they were.
    SET CONSTRAINTS pgq._batches_settle_trg, pgq._batch_members_settle_trg DEFERRED;
    INSERT INTO pgq._batches AS b (on_finish, on_success, on_death)
    VALUES (v_on_finish, v_on_success, v_on_death)
    RETURNING b.id INTO v_id;
    RETURN v_id;
END
$$;

COMMENT ON FUNCTION pgq.batch(jsonb, jsonb, jsonb) IS
'Open a batch in this transaction (members: pgq.enqueue_batch(..., batch => id)); its callbacks are enqueued once each when its members finish, succeed, or first die.';
