-- Trigger functions are named as triggers: pgq._trg_<what it keeps> (pgq._check_waiting read
-- as one of the _check_* validators). The new functions are code (sql/functions/_trg_*.sql)
-- and sql/setup.sql creates the triggers on them, both later in this same transaction.
-- A trigger cannot be pointed at another function (ALTER TRIGGER only renames it), and the
-- old functions cannot be dropped while triggers use them (sql/reconcile.sql would fail on
-- them), so this drops the triggers of the old functions and then the functions; setup.sql
-- creates the triggers again, with the same names, on the new functions. Dropping and
-- creating a trigger takes an ACCESS EXCLUSIVE lock on its table: pgq._jobs and pgq._outcomes
-- are locked for the upgrade's length, which every upgrade does anyway (it locks every table
-- of pgq first, pgq.migrate._lock_schema), so workers wait for the commit, as for any
-- upgrade, and no job is inserted or changed without its triggers.
-- IF EXISTS: an install of 0.1.0 or 0.2.0 has no pgq._count_outcomes yet (0015) and its
-- trigger, and replaying the migrations into an empty database has no trigger at all.
DROP TRIGGER IF EXISTS _jobs_check_waiting ON pgq._jobs;
DROP TRIGGER IF EXISTS _jobs_finished_trg ON pgq._jobs;
DROP TRIGGER IF EXISTS _jobs_dead_trg ON pgq._jobs;
DROP TRIGGER IF EXISTS _jobs_marks_insert_trg ON pgq._jobs;
DROP TRIGGER IF EXISTS _jobs_marks_update_trg ON pgq._jobs;
DROP TRIGGER IF EXISTS _outcomes_count_trg ON pgq._outcomes;

DROP FUNCTION IF EXISTS pgq._check_waiting();
DROP FUNCTION IF EXISTS pgq._notify_finished();
DROP FUNCTION IF EXISTS pgq._marks_inserted();
DROP FUNCTION IF EXISTS pgq._marks_updated();
DROP FUNCTION IF EXISTS pgq._count_outcomes();
