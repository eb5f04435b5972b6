-- Durable steps and progress (issue 32): the results of the steps a job completed, read and recorded by
-- pgq.step_result and pgq.record_step (sql/functions), shown by pgq.job, pruned with the
-- job's outcome; and the last progress a job's handler reported (pgq.progress). New tables
-- only: workers of the previous release never read them.
CREATE TABLE pgq._steps (
    job_id bigint NOT NULL,
    name text NOT NULL,
    result jsonb,
    delivery integer NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT _steps_pkey PRIMARY KEY (job_id, name)
);

CREATE TABLE pgq._progress (
    job_id bigint PRIMARY KEY,
    value numeric NOT NULL,
    note text,
    delivery integer NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
