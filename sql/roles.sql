-- The roles of pgq; roles belong to the cluster, so they survive an uninstall and are
-- shared by every database that installs pgq. Creating them requires CREATEROLE.
-- pgq_owner (NOLOGIN) owns schema pgq and everything in it, so the SECURITY DEFINER
-- functions run as a role that can do nothing but run the queue, whoever installed it.
-- A non-superuser installer is made a member of pgq_owner (to upgrade later) and of
-- pgq_admin (its pg_cron sweeps run as itself).
-- Installs into two databases at once may race to create a role: the loser carries on.
DO $$
DECLARE
    v_role text;
BEGIN
    FOREACH v_role IN ARRAY ARRAY['pgq_owner', 'pgq_producer', 'pgq_worker', 'pgq_admin'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = v_role) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', v_role);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL;
            END;
        END IF;
    END LOOP;
    IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname = current_user) THEN
        FOREACH v_role IN ARRAY ARRAY['pgq_owner', 'pgq_admin'] LOOP
            IF NOT pg_catalog.pg_has_role(current_user, v_role, 'MEMBER') THEN
                EXECUTE format('GRANT %I TO %I', v_role, current_user);
            END IF;
        END LOOP;
    END IF;
END
$$;
