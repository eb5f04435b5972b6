-- The current table layout of pgq. Functions, views and grants live in their own files and
-- are (re)applied on every install and upgrade; a change here needs a migration too
-- (tests/py/lifecycle/test_migrations.py diffs a fresh install against the replayed migrations).
-- Tables are internal (prefix `_`): the public interface is the functions and views.

CREATE SCHEMA pgq;
COMMENT ON SCHEMA pgq IS 'pgq-sql job queue';

-- Which migrations have been applied (see python/pgq/migrate.py).
CREATE TABLE pgq._migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- Per-entrypoint settings. A NULL setting means "the default" (pgq._defaults()); an
-- entrypoint without a row runs entirely on defaults.
CREATE TABLE pgq._queues (
    entrypoint text PRIMARY KEY,
    paused boolean NOT NULL DEFAULT FALSE,
    max_attempts integer,
    backoff_base interval,
    backoff_max interval,
    lease interval,
    timeout interval,
    concurrency integer,
    rate numeric,
    retention interval,
    updated_at timestamptz NOT NULL DEFAULT now(),
    -- The token bucket of a rate limit (see pgq.claim).
    rate_tokens double precision,
    rate_refilled_at timestamptz,
    -- A job whose worker was lost this many times goes dead (NULL: default, 0: no cap).
    max_deliveries integer,
    -- The most running jobs of one concurrency key (NULL: no limit).
    key_concurrency integer,
    -- A job with a concurrency key was enqueued here once: claims take the keyed path.
    keyed boolean NOT NULL DEFAULT FALSE,
    -- The key the last claim ended on: the next one rotates on from it (see pgq.claim).
    key_cursor text,
    -- How often one job may snooze (NULL: default).
    max_snoozes integer
);

-- Live jobs only: queued, waiting, running and dead. Finished jobs leave this table for
-- pgq._outcomes, so it stays small whatever the history. Partitioned by entrypoint: every
-- entrypoint's jobs are in pgq._jobs_default, but those of an entrypoint given a partition
-- of its own (pgq.isolate), whose jobs then fill pages of their own (docs/scaling.md). Ids
-- are unique through the one sequence; each partition has its own primary key on id (one
-- on the partitioned table would have to include the entrypoint: a wider index that every
-- lookup by id would walk), made by pgq.isolate for the partitions it creates.
CREATE TABLE pgq._jobs (
    id bigint GENERATED ALWAYS AS IDENTITY,
    entrypoint text NOT NULL,
    status text NOT NULL DEFAULT 'queued',
    priority integer NOT NULL DEFAULT 0,
    run_at timestamptz NOT NULL DEFAULT now(),
    payload jsonb,
    headers jsonb,
    dedupe_key text,
    max_attempts integer,
    attempt integer NOT NULL DEFAULT 0,
    deliveries integer NOT NULL DEFAULT 0,
    enqueued_at timestamptz NOT NULL DEFAULT now(),
    worker_id uuid,
    started_at timestamptz,
    cancel_requested boolean NOT NULL DEFAULT FALSE,
    last_error text,
    -- The live jobs this one waits for (status 'waiting' until they all succeed).
    depends_on bigint[],
    -- Deliveries that ended with the worker lost (reaped): the poison-pill count.
    lost integer NOT NULL DEFAULT 0,
    -- Someone waits for this job's end (pgq.watch): its end is notified on channel
    -- pgq_finished. Jobs nobody waits for pay only the check of this flag.
    watched boolean NOT NULL DEFAULT FALSE,
    -- The key (tenant, customer) this job counts against: per-key limits and fair claims.
    concurrency_key text,
    -- How often pgq.snooze put it back.
    snoozes integer NOT NULL DEFAULT 0,
    -- The login role (session_user) that enqueued it: only that role, the worker that
    -- holds it and pgq_admin may read it (pgq._may_read). NULL for jobs queued before the
    -- upgrade that added it.
    enqueued_by text DEFAULT session_user,
    -- Read by nothing of this release: 0.1.0's functions read and set it, and a call of
    -- theirs under way while an upgrade commits runs against these tables
    -- (migrations/0013_claim_protocols.sql). pgq._trg_check_waiting sets it on a new
    -- waiting job's dependencies: it needs the write, not the value (a column to write
    -- stays when this one goes, once 0.1.0 is two releases back).
    has_dependents boolean NOT NULL DEFAULT TRUE,
    -- Why it is queued again (the reason of its next delivery, pgq.claim_v3): 'retry' (a
    -- failure, pgq.retry), 'snooze', 'lost' (a delivery given back unsettled); NULL before its
    -- first delivery, and for jobs re-queued before the upgrade that added it.
    delivery_reason text,
    -- The batch it is a member of (pgq.batch, pgq.enqueue_batch(batch => ...)); NULL for
    -- jobs in no batch, which the batch triggers' WHEN clauses skip (sql/setup.sql).
    batch_id bigint,
    CONSTRAINT _jobs_status_check CHECK (status IN ('queued', 'waiting', 'running', 'dead')),
    CONSTRAINT _jobs_held_check CHECK ((status = 'running') = (worker_id IS NOT NULL))
) PARTITION BY LIST (entrypoint);

