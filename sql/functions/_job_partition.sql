-- pgq._job_partition(entrypoint): the name of the partition of the job table that pgq.isolate
-- makes for an entrypoint, from a hash of its name (an entrypoint may be 200 characters
-- long, a table name 63 bytes; the table's comment names the entrypoint). sha256, not md5,
-- which a server in FIPS mode refuses; of the UTF-8 bytes, whatever the database encoding.
CREATE OR REPLACE FUNCTION pgq._job_partition(entrypoint text)
RETURNS text
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
RETURN '_jobs_' || left(encode(sha256(convert_to(entrypoint, 'UTF8')), 'hex'), 16);

COMMENT ON FUNCTION pgq._job_partition(text) IS
'Internal: the name of the partition of the job table that pgq.isolate makes for an entrypoint.';
