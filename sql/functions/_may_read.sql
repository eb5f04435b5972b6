-- pgq._may_read(enqueued_by, worker_id): may the caller read this job (its payload, headers,
-- result, errors, even its status)? Its producer may: the login role (session_user) that
-- enqueued it, whatever role it SET since, as a worker id is bound to the role that
-- registered it. So may the worker that holds it now (worker_id: the holder of a running
-- job, NULL otherwise) and members of pgq_admin (and superusers). Anyone else is told
-- nothing: job ids are sequential, so any other answer would let a producer read every
-- job by counting. Jobs queued before the upgrade that added enqueued_by (NULL) are
-- pgq_admin's.
-- Written to be inlined (LANGUAGE sql, STABLE, no SET clause): it runs inside pgq.job,
-- pgq.job_status and pgq.watch, which are SECURITY DEFINER.
-- Returns true or false, never NULL.
CREATE OR REPLACE FUNCTION pgq._may_read(enqueued_by text, worker_id uuid)
RETURNS boolean
LANGUAGE sql
STABLE
AS $$
    SELECT coalesce(_may_read.enqueued_by = session_user, FALSE)
        OR pg_catalog.pg_has_role(session_user, 'pgq_admin', 'USAGE')
        OR EXISTS (
            SELECT 1 FROM pgq._workers AS w
            WHERE w.id = _may_read.worker_id AND w.registered_by = session_user
        )
$$;
