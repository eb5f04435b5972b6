-- Least privilege: a job records the login role that enqueued it, so that pgq.job,
-- pgq.job_status and pgq.watch answer only its producer, the worker holding it and
-- pgq_admin.
-- The columns go last with a default: workers and producers of the previous release keep
-- running (their calls go through the functions, which this upgrade replaces in the same
-- transaction). The default is set after the column is added, so that the jobs already
-- queued are not attributed to the role running the upgrade: they stay NULL (pgq_admin's).
ALTER TABLE pgq._jobs ADD COLUMN enqueued_by text;
ALTER TABLE pgq._jobs ALTER COLUMN enqueued_by SET DEFAULT session_user;
ALTER TABLE pgq._outcomes ADD COLUMN enqueued_by text;
