-- pgq._check_worker_role(worker_id): may the caller act as this worker? A worker id is
-- bound to the login role (session_user) that registered it; members of pgq_admin (and
-- superusers) may act as any worker. Without this, any pgq_worker could read another
-- team's worker id from pgq.workers and complete or fail its jobs.
-- The one place of this check: claim, heartbeat, complete, fail, release and
-- unregister_worker call it first. A NULL or unknown id passes (the caller raises its own
-- error); so does a worker registered before 0.2 (registered_by NULL), so that workers
-- of the previous version keep running through an upgrade.
-- SECURITY DEFINER functions see their owner as current_user: the caller's identity that
-- survives them is the login role, so SET ROLE does not change whose worker it is.
-- Raises PQ010 when the worker was registered by another role.
CREATE OR REPLACE FUNCTION pgq._check_worker_role(worker_id uuid)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_role name;
BEGIN
    SELECT w.registered_by INTO v_role FROM pgq._workers AS w WHERE w.id = _check_worker_role.worker_id;
    IF v_role IS NULL OR v_role = session_user OR pg_catalog.pg_has_role(session_user, 'pgq_admin', 'USAGE') THEN
        RETURN;
    END IF;
    RAISE EXCEPTION 'pgq: worker_id % was registered by role %, not by %', worker_id, v_role, session_user
        USING ERRCODE = 'PQ010',
        HINT = 'A worker acts only under the login role that registered it; register a worker of your own.';
END
$$;
