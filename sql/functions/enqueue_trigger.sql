-- pgq.enqueue_trigger(): trigger function. Enqueues the changed row as the payload:
--   CREATE TRIGGER t AFTER INSERT OR UPDATE OR DELETE ON orders
--       FOR EACH ROW EXECUTE FUNCTION pgq.enqueue_trigger('process_order');
-- Argument 1 (required): the entrypoint. Argument 2 (optional): the priority.
-- Argument 3 (optional): the column of the row whose value is the job's concurrency key
--   (e.g. 'customer_id'; a NULL value: no key); see pgq.enqueue.
-- Argument 4 (optional): the column whose value is the job's dedupe key (a NULL value: no
--   key). Arguments 5, 6, 7 (optional): dedupe_scope, dedupe_mode, dedupe_window (e.g.
--   '5 minutes'), used for rows with a dedupe key; see pgq.enqueue_job. An empty argument
--   (from 3 on) means none, e.g. pgq.enqueue_trigger('index_doc', '0', '', 'id', 'queued',
--   'replace'): at most one job per row waits, carrying the row's latest version.
-- Payload: NEW (OLD on DELETE) as JSON; headers: {"table", "schema", "op"}.
-- The job commits or rolls back with the row change. The trigger runs as the role that
-- changed the row (SECURITY INVOKER: turning the row into JSON may call casts that the
-- table's owner defined), so roles that write to the table need pgq_producer.
CREATE OR REPLACE FUNCTION pgq.enqueue_trigger()
RETURNS trigger
LANGUAGE plpgsql
VOLATILE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_row jsonb;
    v_key text;
    v_dedupe_key text;
    v_window interval;
BEGIN
    -- Raised here, not through pgq._invalid: this function runs as the writer, who may not
    -- execute pgq's internal helpers.
    IF TG_LEVEL <> 'ROW' OR TG_NARGS < 1 THEN
        RAISE EXCEPTION 'pgq: invalid argument trigger arguments: needs FOR EACH ROW and an entrypoint'
            USING ERRCODE = 'PQ001',
            HINT = 'CREATE TRIGGER ... FOR EACH ROW EXECUTE FUNCTION pgq.enqueue_trigger(''entrypoint'').';
    END IF;
    IF TG_NARGS > 1 AND TG_ARGV[1] !~ '^-?[0-9]{1,9}$' THEN
        RAISE EXCEPTION 'pgq: invalid argument trigger argument 2 (priority): % is not an integer', TG_ARGV[1]
            USING ERRCODE = 'PQ001',
            HINT = 'Pass the priority as an integer, e.g. pgq.enqueue_trigger(''entrypoint'', ''10'').';
    END IF;
    IF TG_OP = 'DELETE' THEN
        v_row := to_jsonb(OLD);
    ELSE
        v_row := to_jsonb(NEW);
    END IF;
    IF TG_NARGS > 2 AND TG_ARGV[2] <> '' THEN
        IF NOT v_row ? TG_ARGV[2] THEN
            RAISE EXCEPTION 'pgq: invalid argument trigger argument 3 (concurrency key column): % has no column %',
                TG_TABLE_NAME, TG_ARGV[2]
                USING ERRCODE = 'PQ001',
                HINT = 'Name the column whose value is the concurrency key, e.g. ''customer_id''.';
        END IF;
        v_key := v_row ->> TG_ARGV[2];
    END IF;
    IF TG_NARGS > 3 AND TG_ARGV[3] <> '' THEN
        IF NOT v_row ? TG_ARGV[3] THEN
            RAISE EXCEPTION 'pgq: invalid argument trigger argument 4 (dedupe key column): % has no column %',
                TG_TABLE_NAME, TG_ARGV[3]
                USING ERRCODE = 'PQ001',
                HINT = 'Name the column whose value is the dedupe key, e.g. ''id''.';
        END IF;
        v_dedupe_key := v_row ->> TG_ARGV[3];
    END IF;
    IF TG_NARGS > 6 AND TG_ARGV[6] <> '' THEN
        BEGIN
            v_window := TG_ARGV[6]::interval;
        EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow OR interval_field_overflow THEN
            RAISE EXCEPTION 'pgq: invalid argument trigger argument 7 (dedupe window): % is not an interval',
                TG_ARGV[6]
                USING ERRCODE = 'PQ001',
                HINT = 'Pass an interval, e.g. ''5 minutes''.';
        END;
    END IF;
    PERFORM pgq.enqueue(
        entrypoint => TG_ARGV[0],
        payload => v_row,
        priority => coalesce(TG_ARGV[1]::integer, 0),
        headers => jsonb_build_object('table', TG_TABLE_NAME, 'schema', TG_TABLE_SCHEMA, 'op', TG_OP),
        concurrency_key => v_key,
        dedupe_key => v_dedupe_key,
        -- Rows without a dedupe key are plain jobs.
        dedupe_scope => CASE WHEN v_dedupe_key IS NOT NULL THEN nullif(TG_ARGV[4], '') END,
        dedupe_mode => CASE WHEN v_dedupe_key IS NOT NULL THEN nullif(TG_ARGV[5], '') END,
        dedupe_window => CASE WHEN v_dedupe_key IS NOT NULL THEN v_window END
    );
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END
$$;

COMMENT ON FUNCTION pgq.enqueue_trigger() IS
'Row trigger: enqueues NEW (OLD on DELETE) to the entrypoint named by the first trigger argument.';
