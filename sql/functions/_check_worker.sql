-- pgq._check_worker(worker_id): the registered entrypoints of a live worker. Raises PQ002
-- for an id that was never registered and PQ003 for a worker that stopped or was reaped as
-- dead (it must register again: its jobs may already be re-delivered to another worker).
CREATE OR REPLACE FUNCTION pgq._check_worker(worker_id uuid)
RETURNS text[]
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_state text;
    v_entrypoints text[];
BEGIN
    IF worker_id IS NULL THEN
        PERFORM pgq._invalid('worker_id', 'must not be NULL', 'Pass the id that pgq.register_worker returned.');
    END IF;
    SELECT w.state, w.entrypoints INTO v_state, v_entrypoints
    FROM pgq._workers AS w
    WHERE w.id = _check_worker.worker_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgq: unknown worker_id %', worker_id
            USING ERRCODE = 'PQ002', HINT = 'Register the worker first with pgq.register_worker().';
    ELSIF v_state <> 'alive' THEN
        RAISE EXCEPTION 'pgq: worker_id % is % and holds no jobs', worker_id, v_state
            USING ERRCODE = 'PQ003',
            HINT = 'Its jobs may have been re-delivered; register again with pgq.register_worker().';
    END IF;
    RETURN v_entrypoints;
END
$$;
