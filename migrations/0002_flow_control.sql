-- 0002: rate limits, job dependencies, periodic schedules, outcome retention.

-- Token bucket of an entrypoint with a rate limit (see pgq.claim).
ALTER TABLE pgq._queues
ADD COLUMN rate_tokens double precision,
ADD COLUMN rate_refilled_at timestamptz;

-- depends_on: the live jobs this one waits for (status 'waiting' until they all succeed).
-- has_dependents: some waiting job depends on this one, so its end must be propagated;
-- completion looks for dependents only when it is set, so jobs without any pay nothing.
ALTER TABLE pgq._jobs
ADD COLUMN depends_on bigint[],
ADD COLUMN has_dependents boolean NOT NULL DEFAULT FALSE;

CREATE INDEX _jobs_waiting_idx ON pgq._jobs USING gin (depends_on) WHERE status = 'waiting';

-- fatal: this failure left the job dead (pgq.stats counts them).
ALTER TABLE pgq._outcomes ADD COLUMN fatal boolean NOT NULL DEFAULT FALSE;

-- Periodic jobs. next_run is kept up to date so that a sweep finds due schedules with an
-- index lookup.
CREATE TABLE pgq._schedules (
    name text PRIMARY KEY,
    cron text NOT NULL,
    entrypoint text NOT NULL,
    payload jsonb,
    last_run timestamptz,
    next_run timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX _schedules_next_run_idx ON pgq._schedules (next_run);

-- When each periodic maintenance task last ran (the workers' fallback sweep is throttled
-- by it when pg_cron is absent).
CREATE TABLE pgq._maintenance (
    task text PRIMARY KEY,
    last_run timestamptz NOT NULL
);

-- enqueue gained a trailing parameter: the old signature goes.
DROP FUNCTION IF EXISTS pgq.enqueue(text, jsonb, integer, timestamptz, text, jsonb, integer);
