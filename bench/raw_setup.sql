-- The raw limit: pgq's hot table and outcome log as plain tables, with the indexes every
-- claim and completion writes or reads in pgq (the claim index, the running jobs by worker
-- and by start, the outcome log's BRIN indexes) and the same data kept (a finished job's
-- payload and headers stay in its outcome row), but no PL/pgSQL, checks, triggers, workers
-- table or partitions (pgq's outcome log is partitioned by day) in the way.
-- `pgq bench` creates these in a fresh database, then fills raw_jobs with N rows.
CREATE TABLE raw_jobs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    entrypoint text NOT NULL,
    status text NOT NULL DEFAULT 'queued',
    priority integer NOT NULL DEFAULT 0,
    run_at timestamptz NOT NULL DEFAULT now(),
    payload jsonb,
    headers jsonb,
    attempt integer NOT NULL DEFAULT 0,
    deliveries integer NOT NULL DEFAULT 0,
    enqueued_at timestamptz NOT NULL DEFAULT now(),
    worker_id uuid,
    started_at timestamptz
) WITH (fillfactor = 70);

CREATE INDEX raw_jobs_claim_idx ON raw_jobs (entrypoint, priority DESC, run_at, id)
WHERE status = 'queued';

CREATE INDEX raw_jobs_running_idx ON raw_jobs (entrypoint, worker_id) WHERE status = 'running';

CREATE INDEX raw_jobs_started_idx ON raw_jobs (started_at) WHERE status = 'running';

CREATE TABLE raw_outcomes (
    job_id bigint NOT NULL,
    entrypoint text NOT NULL,
    outcome text NOT NULL,
    priority integer NOT NULL,
    attempt integer NOT NULL,
    deliveries integer NOT NULL,
    enqueued_at timestamptz NOT NULL,
    started_at timestamptz,
    finished_at timestamptz NOT NULL DEFAULT now(),
    worker_id uuid,
    payload jsonb,
    headers jsonb
);

CREATE INDEX raw_outcomes_finished_idx ON raw_outcomes USING brin (finished_at);

CREATE INDEX raw_outcomes_job_idx ON raw_outcomes USING brin (job_id) WITH (pages_per_range = 16);
