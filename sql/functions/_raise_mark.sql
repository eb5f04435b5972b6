-- pgq._raise_mark(entrypoint): move the entrypoint's claim mark up to its first queued job,
-- so that claims start their index scan there instead of walking the entries of every job
-- claimed since the oldest snapshot (vacuum cannot remove them while a long transaction, a
-- report or pg_dump holds that snapshot). pgq.claim calls it every 0.2 s or so.
-- Safe because no producer that could lower the mark is between writing a queued job and
-- committing while this runs: each holds the mark lock in share mode (pgq._lower_mark),
-- which this takes exclusively without waiting. Producers that come while this
-- transaction holds it wait for its end and then read the new mark; those that stop
-- waiting after 50 ms record a low, which commits with their job. The search runs in a
-- snapshot taken after the lock (READ COMMITTED only), from the lesser of the mark and the
-- lows it sees, and deletes just those lows: a low it cannot see yet is left for claims
-- and the next raise.
-- The mark trails the present by a second within its priority, so that producers whose
-- transactions overlap (a job's run_at defaults to its transaction's start) land above it
-- rather than lower it; claims walk that second's entries. With no queued job, the mark
-- keeps its priority level (or 0) and moves to a second ago.
-- Returns whether the mark was raised (FALSE: a producer is in flight, a verify holds the
-- mark row, or not READ COMMITTED).
CREATE OR REPLACE FUNCTION pgq._raise_mark(entrypoint text)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_mark record;
    v_low record;
    v_seen tid[];
    v_np bigint;
    v_run timestamptz;
    v_id bigint;
    v_first record;
    v_level bigint;
    v_trail timestamptz := clock_timestamp() - interval '1 second';
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed'
       OR NOT pg_try_advisory_xact_lock(pgq._lock_key('mark'), hashtext(_raise_mark.entrypoint)) THEN
        RETURN FALSE;
    END IF;
    -- The mark row is locked without waiting: a claim's pgq._verify_mark holds it until that
    -- claim commits, and that claim's own raises may be waiting for a mark row this
    -- transaction holds (another entrypoint's): waiting here would close the cycle (40P01).
    -- A held row leaves the mark to the next claim. Producers that hold it also hold the
    -- mark lock in share mode, which this raise excludes.
    SELECT m.neg_priority, m.run_at, m.id INTO v_mark
    FROM pgq._marks AS m WHERE m.entrypoint = _raise_mark.entrypoint
    FOR NO KEY UPDATE SKIP LOCKED;
    IF NOT FOUND AND EXISTS (SELECT 1 FROM pgq._marks AS m WHERE m.entrypoint = _raise_mark.entrypoint) THEN
        RETURN FALSE;
    END IF;
    SELECT array_agg(l.ctid) INTO v_seen FROM pgq._mark_lows AS l WHERE l.entrypoint = _raise_mark.entrypoint;
    SELECT l.neg_priority, l.run_at, l.id INTO v_low
    FROM pgq._mark_lows AS l WHERE l.ctid = ANY (v_seen)
    ORDER BY l.neg_priority, l.run_at, l.id
    LIMIT 1;
    -- Where the claims start now: the lesser of the mark and the lows (the front if no mark).
    IF v_mark.id IS NULL THEN
        v_np := -2147483648;
        v_run := '-infinity';
        v_id := 0;
    ELSIF v_low.id IS NOT NULL
          AND ROW(v_low.neg_priority, v_low.run_at, v_low.id) < ROW(v_mark.neg_priority, v_mark.run_at, v_mark.id) THEN
        v_np := v_low.neg_priority;
        v_run := v_low.run_at;
        v_id := v_low.id;
    ELSE
        v_np := v_mark.neg_priority;
        v_run := v_mark.run_at;
        v_id := v_mark.id;
    END IF;
    SELECT -j.priority::bigint AS neg_priority, j.run_at, j.id INTO v_first
    FROM pgq._jobs AS j
    WHERE j.entrypoint = _raise_mark.entrypoint AND j.status = 'queued'
      AND ROW(-j.priority::bigint, j.run_at, j.id) >= ROW(v_np, v_run, v_id)
    ORDER BY -j.priority::bigint, j.run_at, j.id
    LIMIT 1;
    v_level := coalesce(v_first.neg_priority, v_mark.neg_priority, 0);
    IF v_first.id IS NOT NULL AND ROW(v_first.neg_priority, v_first.run_at, v_first.id)
                                  <= ROW(v_level, v_trail, 0::bigint) THEN
        v_np := v_first.neg_priority;
        v_run := v_first.run_at;
        v_id := v_first.id;
    ELSE
        v_np := v_level;
        v_run := v_trail;
        v_id := 0;
    END IF;
    INSERT INTO pgq._marks AS m (entrypoint, neg_priority, run_at, id, raised_at, verified_at)
    VALUES (_raise_mark.entrypoint, v_np, v_run, v_id, clock_timestamp(), clock_timestamp())
    ON CONFLICT ON CONSTRAINT _marks_pkey DO UPDATE
    SET neg_priority = excluded.neg_priority, run_at = excluded.run_at, id = excluded.id,
        raised_at = excluded.raised_at;
    DELETE FROM pgq._mark_lows AS l WHERE l.ctid = ANY (v_seen) AND l.entrypoint = _raise_mark.entrypoint;
    RETURN TRUE;
END
$$;

COMMENT ON FUNCTION pgq._raise_mark(text) IS
'Internal: move the claim mark of an entrypoint up to its first queued job (see docs/held-snapshot.md).';
