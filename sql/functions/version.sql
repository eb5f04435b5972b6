-- pgq.version(): the release of pgq-sql whose code is installed in this database, e.g.
-- '0.2.0'. `pgq install` / `pgq upgrade` write it from the Python package's version
-- (pgq.__version__), so the two cannot disagree; `pgq doctor` compares them.
-- Takes no arguments, raises nothing.
CREATE OR REPLACE FUNCTION pgq.version()
RETURNS text
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $$
    SELECT '@PGQ_VERSION@'::text
$$;

COMMENT ON FUNCTION pgq.version() IS
'The pgq-sql release installed in this database, e.g. ''0.2.0''.';