-- Made as a table and attached, as migrations/0020_jobs_partitioned.sql makes it of the
-- table of earlier releases (so both give one schema). Claims rewrite rows constantly: a
-- lower fillfactor leaves room on the page and vacuum runs early (pgq.isolate gives its
-- partitions the same settings).
CREATE TABLE pgq._jobs_default (
    LIKE pgq._jobs INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
    CONSTRAINT _jobs_pkey PRIMARY KEY (id)
) WITH (
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.05,
    autovacuum_vacuum_cost_delay = 0
);
-- In a DO block: sqlfluff does not parse ATTACH PARTITION ... DEFAULT.
DO $$
BEGIN
    ALTER TABLE pgq._jobs ATTACH PARTITION pgq._jobs_default DEFAULT;
END
$$;

-- The claim walks this index in claim order and stops after batch_size rows. Its columns
-- sort in one direction so that the claim's low-water mark (pgq._marks), a row comparison,
-- bounds the scan from below.
CREATE INDEX _jobs_claim_idx ON pgq._jobs (entrypoint, (-priority::bigint), run_at, id)
WHERE status = 'queued';

-- Keyed jobs only (entrypoints without keys pay nothing): the keyed claim finds each key's
-- queue here, priority by priority.
CREATE INDEX _jobs_key_idx ON pgq._jobs (entrypoint, priority DESC, concurrency_key, run_at, id)
WHERE status = 'queued' AND concurrency_key IS NOT NULL;

-- Running keyed jobs: per-key concurrency counts.
CREATE INDEX _jobs_key_running_idx ON pgq._jobs (entrypoint, concurrency_key)
WHERE status = 'running' AND concurrency_key IS NOT NULL;

-- Running jobs: concurrency counts, reap and unregister scan only these.
CREATE INDEX _jobs_running_idx ON pgq._jobs (entrypoint, worker_id) WHERE status = 'running';

-- Running jobs by start: the timeout rule reads only those started before the shortest
-- timeout plus lease (under a held snapshot, not every job claimed since it).
CREATE INDEX _jobs_started_idx ON pgq._jobs (started_at) WHERE status = 'running';

-- Almost always empty: lets heartbeat find cancellation requests without a scan.
CREATE INDEX _jobs_cancel_idx ON pgq._jobs (worker_id) WHERE cancel_requested;

-- At most one live (not dead) job per (entrypoint, dedupe_key); enqueue relies on it.
CREATE UNIQUE INDEX _jobs_dedupe_idx ON pgq._jobs (entrypoint, dedupe_key)
WHERE dedupe_key IS NOT NULL AND status <> 'dead';

