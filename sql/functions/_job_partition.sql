-- pgq._job_partition(entrypoint): the name of the partition of the job table that pgq.isolate
-- makes for an entrypoint, from a hash of its name (an entrypoint may be 200 characters
-- long, a table name 63 bytes; the table's comment names the entrypoint). sha256, not md5,
-- which a server in FIPS mode refuses; of the bytes in the database's own encoding, which
-- are always there (not every encoding's text converts to UTF-8: a SQL_ASCII database keeps
-- any bytes). Only pgq.isolate names a partition so: the partition is found again by the
-- entrypoint it holds (pgq._partition_of).
CREATE OR REPLACE FUNCTION pgq._job_partition(entrypoint text)
RETURNS text
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
RETURN '_jobs_' || left(encode(sha256(convert_to(entrypoint, getdatabaseencoding())), 'hex'), 16);

COMMENT ON FUNCTION pgq._job_partition(text) IS
'Internal: the name of the partition of the job table that pgq.isolate makes for an entrypoint.';
