-- The three roles of pgq; roles belong to the cluster, so they survive an uninstall and
-- are shared by every database that installs pgq. Requires CREATEROLE.
-- Installs into two databases at once may race to create a role: the loser carries on.
DO $$
DECLARE
    v_role text;
BEGIN
    FOREACH v_role IN ARRAY ARRAY['pgq_producer', 'pgq_worker', 'pgq_admin'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = v_role) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', v_role);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL;
            END;
        END IF;
    END LOOP;
END
$$;
