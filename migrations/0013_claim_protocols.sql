-- 0013: pgq.claim(worker_id, entrypoints, batch_size) returns the row of 0.1.0 again, as
-- its workers expect (they build a job from every column: concurrency_key, added in 0006,
-- stopped them at their first claim after an upgrade). Its result type changes, so it is
-- dropped here and created anew from sql/functions/claim.sql, next to the form that returns
-- the 0.2.0 row: pgq.claim(worker_id, entrypoints, batch_size, protocol => 2). The upgrade
-- is one transaction: no call finds the function missing.
DROP FUNCTION IF EXISTS pgq.claim(uuid, text[], integer);
-- pgq.settings(entrypoints) likewise returns the columns of 0.1.0 again (0003 and 0006 added
-- three); pgq.settings(entrypoints, protocol => 2) returns all of them.
DROP FUNCTION IF EXISTS pgq.settings(text[]);

-- has_dependents, dropped by 0003, comes back for the calls of 0.1.0's functions that are
-- under way while the upgrade commits: they waited for its locks, and then run their 0.1.0
-- bodies against the new tables. complete, fail, enqueue and the release of a worker's jobs
-- read or set this column: without it, such a completion failed ("column j.has_dependents
-- does not exist"), and a 0.1.0 worker's completions stopped for good, its jobs held by its
-- heartbeats. TRUE: such a body always looks for dependents (finds none, or the right ones).
-- Nothing of this release reads it.
ALTER TABLE pgq._jobs ADD COLUMN has_dependents boolean NOT NULL DEFAULT TRUE;
