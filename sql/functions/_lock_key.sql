-- pgq._lock_key(name): the first key (pg_locks.classid) of pgq's advisory lock `name`;
-- pgq._lock_id(name) gives the second (pg_locks.objid) of those that have a fixed one. The
-- one place where their numbers are written: SQL takes them through these two functions,
-- Python (pgq.resources.lock_key) reads these lines. Released code holds the same numbers
-- (0.1.0 and 0.2.0 take them as literals, and their workers run through an upgrade): they
-- never change.
--   schema  7366513 ('pgq' in ASCII), 0: a session lock held by every `pgq install`,
--           `pgq upgrade` and `pgq uninstall` (pgq.migrate), so that two of them never
--           interleave. Taken before schema pgq exists: Python reads the numbers here.
--   sweep   7366513, 1: one sweep at a time (pgq._reap, pgq.reap; pgq.sweep through them):
--           a sweep that does not get it at once returns 0.
--   prune   7366513, 2: one prune at a time (pgq.prune); likewise returns 0.
--   mark    7366514, then hashtext(entrypoint): the entrypoint's claim mark
--           (docs/held-snapshot.md). Exclusive to move it up (pgq._raise_mark, from a
--           claim), shared to move it down (pgq._lower_mark, pgq._mark_lock_shared, from
--           the triggers of producers).
-- Parameters: name, one of the above. Returns the key. An unknown name raises (22P02, an
-- integer that does not parse) when the calling statement is planned.
-- Immutable LANGUAGE sql without settings: inlined into the calling statement and folded to
-- a constant when it is planned (a claim's plan is cached), so naming a lock costs nothing.
CREATE OR REPLACE FUNCTION pgq._lock_key(name text)
RETURNS integer
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $$
SELECT CASE name
    WHEN 'schema' THEN 7366513
    WHEN 'sweep' THEN 7366513
    WHEN 'prune' THEN 7366513
    WHEN 'mark' THEN 7366514
    ELSE ('pgq: no advisory lock named ' || name)::integer
END
$$;
