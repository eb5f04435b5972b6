-- The job table becomes partitioned by entrypoint (sql/schema/tables.sql says why): the
-- table of earlier releases, with its rows, becomes its default partition pgq._jobs_default,
-- attached without being rewritten or scanned (a default partition with no siblings has no
-- constraint to check), so the upgrade takes the same time with a million jobs as with none.
-- It locks pgq._jobs for its length, as every upgrade does (pgq.migrate._lock_schema): the
-- workers of 0.2 wait for its commit, then their next statements find the partitioned
-- table by its name. Ids go on from the same value: the identity moves to the partitioned
-- table (its sequence, dropped with the old identity, is made again under the same name).
-- The indexes and the primary key stay where they are, renamed after the partitioned
-- indexes that they are attached to; the triggers are made again on the partitioned table
-- by sql/setup.sql (a table with a trigger of transition tables cannot be attached).
-- A table that is partitioned already is left as it is (tests/py/lifecycle/test_upgrade.py
-- replays the migrations from an earlier one on a current install).
DO $$
DECLARE
    v_next bigint;
BEGIN
    IF (SELECT c.relkind FROM pg_catalog.pg_class AS c WHERE c.oid = 'pgq._jobs'::regclass) = 'p' THEN
        RETURN;
    END IF;
    DROP TRIGGER IF EXISTS _jobs_check_waiting ON pgq._jobs;
    DROP TRIGGER IF EXISTS _jobs_finished_trg ON pgq._jobs;
    DROP TRIGGER IF EXISTS _jobs_dead_trg ON pgq._jobs;
    DROP TRIGGER IF EXISTS _jobs_marks_insert_trg ON pgq._jobs;
    DROP TRIGGER IF EXISTS _jobs_marks_update_trg ON pgq._jobs;
    DROP TRIGGER IF EXISTS _jobs_batch_end_trg ON pgq._jobs;
    DROP TRIGGER IF EXISTS _jobs_batch_dead_trg ON pgq._jobs;

    ALTER TABLE pgq._jobs RENAME TO _jobs_default;
    ALTER INDEX pgq._jobs_claim_idx RENAME TO _jobs_default_claim_idx;
    ALTER INDEX pgq._jobs_key_idx RENAME TO _jobs_default_key_idx;
    ALTER INDEX pgq._jobs_key_running_idx RENAME TO _jobs_default_key_running_idx;
    ALTER INDEX pgq._jobs_running_idx RENAME TO _jobs_default_running_idx;
    ALTER INDEX pgq._jobs_started_idx RENAME TO _jobs_default_started_idx;
    ALTER INDEX pgq._jobs_cancel_idx RENAME TO _jobs_default_cancel_idx;
    ALTER INDEX pgq._jobs_dedupe_idx RENAME TO _jobs_default_dedupe_idx;
    ALTER INDEX pgq._jobs_dead_idx RENAME TO _jobs_default_dead_idx;
    ALTER INDEX pgq._jobs_waiting_idx RENAME TO _jobs_default_waiting_idx;
    ALTER INDEX pgq._jobs_waiting_any_idx RENAME TO _jobs_default_waiting_any_idx;

    v_next := nextval(pg_catalog.pg_get_serial_sequence('pgq._jobs_default', 'id'));
    ALTER TABLE pgq._jobs_default ALTER COLUMN id DROP IDENTITY;

    CREATE TABLE pgq._jobs (LIKE pgq._jobs_default INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY LIST (entrypoint);
    ALTER TABLE pgq._jobs ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY;
    PERFORM pg_catalog.setval(pg_catalog.pg_get_serial_sequence('pgq._jobs', 'id'), v_next, FALSE);
    ALTER TABLE pgq._jobs ATTACH PARTITION pgq._jobs_default DEFAULT;

    CREATE INDEX _jobs_claim_idx ON pgq._jobs (entrypoint, (-priority::bigint), run_at, id)
    WHERE status = 'queued';
    CREATE INDEX _jobs_key_idx ON pgq._jobs (entrypoint, priority DESC, concurrency_key, run_at, id)
    WHERE status = 'queued' AND concurrency_key IS NOT NULL;
    CREATE INDEX _jobs_key_running_idx ON pgq._jobs (entrypoint, concurrency_key)
    WHERE status = 'running' AND concurrency_key IS NOT NULL;
    CREATE INDEX _jobs_running_idx ON pgq._jobs (entrypoint, worker_id) WHERE status = 'running';
    CREATE INDEX _jobs_started_idx ON pgq._jobs (started_at) WHERE status = 'running';
    CREATE INDEX _jobs_cancel_idx ON pgq._jobs (worker_id) WHERE cancel_requested;
    CREATE UNIQUE INDEX _jobs_dedupe_idx ON pgq._jobs (entrypoint, dedupe_key)
    WHERE dedupe_key IS NOT NULL AND status <> 'dead';
    CREATE INDEX _jobs_dead_idx ON pgq._jobs (entrypoint, id) WHERE status = 'dead';
    CREATE INDEX _jobs_waiting_idx ON pgq._jobs USING gin (depends_on) WHERE status = 'waiting';
    CREATE INDEX _jobs_waiting_any_idx ON pgq._jobs (id) WHERE status = 'waiting' AND worker_id IS NULL;
END
$$;
