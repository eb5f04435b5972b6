-- Run after the functions on every install and upgrade: state the functions maintain.
SELECT pgq._ensure_partitions();
-- Forget the claim marks (pgq._raise_mark): whatever happened to the jobs while the
-- triggers below were missing or disabled (an upgrade, a restore), claims walk from the
-- front until their next raise.
DELETE FROM pgq._marks;

-- The triggers of the job table, created once each: re-creating one would lock the table
-- against every worker (and CREATE OR REPLACE TRIGGER needs PostgreSQL 14).
DO $$
BEGIN
    -- New waiting jobs are checked again when their producer commits (pgq._trg_check_waiting).
    IF NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_trigger AS t
        WHERE t.tgrelid = 'pgq._jobs'::regclass AND t.tgname = '_jobs_check_waiting'
    ) THEN
        CREATE CONSTRAINT TRIGGER _jobs_check_waiting AFTER INSERT ON pgq._jobs
        DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW WHEN (new.status = 'waiting')
        EXECUTE FUNCTION pgq._trg_check_waiting();
    END IF;
    -- A watched job's end is notified (pgq.watch, pgq._trg_notify_finished).
    IF NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_trigger AS t
        WHERE t.tgrelid = 'pgq._jobs'::regclass AND t.tgname = '_jobs_finished_trg'
    ) THEN
        CREATE TRIGGER _jobs_finished_trg AFTER DELETE ON pgq._jobs
        FOR EACH ROW WHEN (old.watched)
        EXECUTE FUNCTION pgq._trg_notify_finished();
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_trigger AS t
        WHERE t.tgrelid = 'pgq._jobs'::regclass AND t.tgname = '_jobs_dead_trg'
    ) THEN
        CREATE TRIGGER _jobs_dead_trg AFTER UPDATE OF status ON pgq._jobs
        FOR EACH ROW WHEN (new.watched AND new.status = 'dead' AND old.status <> 'dead')
        EXECUTE FUNCTION pgq._trg_notify_finished();
    END IF;
    -- Jobs that become queued keep the claim marks below them (pgq._lower_mark).
    IF NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_trigger AS t
        WHERE t.tgrelid = 'pgq._jobs'::regclass AND t.tgname = '_jobs_marks_insert_trg'
    ) THEN
        CREATE TRIGGER _jobs_marks_insert_trg AFTER INSERT ON pgq._jobs
        REFERENCING NEW TABLE AS new_jobs
        FOR EACH STATEMENT
        EXECUTE FUNCTION pgq._trg_marks_inserted();
        -- Also with session_replication_role = replica (replication, some bulk loaders).
        ALTER TABLE pgq._jobs ENABLE ALWAYS TRIGGER _jobs_marks_insert_trg;
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_trigger AS t
        WHERE t.tgrelid = 'pgq._jobs'::regclass AND t.tgname = '_jobs_marks_update_trg'
    ) THEN
        CREATE TRIGGER _jobs_marks_update_trg AFTER UPDATE ON pgq._jobs
        FOR EACH ROW WHEN (
            new.status = 'queued'
            AND (
                old.status <> 'queued' OR new.priority > old.priority OR new.run_at < old.run_at
                OR new.entrypoint <> old.entrypoint
            )
        )
        EXECUTE FUNCTION pgq._trg_marks_updated();
        ALTER TABLE pgq._jobs ENABLE ALWAYS TRIGGER _jobs_marks_update_trg;
    END IF;
    -- A batch member's end (or return from dead) is counted at commit (pgq._trg_batch_member_ended,
    -- pgq._trg_batch_settle). Jobs in no batch fail the WHEN clause and call nothing.
    IF NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_trigger AS t
        WHERE t.tgrelid = 'pgq._jobs'::regclass AND t.tgname = '_jobs_batch_end_trg'
    ) THEN
        CREATE TRIGGER _jobs_batch_end_trg AFTER DELETE ON pgq._jobs
        FOR EACH ROW WHEN (old.batch_id IS NOT NULL)
        EXECUTE FUNCTION pgq._trg_batch_member_ended();
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_trigger AS t
        WHERE t.tgrelid = 'pgq._jobs'::regclass AND t.tgname = '_jobs_batch_dead_trg'
    ) THEN
        CREATE TRIGGER _jobs_batch_dead_trg AFTER UPDATE OF status ON pgq._jobs
        FOR EACH ROW WHEN (new.batch_id IS NOT NULL AND (old.status = 'dead') <> (new.status = 'dead'))
        EXECUTE FUNCTION pgq._trg_batch_member_ended();
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_trigger AS t
        WHERE t.tgrelid = 'pgq._batch_members'::regclass AND t.tgname = '_batch_members_settle_trg'
    ) THEN
        CREATE CONSTRAINT TRIGGER _batch_members_settle_trg AFTER INSERT OR UPDATE OF ended_xact
        ON pgq._batch_members
        DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW WHEN (new.ended_xact IS NOT NULL)
        EXECUTE FUNCTION pgq._trg_batch_settle();
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_trigger AS t
        WHERE t.tgrelid = 'pgq._batches'::regclass AND t.tgname = '_batches_settle_trg'
    ) THEN
        CREATE CONSTRAINT TRIGGER _batches_settle_trg AFTER INSERT ON pgq._batches
        DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW
        EXECUTE FUNCTION pgq._trg_batch_settle();
    END IF;
    -- Outcomes are counted for monitoring (pgq._trg_count_outcomes, pgq.outcome_totals).
    IF NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_trigger AS t
        WHERE t.tgrelid = 'pgq._outcomes'::regclass AND t.tgname = '_outcomes_count_trg'
    ) THEN
        CREATE TRIGGER _outcomes_count_trg AFTER INSERT ON pgq._outcomes
        REFERENCING NEW TABLE AS new_outcomes
        FOR EACH STATEMENT
        EXECUTE FUNCTION pgq._trg_count_outcomes();
        ALTER TABLE pgq._outcomes ENABLE ALWAYS TRIGGER _outcomes_count_trg;
    END IF;
