-- 0003: per-delivery fencing, the poison-pill cap, held-job reconciliation, leases that
-- change without reaping live workers, dependencies that never lock their parents.

-- max_deliveries: a job whose worker was lost this many times goes dead (NULL: the
-- default, 0: no cap).
ALTER TABLE pgq._queues ADD COLUMN max_deliveries integer;

-- lost: how many deliveries of this job ended with its worker lost (reaped); reset by retry.
ALTER TABLE pgq._jobs ADD COLUMN lost integer NOT NULL DEFAULT 0;

-- Dependents are found through the waiting index now: the flag made enqueue lock its
-- dependencies until the producer committed.
ALTER TABLE pgq._jobs DROP COLUMN has_dependents;

-- Dead jobs by entrypoint: listing and counting them (pgq.retry of all dead jobs, the
-- dashboard) without a scan of the hot table; only dead rows are in it.
CREATE INDEX _jobs_dead_idx ON pgq._jobs (entrypoint, id) WHERE status = 'dead';

-- lease: the lease in force at the worker's last heartbeat; it paces its beats by it, so
-- a shorter lease applies to the worker only from its next beat on.
ALTER TABLE pgq._workers ADD COLUMN lease interval;

-- Signatures that gained trailing parameters or output columns: the old ones go, and the
-- views that read pgq._defaults() are re-created with the code.
DROP FUNCTION IF EXISTS pgq.complete(uuid, bigint[], jsonb[]);
DROP FUNCTION IF EXISTS pgq.fail(uuid, bigint, text, interval);
DROP FUNCTION IF EXISTS pgq.heartbeat(uuid);
DROP FUNCTION IF EXISTS pgq._release(uuid[], bigint[]);
DROP FUNCTION IF EXISTS pgq._sweep();
DROP FUNCTION IF EXISTS pgq.settings(text[]);
DROP FUNCTION IF EXISTS pgq.configure(text, integer, interval, interval, interval, interval, integer, numeric, interval);
DROP VIEW IF EXISTS pgq.queues;
DROP VIEW IF EXISTS pgq.jobs;
DROP FUNCTION IF EXISTS pgq._defaults();
