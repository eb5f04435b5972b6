-- Batches with callbacks (fan-out / fan-in): pgq.batch opens a batch, pgq.enqueue_batch(...,
-- batch => id) adds members, pgq.batch_results reads them. Expand only: a nullable column on
-- the job table (jobs of earlier producers have none: in no batch) and two new tables.
-- Workers of the previous release never read them; the triggers (sql/setup.sql) count a
-- member's end whatever function ended it.
ALTER TABLE pgq._jobs ADD COLUMN batch_id bigint;

CREATE TABLE pgq._batches (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    on_finish jsonb,
    on_success jsonb,
    on_death jsonb,
    total integer NOT NULL DEFAULT 0,
    succeeded integer NOT NULL DEFAULT 0,
    dead integer NOT NULL DEFAULT 0,
    canceled integer NOT NULL DEFAULT 0,
    created_xact xid8 NOT NULL DEFAULT pg_current_xact_id(),
    created_by text NOT NULL DEFAULT session_user,
    created_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    finish_job bigint,
    success_job bigint,
    death_job bigint
);

CREATE TABLE pgq._batch_members (
    batch_id bigint NOT NULL,
    job_id bigint NOT NULL,
    outcome text,
    ended_xact xid8,
    CONSTRAINT _batch_members_pkey PRIMARY KEY (batch_id, job_id)
);

CREATE INDEX _batch_members_ended_idx ON pgq._batch_members (ended_xact) WHERE ended_xact IS NOT NULL;

-- A signature that gained a trailing parameter (batch).
DROP FUNCTION IF EXISTS pgq.enqueue_batch(
    text, jsonb[], integer, timestamptz, text[], text[], text, interval, text, jsonb, integer, bigint[]
);
