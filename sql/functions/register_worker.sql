-- pgq.register_worker: a worker announces itself before it claims.
-- Parameters: name (free text shown in pgq.workers, e.g. host:pid); entrypoints (what it
--   will claim). Returns the worker id to pass to claim, heartbeat, complete and fail.
-- Also runs the heartbeats' light reap (pgq._reap: bounded per call, in a subtransaction),
-- so a worker restarted after a crash recovers the jobs of its predecessor without waiting
-- for pg_cron, and a registration succeeds whatever maintenance is due, under any
-- statement_timeout: a failing or cancelled reap is a WARNING, never the registration's
-- error (the rest is left to the heartbeats and sweeps). The worker id is bound to the login role
-- (session_user) that registers it: only that role and pgq_admin may act as the worker.
-- Raises PQ001 for invalid arguments.
CREATE OR REPLACE FUNCTION pgq.register_worker(name text, entrypoints text[])
RETURNS uuid
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty), as in
-- pgq.heartbeat, for the reap; JIT off.
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_id uuid;
BEGIN
    IF name IS NULL OR btrim(name) = '' OR length(name) > 200 THEN
        PERFORM pgq._invalid('name', 'must be 1 to 200 characters long',
            'Name the worker, e.g. host:pid.');
    END IF;
    PERFORM pgq._check_entrypoints('entrypoints', entrypoints);
    INSERT INTO pgq._workers AS w (name, entrypoints, registered_by)
    SELECT register_worker.name, array_agg(DISTINCT e.ep ORDER BY e.ep), session_user
    FROM unnest(register_worker.entrypoints) AS e (ep)
    RETURNING w.id INTO v_id;
    BEGIN
        PERFORM pgq._reap(FALSE);
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        RAISE WARNING 'pgq: reap failed: % (%)', sqlerrm, sqlstate;
    END;
    RETURN v_id;
END
$$;

COMMENT ON FUNCTION pgq.register_worker(text, text[]) IS
'Register a worker for some entrypoints; returns its id.';