-- Dead jobs by entrypoint: listing and counting them (pgq.retry of all dead jobs, the
-- dashboard) without a scan of the hot table; only dead rows are in it.
CREATE INDEX _jobs_dead_idx ON pgq._jobs (entrypoint, id) WHERE status = 'dead';

-- Waiting jobs by the jobs they wait for.
CREATE INDEX _jobs_waiting_idx ON pgq._jobs USING gin (depends_on) WHERE status = 'waiting';

-- Waiting jobs only, nearly always none: a completion asks whether any job waits (one
-- descent) before it probes the index above once per completed id. worker_id IS NULL is
-- true of every waiting job (_jobs_held_check); the dependents' lookups do not state it,
-- so the planner cannot take this index for them instead of the one above.
CREATE INDEX _jobs_waiting_any_idx ON pgq._jobs (id) WHERE status = 'waiting' AND worker_id IS NULL;

-- Each index above is a partitioned index: its index on a partition is named after it
-- (_jobs_claim_idx: _jobs_default_claim_idx), as migrations/0020_jobs_partitioned.sql names
-- the indexes of earlier releases' table and pgq.isolate those of its partitions.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT c.relname AS child, p.relname AS parent
        FROM pg_catalog.pg_inherits AS i
        JOIN pg_catalog.pg_class AS c ON c.oid = i.inhrelid
        JOIN pg_catalog.pg_class AS p ON p.oid = i.inhparent
        JOIN pg_catalog.pg_index AS x ON x.indexrelid = c.oid
        WHERE x.indrelid = 'pgq._jobs_default'::regclass
    LOOP
        EXECUTE format('ALTER INDEX pgq.%I RENAME TO %I', r.child, '_jobs_default' || substr(r.parent, 6));
    END LOOP;
END
$$;

-- Workers: a lease is held by the worker row, so one heartbeat UPDATE extends the leases
-- of every job the worker holds.
CREATE TABLE pgq._workers (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name text NOT NULL,
    entrypoints text[] NOT NULL,
    state text NOT NULL DEFAULT 'alive',
    registered_at timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    stopped_at timestamptz,
    -- The lease in force at the last heartbeat (the worker paces its beats by it).
    lease interval,
    -- The login role (session_user) that registered it; only that role and pgq_admin may
    -- act as this worker. NULL for workers registered before 0.2 (usable by any worker).
    registered_by name,
    -- When the jobs of a worker that stopped or was found dead were all given back: the
    -- sweep looks up only the workers without it, each by its own id (see pgq._reap).
    released_at timestamptz,
    CONSTRAINT _workers_state_check CHECK (state IN ('alive', 'dead', 'stopped'))
);

