-- pgq._raise_mark(entrypoint): move the entrypoint's claim mark up to its first queued job,
-- so that claims start their index scan there instead of walking the entries of every job
-- claimed since the oldest snapshot (vacuum cannot remove them while a long transaction, a
-- report or pg_dump holds that snapshot). pgq.claim calls it every 0.2 s or so.
-- Safe because no producer of the entrypoint is between writing a queued job and committing
-- while this runs: each holds the mark lock in share mode (pgq._lower_mark), which this
-- takes exclusively without waiting, or the bypass lock, which this checks after reading
-- the epoch (a producer that takes it later voids the epoch read here). Producers that
-- come while this transaction holds the mark lock wait for its end (or void the marks
-- after 50 ms) and then see the new mark. The search runs in a snapshot taken after the
-- locks: READ COMMITTED only. See docs/held-snapshot.md.
-- The search starts at the mark in force, or at the front when the mark was voided, and
-- every 10 s in any case (a verification: a queued job found below a mark in force would be
-- a defect of this protocol, reported as a WARNING and repaired by the new mark).
-- The mark trails the present by a second within its priority, so that producers whose
-- transactions overlap (a job's run_at defaults to its transaction's start) do not land
-- below it; claims walk that second's entries. With no queued job, the mark keeps its
-- priority level (or 0) and moves to a second ago.
-- Returns whether the mark is now current (FALSE: busy, or not READ COMMITTED).
CREATE OR REPLACE FUNCTION pgq._raise_mark(entrypoint text)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_epoch bigint;
    v_mark record;
    v_in_force boolean;
    v_full boolean;
    v_from_np bigint := -2147483648;
    v_from_run timestamptz := '-infinity';
    v_from_id bigint := 0;
    v_first record;
    v_level bigint;
    v_trail timestamptz := clock_timestamp() - interval '1 second';
    v_np bigint;
    v_run timestamptz;
    v_id bigint;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RETURN FALSE;
    END IF;
    -- A producer on the bypass: give up before taking the mark lock (which would then be
    -- held, for nothing, until this transaction ends).
    IF NOT pgq._bypass_free(_raise_mark.entrypoint) THEN
        RETURN FALSE;
    END IF;
    IF NOT pg_try_advisory_xact_lock(7366514, hashtext(_raise_mark.entrypoint)) THEN
        RETURN FALSE;
    END IF;
    v_epoch := pgq._mark_epoch();
    -- After the epoch: a producer that takes the bypass lock later voids this epoch.
    IF NOT pgq._bypass_free(_raise_mark.entrypoint) THEN
        RETURN FALSE;
    END IF;
    SELECT m.neg_priority, m.run_at, m.id, m.epoch, m.verified_at INTO v_mark
    FROM pgq._marks AS m WHERE m.entrypoint = _raise_mark.entrypoint;
    v_in_force := FOUND AND v_mark.epoch = v_epoch;
    v_full := NOT v_in_force OR v_mark.verified_at < clock_timestamp() - interval '10 seconds';
    IF NOT v_full THEN
        v_from_np := v_mark.neg_priority;
        v_from_run := v_mark.run_at;
        v_from_id := v_mark.id;
    END IF;
    SELECT -j.priority::bigint AS neg_priority, j.run_at, j.id INTO v_first
    FROM pgq._jobs AS j
    WHERE j.entrypoint = _raise_mark.entrypoint AND j.status = 'queued'
      AND ROW(-j.priority::bigint, j.run_at, j.id) >= ROW(v_from_np, v_from_run, v_from_id)
    ORDER BY -j.priority::bigint, j.run_at, j.id
    LIMIT 1;
    IF v_first.id IS NOT NULL THEN
        v_level := v_first.neg_priority;
        IF v_in_force AND ROW(v_first.neg_priority, v_first.run_at, v_first.id)
                          < ROW(v_mark.neg_priority, v_mark.run_at, v_mark.id) THEN
            RAISE WARNING 'pgq: queued job % of % was below the claim mark; the mark is lowered to it',
                v_first.id, _raise_mark.entrypoint;
        END IF;
    ELSE
        v_level := CASE WHEN v_in_force THEN v_mark.neg_priority ELSE 0 END;
    END IF;
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
    INSERT INTO pgq._marks AS m (entrypoint, neg_priority, run_at, id, epoch, raised_at, verified_at)
    VALUES (_raise_mark.entrypoint, v_np, v_run, v_id, v_epoch, clock_timestamp(), clock_timestamp())
    ON CONFLICT ON CONSTRAINT _marks_pkey DO UPDATE
    SET neg_priority = excluded.neg_priority, run_at = excluded.run_at, id = excluded.id, epoch = excluded.epoch,
        raised_at = excluded.raised_at,
        verified_at = CASE WHEN v_full THEN excluded.verified_at ELSE m.verified_at END;
    RETURN TRUE;
END
$$;

COMMENT ON FUNCTION pgq._raise_mark(text) IS
'Internal: move the claim mark of an entrypoint up to its first queued job (see docs/held-snapshot.md).';
