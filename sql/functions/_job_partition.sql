-- pgq._job_partition(entrypoint): the name of the partition of the job table that pgq.isolate
-- makes for an entrypoint, from a hash of its name (an entrypoint may be 200 characters
-- long, a table name 63 bytes; the table's comment names the entrypoint).
CREATE OR REPLACE FUNCTION pgq._job_partition(entrypoint text)
RETURNS text
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
RETURN '_jobs_' || left(md5(entrypoint), 16);

COMMENT ON FUNCTION pgq._job_partition(text) IS
'Internal: the name of the partition of the job table that pgq.isolate makes for an entrypoint.';