-- Append-only outcome log: one terminal row per job (succeeded, canceled, dead) plus one
-- 'failed' row per failed attempt. Partitioned by time so retention can drop whole
-- partitions; BRIN indexes cost almost nothing to maintain on an append-only log.
CREATE TABLE pgq._outcomes (
    job_id bigint NOT NULL,
    entrypoint text NOT NULL,
    outcome text NOT NULL,
    priority integer NOT NULL,
    attempt integer NOT NULL,
    deliveries integer NOT NULL,
    enqueued_at timestamptz NOT NULL,
    started_at timestamptz,
    finished_at timestamptz NOT NULL DEFAULT now(),
    worker_id uuid,
    error text,
    result jsonb,
    -- This failure left the job dead (pgq.stats counts them).
    fatal boolean NOT NULL DEFAULT FALSE,
    -- Terminal rows keep the job's payload, headers and dependencies (pgq.job).
    payload jsonb,
    headers jsonb,
    depends_on bigint[],
    -- The dedupe key of a succeeded job (an enqueue's dedupe_window looks for it).
    dedupe_key text,
    -- The job's concurrency key (pgq.job and pgq.outcomes show it once the job finished).
    concurrency_key text,
    -- The job's enqueued_by, on the rows that end it (who may read it once it finished).
    enqueued_by text,
    CONSTRAINT _outcomes_outcome_check CHECK (outcome IN ('succeeded', 'failed', 'dead', 'canceled', 'snoozed'))
) PARTITION BY RANGE (finished_at);

CREATE TABLE pgq._outcomes_default PARTITION OF pgq._outcomes DEFAULT;

-- The outcome log's indexes are made per partition (pgq._index_outcomes, for the daily
-- ones), not on the partitioned table: an index of the partitioned table belongs to the
-- extension pgq when installed that way, while the daily partitions a sweep makes do not,
-- and pg_restore then met each partition's index twice. The same three on each:
CREATE INDEX _outcomes_default_job_idx ON pgq._outcomes_default USING brin (job_id) WITH (pages_per_range = 16);
CREATE INDEX _outcomes_default_finished_idx ON pgq._outcomes_default USING brin (finished_at);
-- Succeeded jobs that had a dedupe key (dedupe_window); jobs without a key pay nothing.
CREATE INDEX _outcomes_default_dedupe_idx ON pgq._outcomes_default (entrypoint, dedupe_key, finished_at)
WHERE dedupe_key IS NOT NULL;

-- Durable steps (pgq.record_step, pgq.step_result): the result of each step of a job that
-- completed, kept with the job's id while the job is live and after it finished, until its
-- outcome is pruned (pgq.prune). Jobs without steps have no rows here and pay nothing: the
-- claim, completion and failure paths never read this table.
CREATE TABLE pgq._steps (
    job_id bigint NOT NULL,
    name text NOT NULL,
    result jsonb,
    -- The delivery that ran it, and when it was recorded.
    delivery integer NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT _steps_pkey PRIMARY KEY (job_id, name)
);

