-- Least privilege: a job records the login role that enqueued it, so that pgq.job,
-- pgq.job_status and pgq.watch answer only its producer, the worker holding it and
-- pgq_admin; and an install records the prefix of its own roles (`pgq install --roles`).
-- The columns go last with a default: workers and producers of the previous release keep
-- running (their calls go through the functions, which this upgrade replaces in the same
-- transaction). The default is set after the column is added, so that the jobs already
-- queued are not attributed to the role running the upgrade: they stay NULL (pgq_admin's).
ALTER TABLE pgq._jobs ADD COLUMN enqueued_by text;
ALTER TABLE pgq._jobs ALTER COLUMN enqueued_by SET DEFAULT session_user;
ALTER TABLE pgq._outcomes ADD COLUMN enqueued_by text;

-- An install before this migration used the fixed role names: prefix 'pgq_'.
CREATE TABLE pgq._install (
    id boolean PRIMARY KEY DEFAULT TRUE CONSTRAINT _install_one_row CHECK (id),
    role_prefix text NOT NULL DEFAULT 'pgq_'
);
INSERT INTO pgq._install DEFAULT VALUES;
