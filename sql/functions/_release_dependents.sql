-- pgq._release_dependents(job_ids): these jobs succeeded; their waiting dependents whose
-- dependencies have now all succeeded become queued. The dependents are locked first and
-- checked in a later statement, so that two dependencies completing at once in two
-- transactions cannot both miss the release (the second sees the first's commit).
CREATE OR REPLACE FUNCTION pgq._release_dependents(job_ids bigint[])
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_entrypoints text[];
BEGIN
    PERFORM 1 FROM pgq._jobs AS w
    WHERE w.status = 'waiting' AND w.depends_on && job_ids
    ORDER BY w.id
    FOR NO KEY UPDATE;

    WITH released AS (
        UPDATE pgq._jobs AS w
        SET status = 'queued', run_at = greatest(w.run_at, now())
        WHERE w.status = 'waiting' AND w.depends_on && job_ids
          AND NOT EXISTS (SELECT 1 FROM pgq._jobs AS d WHERE d.id = ANY (w.depends_on))
        RETURNING w.entrypoint
    )
    SELECT array_agg(DISTINCT r.entrypoint) INTO v_entrypoints FROM released AS r;
    PERFORM pg_notify('pgq', e.ep) FROM unnest(v_entrypoints) AS e (ep);
END
$$;
