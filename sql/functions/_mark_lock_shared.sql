-- pgq._mark_lock_shared(entrypoint): take the entrypoint's mark lock in share mode, waiting
-- at most 50 ms for a raise (pgq._raise_mark holds it exclusively until its transaction
-- ends: a claim's, normally over within milliseconds). FALSE when the wait ran out: the
-- raise is in a longer transaction, which no producer should wait for (it records a low
-- instead).
-- Its own function for the lock_timeout clause, and so that only producers that meet a
-- raise pay for the exception block.
CREATE OR REPLACE FUNCTION pgq._mark_lock_shared(entrypoint text)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
SET lock_timeout = '50ms'
AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(pgq._lock_key('mark'), hashtext(_mark_lock_shared.entrypoint));
    RETURN TRUE;
EXCEPTION WHEN lock_not_available THEN
    RETURN FALSE;
END
$$;

COMMENT ON FUNCTION pgq._mark_lock_shared(text) IS
'Internal: take an entrypoint''s claim-mark lock in share mode, waiting at most 50 ms.';
