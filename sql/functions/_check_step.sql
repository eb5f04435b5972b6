-- pgq._check_step(worker_id, job_id, delivery, name): the validation shared by
-- pgq.step_result and pgq.record_step. Raises PQ001 for a NULL worker_id, job_id or
-- delivery, a delivery below 1, a NULL or empty name or one over 200 characters; PQ010
-- for a worker registered by another role.
CREATE OR REPLACE FUNCTION pgq._check_step(worker_id uuid, job_id bigint, delivery integer, name text)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF worker_id IS NULL THEN
        PERFORM pgq._invalid('worker_id', 'must not be NULL', 'Pass the id that pgq.register_worker returned.');
    END IF;
    PERFORM pgq._check_worker_role(worker_id);
    IF job_id IS NULL THEN
        PERFORM pgq._invalid('job_id', 'must not be NULL', 'Pass the id of the job this worker runs.');
    END IF;
    IF delivery IS NULL OR delivery < 1 THEN
        PERFORM pgq._invalid('delivery', format('%s is not a delivery', coalesce(delivery::text, 'NULL')),
            'Pass the deliveries value that pgq.claim returned for the job.');
    END IF;
    IF name IS NULL OR name = '' OR char_length(name) > 200 THEN
        PERFORM pgq._invalid('name', 'must be 1 to 200 characters', 'Name each step of a handler, e.g. ''charge''.');
    END IF;
END
$$;
