-- pgq._trg_check_waiting(): a deferred constraint trigger on new waiting jobs, fired when the
-- producer's transaction commits (see sql/setup.sql). pgq.enqueue locks nothing while the
-- producer's transaction is open, so a dependency may have ended before the new job became
-- visible to it: its completion found no dependent to release, its death none to cancel.
-- At commit, this locks the job's dependencies, in id order, and writes them (a completion,
-- failure or claim of one waits for this commit only, not for the producer's whole
-- transaction; one already under way is waited for) and looks again, in a fresh snapshot:
-- a dependency that is dead or ended other than succeeded cancels the job (and its own
-- dependents); when none is live any more, all succeeded and the job is queued. Otherwise
-- the dependencies still live will find the job (now committed) when they end.
CREATE OR REPLACE FUNCTION pgq._trg_check_waiting()
RETURNS trigger
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty):
-- tests/py/sql/test_empty_queue_plans.py says why; JIT off, which that cost would start.
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
    v_live bigint[];
    v_dead bigint;
    v_failed text;
    v_id bigint;
    v_outcome text;
BEGIN
    SELECT array_agg(d.id) FILTER (WHERE d.status <> 'dead'), min(d.id) FILTER (WHERE d.status = 'dead')
    INTO v_live, v_dead
    FROM (
        SELECT j.id, j.status FROM pgq._jobs AS j
        WHERE j.id = ANY (new.depends_on)
        ORDER BY j.id
        FOR NO KEY UPDATE
    ) AS d;
    -- Written, not only locked: a transaction whose snapshot is older than this commit
    -- (REPEATABLE READ) would not see the new job, and its end of a dependency would then
    -- release or cancel nothing. Ending a row that changed since its snapshot fails there
    -- with a serialization error (40001) instead; ended again, it sees the job.
    UPDATE pgq._jobs AS j SET has_dependents = TRUE WHERE j.id = ANY (v_live) OR j.id = v_dead;
    -- The job may have left the waiting state in its own transaction (canceled, say).
    PERFORM 1 FROM pgq._jobs AS j WHERE j.id = new.id AND j.status = 'waiting';
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF v_dead IS NOT NULL THEN
        v_failed := format('dependency %s is dead', v_dead);
    ELSIF v_live IS NULL THEN
        FOR v_id IN SELECT DISTINCT u.id FROM unnest(new.depends_on) AS u (id) ORDER BY u.id LOOP
            SELECT o.outcome INTO v_outcome FROM pgq._final_outcome(v_id) AS o;
            IF v_outcome IS DISTINCT FROM 'succeeded' THEN
                v_failed := format('dependency %s ended %s', v_id, coalesce(v_outcome, 'unknown'));
                EXIT;
            END IF;
        END LOOP;
        IF v_failed IS NULL THEN
            UPDATE pgq._jobs AS j SET status = 'queued', run_at = greatest(j.run_at, now())
            WHERE j.id = new.id;
            PERFORM pg_notify('pgq', new.entrypoint);
            RETURN NULL;
        END IF;
    ELSE
        RETURN NULL;
    END IF;
    WITH canceled AS (
        DELETE FROM pgq._jobs AS j WHERE j.id = new.id RETURNING j.*
    )
    INSERT INTO pgq._outcomes (
        job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, error, payload, headers, depends_on,
        concurrency_key, enqueued_by
    )
    SELECT c.id, c.entrypoint, 'canceled', c.priority, c.attempt, c.deliveries, c.enqueued_at, v_failed,
           c.payload, c.headers, c.depends_on, c.concurrency_key, c.enqueued_by
    FROM canceled AS c;
    PERFORM pgq._cancel_dependents(ARRAY[new.id], format('dependency %s was canceled', new.id));
    RETURN NULL;
END
$$;
