-- pgq._lower_mark(entrypoint, neg_priority, run_at, id): a job of entrypoint became queued
-- at claim position (neg_priority, run_at, id) in this transaction (the triggers of
-- pgq._jobs call it). Keeps the invariant of pgq._marks: no queued job sorts before its
-- entrypoint's mark and all of its lows. Its partner is pgq._raise_mark; the argument is in
-- docs/held-snapshot.md.
-- In READ COMMITTED: the mark lock (share mode, held until this transaction ends) keeps
-- raises out while this job is invisible to them: a raise either ended before the read
-- below, which then sees its mark, or starts after this commit and sees the job. A job
-- below the mark lowers it in place.
-- Otherwise the job's position is added to pgq._mark_lows, in this transaction: claims
-- start at the lowest of the mark and the lows, and a raise deletes only the lows it can
-- see, so a low needs no lock. That is the way when this snapshot may predate the last
-- raise (another isolation level: no lock is taken then, and no raise is kept out), when
-- another producer is lowering the same mark (its row lock lasts until it commits: no
-- waiting for it), and when a raise holds the mark lock for more than 50 ms (a claim inside
-- a longer transaction). Keyed entrypoints do not use the mark (their claims walk their own
-- index): no low for them.
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
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        IF EXISTS (SELECT 1 FROM pgq._queues AS q WHERE q.entrypoint = _lower_mark.entrypoint AND q.keyed) THEN
            RETURN;
        END IF;
    ELSIF pg_try_advisory_xact_lock_shared(pgq._lock_key('mark'), hashtext(_lower_mark.entrypoint))
          OR pgq._mark_lock_shared(_lower_mark.entrypoint) THEN
        SELECT m.neg_priority, m.run_at, m.id INTO v_mark
        FROM pgq._marks AS m WHERE m.entrypoint = _lower_mark.entrypoint;
        IF NOT FOUND OR ROW(_lower_mark.neg_priority, _lower_mark.run_at, _lower_mark.id)
                        >= ROW(v_mark.neg_priority, v_mark.run_at, v_mark.id) THEN
            RETURN;
        END IF;
        PERFORM 1 FROM pgq._marks AS m WHERE m.entrypoint = _lower_mark.entrypoint FOR NO KEY UPDATE SKIP LOCKED;
        IF FOUND THEN
            UPDATE pgq._marks AS m
            SET neg_priority = _lower_mark.neg_priority, run_at = _lower_mark.run_at, id = _lower_mark.id
            WHERE m.entrypoint = _lower_mark.entrypoint
              AND ROW(m.neg_priority, m.run_at, m.id)
                  > ROW(_lower_mark.neg_priority, _lower_mark.run_at, _lower_mark.id);
            RETURN;
        END IF;
    END IF;
    INSERT INTO pgq._mark_lows (entrypoint, neg_priority, run_at, id)
    VALUES (_lower_mark.entrypoint, _lower_mark.neg_priority, _lower_mark.run_at, _lower_mark.id);
END
$$;

COMMENT ON FUNCTION pgq._lower_mark(text, bigint, timestamptz, bigint) IS
'Internal: keep the claim mark of an entrypoint at or below a job that became queued.';
