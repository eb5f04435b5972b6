-- pgq._timed_out(): the running jobs past their entrypoint's timeout plus lease, locked
-- (SKIP LOCKED: a job being settled right now is left to its settler), with that timeout.
-- Reads _jobs_started_idx from its start to now() - the shortest timeout plus lease, so
-- that a held snapshot's dead entries of jobs claimed since are not visited. Sorting is
-- turned off for it: the planner, which counts few running jobs, would otherwise take a
-- full walk of the running index and a sort as just as cheap. PL/pgSQL, so that its plan is
-- made once per session: an SQL function with settings is planned on every call, which was
-- half of the CPU of every heartbeat (its sweep calls this).
CREATE OR REPLACE FUNCTION pgq._timed_out()
RETURNS TABLE (id bigint, timeout interval)
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_sort = off
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH shortest AS (
        SELECT least(d.timeout + d.lease, min(coalesce(q.timeout, d.timeout) + coalesce(q.lease, d.lease))) AS span
        FROM pgq._default_settings AS d
        LEFT JOIN pgq._queues AS q ON TRUE
        GROUP BY d.timeout, d.lease
    )
    SELECT j.id, coalesce(q.timeout, d.timeout)
    FROM pgq._jobs AS j
    CROSS JOIN pgq._default_settings AS d
    LEFT JOIN pgq._queues AS q ON q.entrypoint = j.entrypoint
    WHERE j.status = 'running'
      AND j.started_at < now() - (SELECT s.span FROM shortest AS s)
      AND j.started_at < now() - coalesce(q.timeout, d.timeout) - coalesce(q.lease, d.lease)
    ORDER BY j.started_at
    FOR UPDATE OF j SKIP LOCKED;
END
$$;
