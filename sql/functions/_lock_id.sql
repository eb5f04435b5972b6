-- pgq._lock_id(name): the second key (pg_locks.objid) of pgq's advisory lock `name`, for the
-- locks that have a fixed one (pgq._lock_key says what each lock guards and who takes it):
--   schema  0
--   sweep   1
--   prune   2
-- The mark lock's second key is hashtext(entrypoint): it has none here.
-- Parameters: name. Returns the key. An unknown name (or 'mark') raises (22P02) when the
-- calling statement is planned. Inlined and folded like pgq._lock_key.
CREATE OR REPLACE FUNCTION pgq._lock_id(name text)
RETURNS integer
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $$
SELECT CASE name
    WHEN 'schema' THEN 0
    WHEN 'sweep' THEN 1
    WHEN 'prune' THEN 2
    ELSE ('pgq: no advisory lock with a fixed second key named ' || name)::integer
END
$$;
