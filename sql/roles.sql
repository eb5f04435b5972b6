-- The three roles of pgq; roles belong to the cluster, so they survive an uninstall and
-- are shared by every database that installs pgq. Requires CREATEROLE.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'pgq_producer') THEN
        CREATE ROLE pgq_producer NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'pgq_worker') THEN
        CREATE ROLE pgq_worker NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'pgq_admin') THEN
        CREATE ROLE pgq_admin NOLOGIN;
    END IF;
END
$$;
