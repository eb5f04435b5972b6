-- pgq._partition_of(entrypoint): the name of the partition of pgq._jobs that holds this
-- entrypoint's jobs alone (the one pgq.isolate made), or NULL when they are in the default
-- partition. Found by the partition's bound, not by the name pgq._job_partition gives: that
-- name is a 64-bit hash, which two entrypoints may share, and earlier builds of 0.3 named
-- partitions otherwise.
CREATE OR REPLACE FUNCTION pgq._partition_of(entrypoint text)
RETURNS text
LANGUAGE plpgsql
STABLE
-- The bound's text quotes the entrypoint as a standard string: its quotes doubled, nothing
-- else escaped.
SET standard_conforming_strings = on
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (
        SELECT c.relname::text
        FROM pg_catalog.pg_inherits AS i
        JOIN pg_catalog.pg_class AS c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'pgq._jobs'::regclass
          -- Relation 0: a list bound holds constants only, and naming the partition
          -- would lock it (a call before pgq.isolate's lock must wait for no one).
          AND pg_catalog.pg_get_expr(c.relpartbound, 0)
              = 'FOR VALUES IN (''' || replace(_partition_of.entrypoint, '''', '''''') || ''')'
    );
END
$$;

COMMENT ON FUNCTION pgq._partition_of(text) IS
'Internal: the partition of the job table that holds an entrypoint''s jobs alone (pgq.isolate), or NULL.';
