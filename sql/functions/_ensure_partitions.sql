-- pgq._ensure_partitions(): the outcome log has one partition per UTC day; create today's
-- and the next three days' if missing (pgq.prune calls this hourly, install once). Rows
-- that landed in the default partition for such a day (when the sweeps did not run) are
-- moved into the new partition, under a lock that holds off inserts into the default one.
-- Returns the number of partitions created.
CREATE OR REPLACE FUNCTION pgq._ensure_partitions()
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
-- It reads whole partitions of the outcome log: sequential scans are right here, also when
-- pgq.sweep (which turns them off for pgq._jobs) calls it.
SET enable_seqscan = on
AS $$
DECLARE
    v_day date;
    v_name text;
    v_from timestamptz;
    v_to timestamptz;
    v_created integer := 0;
BEGIN
    FOR v_day IN
        SELECT (now() AT TIME ZONE 'UTC')::date + d
        FROM generate_series(0, 3) AS d
    LOOP
        v_name := '_outcomes_' || to_char(v_day, 'YYYYMMDD');
        CONTINUE WHEN to_regclass(format('pgq.%I', v_name)) IS NOT NULL;
        v_from := v_day::timestamp AT TIME ZONE 'UTC';
        v_to := (v_day + 1)::timestamp AT TIME ZONE 'UTC';
        LOCK TABLE pgq._outcomes_default IN SHARE ROW EXCLUSIVE MODE;
        IF EXISTS (
            SELECT 1 FROM pgq._outcomes_default AS o WHERE o.finished_at >= v_from AND o.finished_at < v_to
        ) THEN
            EXECUTE format(
                'CREATE TABLE pgq.%I (LIKE pgq._outcomes INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', v_name
            );
            EXECUTE format(
                'WITH moved AS (DELETE FROM pgq._outcomes_default AS o'
                ' WHERE o.finished_at >= $1 AND o.finished_at < $2 RETURNING o.*)'
                ' INSERT INTO pgq.%I SELECT * FROM moved', v_name
            ) USING v_from, v_to;
            PERFORM pgq._index_outcomes(format('pgq.%I', v_name)::regclass);
            EXECUTE format(
                'ALTER TABLE pgq._outcomes ATTACH PARTITION pgq.%I FOR VALUES FROM (%L) TO (%L)',
                v_name, v_from, v_to
            );
        ELSE
            EXECUTE format(
                'CREATE TABLE pgq.%I PARTITION OF pgq._outcomes FOR VALUES FROM (%L) TO (%L)',
                v_name, v_from, v_to
            );
            PERFORM pgq._index_outcomes(format('pgq.%I', v_name)::regclass);
        END IF;
        v_created := v_created + 1;
    END LOOP;
    RETURN v_created;
END
$$;