END
$$;
-- Their comments are written on every install and upgrade: that marks the triggers as
-- defined by this code for sql/reconcile.sql (which drops the triggers the code no longer
-- defines) without the table lock that re-creating them would take.
COMMENT ON TRIGGER _jobs_check_waiting ON pgq._jobs IS
'Checks a new waiting job''s dependencies again at its producer''s commit (pgq._trg_check_waiting).';
COMMENT ON TRIGGER _jobs_finished_trg ON pgq._jobs IS
'Tells the watchers of a job that it finished (pgq._trg_notify_finished).';
COMMENT ON TRIGGER _jobs_dead_trg ON pgq._jobs IS
'Tells the watchers of a job that it died (pgq._trg_notify_finished).';
COMMENT ON TRIGGER _jobs_marks_insert_trg ON pgq._jobs IS
'Keeps the claim marks below newly inserted queued jobs (pgq._trg_marks_inserted).';
COMMENT ON TRIGGER _jobs_marks_update_trg ON pgq._jobs IS
'Keeps the claim mark below a job that became queued or moved earlier (pgq._trg_marks_updated).';
COMMENT ON TRIGGER _outcomes_count_trg ON pgq._outcomes IS
'Adds new outcomes to the cumulative counts of pgq.outcome_totals (pgq._trg_count_outcomes).';
COMMENT ON TRIGGER _jobs_batch_end_trg ON pgq._jobs IS
'Marks a batch member that left the hot table, for its batch''s counts at commit (pgq._trg_batch_member_ended).';
COMMENT ON TRIGGER _jobs_batch_dead_trg ON pgq._jobs IS
'Marks a batch member that went dead or came back from dead (pgq._trg_batch_member_ended).';
COMMENT ON TRIGGER _batch_members_settle_trg ON pgq._batch_members IS
'At commit: counts the batch members the transaction ended and enqueues due callbacks (pgq._trg_batch_settle).';
COMMENT ON TRIGGER _batches_settle_trg ON pgq._batches IS
'At the commit that opened a batch: a batch without members finishes then (pgq._trg_batch_settle).';
