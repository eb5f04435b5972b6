-- 0006: per-key concurrency and fair claims among keys, snooze.

-- key_concurrency: the most running jobs of one concurrency key (NULL: no limit).
-- keyed: a job with a concurrency key was enqueued here once; only such entrypoints take
-- the keyed claim path. key_cursor: the key the last claim ended on (claims rotate from it).
-- max_snoozes: how often one job may snooze (NULL: the default).
ALTER TABLE pgq._queues
ADD COLUMN key_concurrency integer,
ADD COLUMN keyed boolean NOT NULL DEFAULT FALSE,
ADD COLUMN key_cursor text,
ADD COLUMN max_snoozes integer;

-- concurrency_key: the key (tenant, customer) this job counts against; snoozes: how often
-- it was put back by pgq.snooze.
ALTER TABLE pgq._jobs
ADD COLUMN concurrency_key text,
ADD COLUMN snoozes integer NOT NULL DEFAULT 0;

-- Keyed jobs only: jobs without a key (all jobs of entrypoints that use none) pay nothing.
CREATE INDEX _jobs_key_idx ON pgq._jobs (entrypoint, priority DESC, concurrency_key, run_at, id)
WHERE status = 'queued' AND concurrency_key IS NOT NULL;

CREATE INDEX _jobs_key_running_idx ON pgq._jobs (entrypoint, concurrency_key)
WHERE status = 'running' AND concurrency_key IS NOT NULL;

-- A snooze is logged as an outcome of its own.
ALTER TABLE pgq._outcomes DROP CONSTRAINT _outcomes_outcome_check;
ALTER TABLE pgq._outcomes ADD CONSTRAINT _outcomes_outcome_check
CHECK (outcome IN ('succeeded', 'failed', 'dead', 'canceled', 'snoozed'));

-- Signatures that gained trailing parameters or output columns.
DROP FUNCTION IF EXISTS pgq.enqueue(text, jsonb, integer, timestamptz, text, jsonb, integer, bigint[]);
DROP FUNCTION IF EXISTS pgq.enqueue_batch(text, jsonb[], integer, timestamptz);
DROP FUNCTION IF EXISTS pgq.claim(uuid, text[], integer);
DROP FUNCTION IF EXISTS pgq.settings(text[]);
DROP FUNCTION IF EXISTS pgq.configure(
    text, integer, interval, interval, interval, interval, integer, numeric, interval, integer
);
DROP VIEW IF EXISTS pgq.queues;
DROP VIEW IF EXISTS pgq.jobs;
DROP FUNCTION IF EXISTS pgq._defaults();
