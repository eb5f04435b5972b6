-- 0008: the outcome log keeps a job's concurrency key, so that pgq.job and pgq.outcomes
-- show it once the job has finished (issue 15).
ALTER TABLE pgq._outcomes ADD COLUMN concurrency_key text;