-- Progress reported by a job's handler (pgq.progress): the last report per job, kept like
-- its steps (pgq.prune removes it with the outcome). A table of its own: reports rewrite
-- these rows, not the hot job table, and jobs that report nothing have none.
CREATE TABLE pgq._progress (
    job_id bigint PRIMARY KEY,
    value numeric NOT NULL,
    note text,
    delivery integer NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Periodic jobs. next_run is kept up to date so that a sweep finds due schedules with an
-- index lookup.
CREATE TABLE pgq._schedules (
    name text PRIMARY KEY,
    cron text NOT NULL,
    entrypoint text NOT NULL,
    payload jsonb,
    last_run timestamptz,
    next_run timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX _schedules_next_run_idx ON pgq._schedules (next_run);

-- The claim's low-water mark per entrypoint: no queued job sorts before the lesser of
-- (neg_priority, run_at, id) and the entrypoint's rows in pgq._mark_lows. Producers below
-- it lower it, or add a low (pgq._lower_mark); claims raise it (pgq._raise_mark). See
-- docs/held-snapshot.md.
CREATE TABLE pgq._marks (
    entrypoint text PRIMARY KEY,
    neg_priority bigint NOT NULL,
    run_at timestamptz NOT NULL,
    id bigint NOT NULL,
    raised_at timestamptz NOT NULL,
    -- When a raise last walked from the front instead of from the mark.
    verified_at timestamptz NOT NULL
);

-- Positions of queued jobs whose producers could not lower the mark in place; the next
-- raise takes them in and deletes them.
CREATE TABLE pgq._mark_lows (
    entrypoint text NOT NULL,
    neg_priority bigint NOT NULL,
    run_at timestamptz NOT NULL,
    id bigint NOT NULL
);
CREATE INDEX _mark_lows_idx ON pgq._mark_lows (entrypoint, neg_priority, run_at, id);

-- When each periodic maintenance task last ran (the workers' fallback sweep is throttled
-- by it when pg_cron is absent).
CREATE TABLE pgq._maintenance (
    task text PRIMARY KEY,
    last_run timestamptz NOT NULL
);

-- The install's own settings, one row: the prefix of its roles (`pgq install --roles`;
-- 'pgq_' gives pgq_owner, pgq_producer, pgq_worker, pgq_admin). Read by `pgq upgrade`,
-- `pgq doctor` and `pgq uninstall` to find the roles of this database's queue.
CREATE TABLE pgq._install (
    id boolean PRIMARY KEY DEFAULT TRUE CONSTRAINT _install_one_row CHECK (id),
    role_prefix text NOT NULL DEFAULT 'pgq_'
);
INSERT INTO pgq._install DEFAULT VALUES;

-- Finished jobs counted since the install (or the upgrade that added this table), for
-- monitoring: cumulative counters that any reader, at any time, finds the same and never
-- lower (pgq.outcome_totals; the dashboard's /metrics as *_total). Kept by a statement
-- trigger on pgq._outcomes (pgq._trg_count_outcomes): one row per entrypoint, outcome and shard
-- is updated per statement that writes outcomes, so a batch of completions costs one
-- update per entrypoint and outcome, not one per job. shard: the writing backend's pid
-- modulo 16, so that workers completing jobs of one entrypoint at the same time mostly
-- update different rows (no new lock wait between them). Rows are never deleted (retention
-- prunes the log, not these).
CREATE TABLE pgq._outcome_counts (
    entrypoint text NOT NULL,
    outcome text NOT NULL,
    shard smallint NOT NULL,
    jobs bigint NOT NULL DEFAULT 0,
    -- Sums of started - enqueued and finished - started, in seconds, of the counted
    -- outcomes that have a start (the _sum of a Prometheus summary).
    wait_seconds float8 NOT NULL DEFAULT 0,
    run_seconds float8 NOT NULL DEFAULT 0,
    PRIMARY KEY (entrypoint, outcome, shard)
) WITH (fillfactor = 50);

-- Batches (pgq.batch): a set of jobs whose end enqueues callbacks. The counts are kept under
-- this row's lock by pgq._trg_batch_settle, at the commit of each transaction that ended (or
-- revived) members, so each callback is enqueued exactly once: on_death at the first
-- death, on_finish when every member has ended (the first time), on_success when every
-- member has succeeded. A callback is {"entrypoint", "payload", "priority", "headers",
-- "max_attempts"}; its job id is kept once enqueued. Pruned with pgq.prune.
CREATE TABLE pgq._batches (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    on_finish jsonb,
    on_success jsonb,
    on_death jsonb,
    total integer NOT NULL DEFAULT 0,
    succeeded integer NOT NULL DEFAULT 0,
    dead integer NOT NULL DEFAULT 0,
    canceled integer NOT NULL DEFAULT 0,
    -- The transaction that opened it: members are added in that transaction only.
    created_xact xid8 NOT NULL DEFAULT pg_current_xact_id(),
    created_by text NOT NULL DEFAULT session_user,
    created_at timestamptz NOT NULL DEFAULT now(),
    -- When every member had ended for the first time.
    finished_at timestamptz,
    finish_job bigint,
    success_job bigint,
    death_job bigint
);

-- The members of each batch, kept after they leave the hot table (pgq.batch_results).
-- outcome: how the member's end was counted (succeeded, dead, canceled; NULL while live).
-- ended_xact: set by the trigger of pgq._jobs in the transaction that ended or revived it,
-- cleared when pgq._trg_batch_settle counts it at that transaction's commit.
CREATE TABLE pgq._batch_members (
    batch_id bigint NOT NULL,
    job_id bigint NOT NULL,
    outcome text,
    ended_xact xid8,
    CONSTRAINT _batch_members_pkey PRIMARY KEY (batch_id, job_id)
);

-- The members a transaction ended, for its commit (almost always empty).
CREATE INDEX _batch_members_ended_idx ON pgq._batch_members (ended_xact) WHERE ended_xact IS NOT NULL;
