-- pgq._batch_callback(batch, callback, event): enqueue one callback of a batch (called by
-- pgq._trg_batch_settle, under the batch's row lock). The job runs callback's entrypoint with
-- its payload plus "batch": {id, event, total, succeeded, dead, canceled}, its priority,
-- headers and max_attempts, as the batch's producer (enqueued_by): the producer may read
-- it, and its handler may read pgq.batch_results while it holds it. It is in no batch.
-- Returns its id; NULL (and nothing enqueued) for a NULL callback.
CREATE OR REPLACE FUNCTION pgq._batch_callback(batch pgq._batches, callback jsonb, event text)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id bigint;
BEGIN
    IF callback IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO pgq._jobs AS j (entrypoint, payload, priority, headers, max_attempts, enqueued_by)
    VALUES (
        callback ->> 'entrypoint',
        coalesce(callback -> 'payload', '{}') || jsonb_build_object('batch', jsonb_build_object(
            'id', batch.id, 'event', event, 'total', batch.total, 'succeeded', batch.succeeded,
            'dead', batch.dead, 'canceled', batch.canceled
        )),
        coalesce((callback ->> 'priority')::integer, 0),
        callback -> 'headers',
        (callback ->> 'max_attempts')::integer,
        batch.created_by
    )
    RETURNING j.id INTO v_id;
    PERFORM pg_catalog.pg_notify('pgq', callback ->> 'entrypoint');
    RETURN v_id;
END
$$;

COMMENT ON FUNCTION pgq._batch_callback(pgq._batches, jsonb, text) IS
'Internal: enqueues one callback job of a batch, its payload carrying the batch''s id and counts.';
