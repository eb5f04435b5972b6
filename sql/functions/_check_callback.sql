-- pgq._check_callback(argument, callback): a batch's callback as pgq.batch takes it, checked
-- and put in its stored form. A JSON string is the entrypoint alone; an object has
-- "entrypoint" (required) and optionally "payload" (an object or null: the callback's
-- payload, to which the batch's figures are added under "batch"), "priority" (an integer),
-- "headers" (an object) and "max_attempts" (1 to 1000), as pgq.enqueue takes them.
-- Returns the object (NULL for NULL). Raises PQ001 naming the argument and the key, PQ004
-- for an oversized payload or headers.
CREATE OR REPLACE FUNCTION pgq._check_callback(argument text, callback jsonb)
RETURNS jsonb
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_extra text;
BEGIN
    IF callback IS NULL OR jsonb_typeof(callback) = 'null' THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(callback) = 'string' THEN
        callback := jsonb_build_object('entrypoint', callback);
    ELSIF jsonb_typeof(callback) <> 'object' THEN
        PERFORM pgq._invalid(argument, format('must be a JSON object or string, not %s', jsonb_typeof(callback)),
            'Pass e.g. ''{"entrypoint": "report", "payload": {"to": "ops"}}'', or ''"report"'', or NULL.');
    END IF;
    SELECT k INTO v_extra
    FROM jsonb_object_keys(callback) AS k
    WHERE k NOT IN ('entrypoint', 'payload', 'priority', 'headers', 'max_attempts')
    ORDER BY k
    LIMIT 1;
    IF v_extra IS NOT NULL THEN
        PERFORM pgq._invalid(argument, format('has the unknown key %s', v_extra),
            'A callback has entrypoint, payload, priority, headers and max_attempts.');
    END IF;
    IF jsonb_typeof(callback -> 'entrypoint') IS DISTINCT FROM 'string' THEN
        PERFORM pgq._invalid(argument || '.entrypoint', 'must be a string',
            'Name the entrypoint the callback job runs, e.g. {"entrypoint": "report"}.');
    END IF;
    PERFORM pgq._check_entrypoint(argument || '.entrypoint', callback ->> 'entrypoint');
    IF coalesce(jsonb_typeof(callback -> 'payload'), 'null') NOT IN ('object', 'null') THEN
        PERFORM pgq._invalid(argument || '.payload', format('must be a JSON object, not %s', jsonb_typeof(callback -> 'payload')),
            'The batch''s figures are added to it under "batch": pass an object, or leave it out.');
    END IF;
    IF pg_column_size(callback -> 'payload') > 1048576 THEN
        RAISE EXCEPTION 'pgq: %.payload is over the 1 MiB limit', argument
            USING ERRCODE = 'PQ004', HINT = 'Store large data in a table and put its key in the payload.';
    END IF;
    IF coalesce(jsonb_typeof(callback -> 'priority'), 'null') NOT IN ('number', 'null')
       OR (callback ->> 'priority')::numeric NOT BETWEEN -2147483648 AND 2147483647
       OR (callback ->> 'priority')::numeric <> trunc((callback ->> 'priority')::numeric) THEN
        PERFORM pgq._invalid(argument || '.priority', 'must be an integer',
            'Pass a priority as pgq.enqueue takes it, or leave it out (0).');
    END IF;
    IF coalesce(jsonb_typeof(callback -> 'max_attempts'), 'null') NOT IN ('number', 'null')
       OR (callback ->> 'max_attempts')::numeric NOT BETWEEN 1 AND 1000
       OR (callback ->> 'max_attempts')::numeric <> trunc((callback ->> 'max_attempts')::numeric) THEN
        PERFORM pgq._invalid(argument || '.max_attempts', 'must be an integer from 1 to 1000',
            'Leave it out for the entrypoint''s setting.');
    END IF;
    IF coalesce(jsonb_typeof(callback -> 'headers'), 'null') NOT IN ('object', 'null') THEN
        PERFORM pgq._invalid(argument || '.headers', 'must be a JSON object',
            'Pass e.g. {"trace_id": "abc"}, or leave it out.');
    END IF;
    IF pg_column_size(callback -> 'headers') > 65536 THEN
        RAISE EXCEPTION 'pgq: %.headers are over the 64 KiB limit', argument
            USING ERRCODE = 'PQ004', HINT = 'Headers are for small metadata; use the payload.';
    END IF;
    RETURN jsonb_strip_nulls(callback);
END
$$;
