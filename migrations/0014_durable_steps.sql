-- Durable steps (issue 32): the results of the steps a job completed, read and recorded by
-- pgq.step_result and pgq.record_step (sql/functions), shown by pgq.job, pruned with the
-- job's outcome. A new table only: workers of the previous release never read it.
CREATE TABLE pgq._steps (
    job_id bigint NOT NULL,
    name text NOT NULL,
    result jsonb,
    delivery integer NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT _steps_pkey PRIMARY KEY (job_id, name)
);
