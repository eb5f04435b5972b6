-- pgq._dependencies(depends_on): what a new job would wait for, as of now. Locks nothing:
-- a producer may hold its transaction open for long, and the jobs it waits for must go on
-- being claimed and completed meanwhile. One of them may therefore end before the new job
-- is visible to it; pgq._trg_check_waiting, run when the producer commits, settles that case.
-- Returns waits_for (the live, not dead, dependencies; NULL when none) and failed (why the
-- job cannot run: a dependency that is dead or ended canceled; NULL when none).
-- Raises PQ001 for NULL elements, too many ids, or an id that is neither live nor logged.
-- A job the caller may not read (pgq._may_read: not its producer's, nor its worker's, nor
-- an admin's) is unknown to it, as pgq.job_status says: ids are sequential, and an answer
-- about another producer's job (waiting, canceled with it) would tell whether it exists
-- and how it ended.
CREATE OR REPLACE FUNCTION pgq._dependencies(depends_on bigint[], OUT waits_for bigint[], OUT failed text)
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_dead bigint;
    v_hidden bigint;
    v_id bigint;
    v_outcome text;
    v_visible boolean;
BEGIN
    PERFORM pgq._check_ids('depends_on', depends_on);
    SELECT array_agg(j.id ORDER BY j.id) FILTER (WHERE j.status <> 'dead'),
           min(j.id) FILTER (WHERE j.status = 'dead'),
           min(j.id) FILTER (WHERE NOT pgq._may_read(j.enqueued_by, j.worker_id))
    INTO waits_for, v_dead, v_hidden
    FROM pgq._jobs AS j
    WHERE j.id = ANY (_dependencies.depends_on);
    IF v_hidden IS NOT NULL THEN
        PERFORM pgq._invalid('depends_on', format('job %s is unknown (or its outcome was pruned)', v_hidden),
            'Pass ids returned by pgq.enqueue of jobs that are live or finished recently.');
    END IF;
    IF v_dead IS NOT NULL THEN
        failed := format('dependency %s is dead', v_dead);
        RETURN;
    END IF;

    -- The others have finished: they must have succeeded.
    FOR v_id IN
        SELECT DISTINCT u.id FROM unnest(_dependencies.depends_on) AS u (id)
        WHERE u.id <> ALL (coalesce(waits_for, '{}'))
        ORDER BY u.id
    LOOP
        SELECT o.outcome, pgq._may_read(o.enqueued_by, NULL) INTO v_outcome, v_visible
        FROM pgq._final_outcome(v_id) AS o;
        IF v_outcome IS NULL OR NOT v_visible THEN
            PERFORM pgq._invalid('depends_on', format('job %s is unknown (or its outcome was pruned)', v_id),
                'Pass ids returned by pgq.enqueue of jobs that are live or finished recently.');
        ELSIF v_outcome <> 'succeeded' THEN
            failed := format('dependency %s ended %s', v_id, v_outcome);
            RETURN;
        END IF;
    END LOOP;
END
$$;
