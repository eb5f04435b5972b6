-- pgq._bypass_free(entrypoint): whether no producer holds the entrypoint's bypass lock (see
-- pgq._lower_mark, pgq._raise_mark). Takes it exclusively and releases it in one
-- expression: a session-level lock, so nothing is left held even if the caller's
-- transaction goes on for long, and no interrupt can come between the two calls.
CREATE OR REPLACE FUNCTION pgq._bypass_free(entrypoint text)
RETURNS boolean
LANGUAGE sql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN pg_try_advisory_lock(7366515, hashtext(entrypoint))
                THEN pg_advisory_unlock(7366515, hashtext(entrypoint))
                ELSE FALSE END
$$;

COMMENT ON FUNCTION pgq._bypass_free(text) IS
'Internal: whether no producer of an entrypoint is on the claim-mark bypass.';
