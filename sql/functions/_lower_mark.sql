-- pgq._lower_mark(entrypoint, neg_priority, run_at, id): a job of entrypoint became queued
-- at claim position (neg_priority, run_at, id) in this transaction (the triggers of
-- pgq._jobs call it). Keeps the invariant of pgq._marks: no queued job sorts before a mark
-- in force. Its partner is pgq._raise_mark; docs/held-snapshot.md has the argument.
-- The mark lock (share mode, held until this transaction ends) keeps raises out while this
-- job is invisible to them: a raise either ended before the check below, which then sees
-- its mark, or starts after this commit and sees the job. Only READ COMMITTED reads the mark
-- in a snapshot taken after the lock; another isolation level's snapshot may predate the
-- last raise, so it voids every mark instead (pgq._mark_voids). A job below the mark lowers
-- it in place, unless another producer is lowering it (its row lock lasts until it
-- commits): then it voids rather than wait behind that transaction.
-- A raise that holds the lock longer than 50 ms (a claim inside a longer transaction) is not
-- waited for: the producer takes the bypass lock instead, which keeps the next raises out
-- until it ends, and voids the marks, which voids the raise under way too.
CREATE OR REPLACE FUNCTION pgq._lower_mark(
    entrypoint text, neg_priority bigint, run_at timestamptz, id bigint
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_mark record;
BEGIN
    IF NOT pg_try_advisory_xact_lock_shared(7366514, hashtext(_lower_mark.entrypoint))
       AND NOT pgq._mark_lock_shared(_lower_mark.entrypoint) THEN
        PERFORM pg_advisory_xact_lock_shared(7366515, hashtext(_lower_mark.entrypoint));
        PERFORM nextval('pgq._mark_voids');
        RETURN;
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM nextval('pgq._mark_voids');
        RETURN;
    END IF;
    SELECT m.neg_priority, m.run_at, m.id, m.epoch INTO v_mark
    FROM pgq._marks AS m WHERE m.entrypoint = _lower_mark.entrypoint;
    IF NOT FOUND OR v_mark.epoch <> pgq._mark_epoch()
       OR ROW(_lower_mark.neg_priority, _lower_mark.run_at, _lower_mark.id)
       >= ROW(v_mark.neg_priority, v_mark.run_at, v_mark.id) THEN
        RETURN;
    END IF;
    PERFORM 1 FROM pgq._marks AS m WHERE m.entrypoint = _lower_mark.entrypoint FOR NO KEY UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        PERFORM nextval('pgq._mark_voids');
        RETURN;
    END IF;
    UPDATE pgq._marks AS m
    SET neg_priority = _lower_mark.neg_priority, run_at = _lower_mark.run_at, id = _lower_mark.id
    WHERE m.entrypoint = _lower_mark.entrypoint
      AND ROW(m.neg_priority, m.run_at, m.id) > ROW(_lower_mark.neg_priority, _lower_mark.run_at, _lower_mark.id);
END
$$;

COMMENT ON FUNCTION pgq._lower_mark(text, bigint, timestamptz, bigint) IS
'Internal: keep the claim mark of an entrypoint at or below a job that became queued.';
