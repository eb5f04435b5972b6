-- pgq.retry: dead jobs go back to queued now, with attempt reset to 0. A dead job whose
-- dedupe_key is taken by a newer live job stays dead (retrying it would duplicate work).
-- Other ids are ignored. Returns the number of jobs re-queued. Raises PQ001.
CREATE OR REPLACE FUNCTION pgq.retry(job_ids bigint[])
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_count integer;
    v_entrypoints text[];
BEGIN
    PERFORM pgq._check_ids('job_ids', job_ids);
    WITH retried AS (
        UPDATE pgq._jobs AS j
        SET status = 'queued', attempt = 0, run_at = now()
        WHERE j.id = ANY (job_ids) AND j.status = 'dead'
          AND NOT (j.dedupe_key IS NOT NULL AND EXISTS (
              SELECT 1 FROM pgq._jobs AS o
              WHERE o.entrypoint = j.entrypoint AND o.dedupe_key = j.dedupe_key AND o.status <> 'dead'
          ))
        RETURNING j.entrypoint
    )
    SELECT count(*), array_agg(DISTINCT r.entrypoint) INTO v_count, v_entrypoints FROM retried AS r;
    PERFORM pg_notify('pgq', e.ep) FROM unnest(v_entrypoints) AS e (ep);
    RETURN v_count;
END
$$;

COMMENT ON FUNCTION pgq.retry(bigint[]) IS
'Re-queue dead jobs now with attempts reset; returns how many.';
