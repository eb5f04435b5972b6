-- 0004: waiting for a job's end, and one job's whole story after it finished.

-- watched: someone waits for this job's end (pgq.watch); the trigger of
-- pgq._notify_finished notifies channel pgq_finished only for these jobs, so jobs nobody
-- waits for pay nothing but the check of this flag.
ALTER TABLE pgq._jobs ADD COLUMN watched boolean NOT NULL DEFAULT FALSE;

-- A finished job's payload, headers and dependencies, kept in its terminal outcome row for
-- the entrypoint's retention (pgq.job tells its story from them).
ALTER TABLE pgq._outcomes
ADD COLUMN payload jsonb,
ADD COLUMN headers jsonb,
ADD COLUMN depends_on bigint[];
