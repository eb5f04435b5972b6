-- pgq needs PostgreSQL 14 or newer (README, "Supported PostgreSQL versions"; 14 to 18 are
-- tested). This is the first SQL of every install path: `pgq install` and `pgq upgrade` run
-- it before anything else, and it heads both the schema files and the code files
-- (python/pgq/resources.py), so an install by hand meets it first too. On an older server it
-- raises PQ011 (docs/errors.md) before anything has changed.
DO $$
BEGIN
    IF pg_catalog.current_setting('server_version_num')::integer < 140000 THEN
        RAISE EXCEPTION 'pgq needs PostgreSQL 14 or newer; this server is PostgreSQL %',
        pg_catalog.current_setting('server_version')
        USING
            ERRCODE = 'PQ011',
            HINT = 'Upgrade the server to PostgreSQL 14 to 18 (pg_upgrade, or a dump and '
            'restore), then run pgq install again; nothing was changed.';
    END IF;
END
$$;
