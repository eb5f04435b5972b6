-- Run after the functions on every install and upgrade: state the functions maintain.
SELECT pgq._ensure_partitions();

-- New waiting jobs are checked again when their producer commits (see pgq._check_waiting).
-- Created once: re-creating it would lock the job table against every worker.
DO $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_trigger AS t
        WHERE t.tgrelid = 'pgq._jobs'::regclass AND t.tgname = '_jobs_check_waiting'
    ) THEN
        CREATE CONSTRAINT TRIGGER _jobs_check_waiting AFTER INSERT ON pgq._jobs
        DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW WHEN (new.status = 'waiting')
        EXECUTE FUNCTION pgq._check_waiting();
    END IF;
END
$$;
