-- pgq 0.2.0: CREATE EXTENSION pgq.
-- Generated from pgq's sql/ and migrations/ (the files `pgq install` runs); do not edit.
-- Loaded by CREATE EXTENSION pgq.

\echo Use "CREATE EXTENSION pgq" (or ALTER EXTENSION pgq UPDATE) to load this file. \quit

-- ==== guard: not installed by pgq install ====
DO $guard$
BEGIN
    IF pg_catalog.to_regclass('pgq._migrations') IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'PQ012',
            MESSAGE = 'pgq: pgq is already installed in this database by pgq install (or its '
                      'SQL script); CREATE EXTENSION pgq changes nothing',
            HINT = 'Keep upgrading it the way it was installed: pgq upgrade, or pgq sql upgrade.';
    END IF;
END
$guard$;

-- ==== sql/require_server.sql ====
-- pgq needs PostgreSQL 14 or newer (README, "Supported PostgreSQL versions"; 14 to 18 are
-- tested). This is the first SQL of every install path: `pgq install` and `pgq upgrade` run
-- it before anything else, and it heads both the schema files and the code files
-- (python/pgq/resources.py), so an install by hand meets it first too. On an older server it
-- raises PQ011 (docs/errors.md) before anything has changed.
DO $$
BEGIN
    IF pg_catalog.current_setting('server_version_num')::integer < 140000 THEN
        RAISE EXCEPTION 'pgq needs PostgreSQL 14 or newer; this server is PostgreSQL %',
        pg_catalog.current_setting('server_version')
        USING
            ERRCODE = 'PQ011',
            HINT = 'Upgrade the server to PostgreSQL 14 to 18 (pg_upgrade, or a dump and '
            'restore), then run pgq install again; nothing was changed.';
    END IF;
END
$$;

-- ==== sql/schema/tables.sql ====
-- The current table layout of pgq. Functions, views and grants live in their own files and
-- are (re)applied on every install and upgrade; a change here needs a migration too
-- (tests/py/test_migrations.py diffs a fresh install against the replayed migrations).
-- Tables are internal (prefix `_`): the public interface is the functions and views.

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
-- pgq._outcomes, so it stays small whatever the history. Claims rewrite rows constantly:
-- a lower fillfactor leaves room on the page and vacuum runs early.
CREATE TABLE pgq._jobs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
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
    -- (migrations/0013_claim_protocols.sql). Dropped once 0.1.0 is two releases back.
    has_dependents boolean NOT NULL DEFAULT TRUE,
    CONSTRAINT _jobs_status_check CHECK (status IN ('queued', 'waiting', 'running', 'dead')),
    CONSTRAINT _jobs_held_check CHECK ((status = 'running') = (worker_id IS NOT NULL))
) WITH (
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.05,
    autovacuum_vacuum_cost_delay = 0
);

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

CREATE INDEX _outcomes_job_idx ON pgq._outcomes USING brin (job_id) WITH (pages_per_range = 16);
CREATE INDEX _outcomes_finished_idx ON pgq._outcomes USING brin (finished_at);

-- Succeeded jobs that had a dedupe key (dedupe_window); jobs without a key pay nothing.
CREATE INDEX _outcomes_dedupe_idx ON pgq._outcomes (entrypoint, dedupe_key, finished_at)
WHERE dedupe_key IS NOT NULL;

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

-- ==== the install's record ====
UPDATE pgq._install SET role_prefix = 'pgq_';
INSERT INTO pgq._migrations (version, name) VALUES (1, 'initial');
INSERT INTO pgq._migrations (version, name) VALUES (2, 'flow_control');
INSERT INTO pgq._migrations (version, name) VALUES (3, 'delivery_fencing');
INSERT INTO pgq._migrations (version, name) VALUES (4, 'results_and_stories');
INSERT INTO pgq._migrations (version, name) VALUES (5, 'lifecycle');
INSERT INTO pgq._migrations (version, name) VALUES (6, 'keys_and_snooze');
INSERT INTO pgq._migrations (version, name) VALUES (7, 'unique_scopes');
INSERT INTO pgq._migrations (version, name) VALUES (8, 'outcome_keys');
INSERT INTO pgq._migrations (version, name) VALUES (9, 'claim_marks');
INSERT INTO pgq._migrations (version, name) VALUES (10, 'bounded_sweeps');
INSERT INTO pgq._migrations (version, name) VALUES (11, 'waiting_probe');
INSERT INTO pgq._migrations (version, name) VALUES (12, 'least_privilege');
INSERT INTO pgq._migrations (version, name) VALUES (13, 'claim_protocols');

-- ==== sql/require_server.sql ====
-- pgq needs PostgreSQL 14 or newer (README, "Supported PostgreSQL versions"; 14 to 18 are
-- tested). This is the first SQL of every install path: `pgq install` and `pgq upgrade` run
-- it before anything else, and it heads both the schema files and the code files
-- (python/pgq/resources.py), so an install by hand meets it first too. On an older server it
-- raises PQ011 (docs/errors.md) before anything has changed.
DO $$
BEGIN
    IF pg_catalog.current_setting('server_version_num')::integer < 140000 THEN
        RAISE EXCEPTION 'pgq needs PostgreSQL 14 or newer; this server is PostgreSQL %',
        pg_catalog.current_setting('server_version')
        USING
            ERRCODE = 'PQ011',
            HINT = 'Upgrade the server to PostgreSQL 14 to 18 (pg_upgrade, or a dump and '
            'restore), then run pgq install again; nothing was changed.';
    END IF;
END
$$;

-- ==== sql/roles.sql ====
-- The roles of pgq; roles belong to the cluster, so they survive an uninstall and are
-- shared by every database that installs pgq. Creating them requires CREATEROLE.
-- pgq_owner (NOLOGIN) owns schema pgq and everything in it, so the SECURITY DEFINER
-- functions run as a role that can do nothing but run the queue, whoever installed it.
-- A non-superuser installer is made a member of pgq_owner (to upgrade later) and of
-- pgq_admin (its pg_cron sweeps run as itself).
-- Installs into two databases at once may race to create a role: the loser carries on.
DO $$
DECLARE
    v_role text;
BEGIN
    FOREACH v_role IN ARRAY ARRAY['pgq_owner', 'pgq_producer', 'pgq_worker', 'pgq_admin'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = v_role) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', v_role);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL;
            END;
        END IF;
    END LOOP;
    IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname = current_user) THEN
        FOREACH v_role IN ARRAY ARRAY['pgq_owner', 'pgq_admin'] LOOP
            IF NOT pg_catalog.pg_has_role(current_user, v_role, 'MEMBER') THEN
                EXECUTE format('GRANT %I TO %I', v_role, current_user);
            END IF;
        END LOOP;
    END IF;
END
$$;

-- ==== sql/functions/_cancel_dependents.sql ====
-- pgq._cancel_dependents(job_ids, reason): these jobs ended dead or canceled, so the jobs
-- waiting for them can never run: cancel them (logged with the reason), and theirs in turn.
-- Each round locks the dependents in id order before it deletes them: every function that
-- locks several jobs takes them in id order (dependencies before dependents), so none can
-- deadlock with another. With no job waiting, each round is one probe of an empty index.
-- Returns the number of jobs canceled.
CREATE OR REPLACE FUNCTION pgq._cancel_dependents(job_ids bigint[], reason text)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ids bigint[] := job_ids;
    v_locked bigint[];
    v_count integer := 0;
    v_round integer;
BEGIN
    WHILE v_ids IS NOT NULL AND v_ids <> '{}' LOOP
        SELECT array_agg(l.id) INTO v_locked
        FROM (
            SELECT w.id FROM pgq._jobs AS w
            WHERE w.status = 'waiting' AND w.depends_on && v_ids
            ORDER BY w.id
            FOR UPDATE
        ) AS l;
        EXIT WHEN v_locked IS NULL;
        WITH canceled AS (
            DELETE FROM pgq._jobs AS w
            WHERE w.id = ANY (v_locked) AND w.status = 'waiting'
            RETURNING w.*
        ),
        logged AS (
            INSERT INTO pgq._outcomes (
                job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, error,
                payload, headers, depends_on, concurrency_key, enqueued_by
            )
            SELECT c.id, c.entrypoint, 'canceled', c.priority, c.attempt, c.deliveries, c.enqueued_at, reason,
                   c.payload, c.headers, c.depends_on, c.concurrency_key, c.enqueued_by
            FROM canceled AS c
        )
        SELECT count(*), array_agg(c.id) INTO v_round, v_ids
        FROM canceled AS c;
        v_count := v_count + v_round;
    END LOOP;
    RETURN v_count;
END
$$;

-- ==== sql/functions/_check_dedupe.sql ====
-- pgq._check_dedupe(...): validation of the uniqueness options of pgq.enqueue_job (and so
-- pgq.enqueue, pgq.enqueue_batch). Each option needs a dedupe key: without one it would
-- silently do nothing. A window counts running and finished jobs, so it goes with the
-- 'live' scope only.
CREATE OR REPLACE FUNCTION pgq._check_dedupe(
    has_key boolean,
    dedupe_scope text,
    dedupe_mode text,
    dedupe_window interval,
    key_argument text DEFAULT 'dedupe_key'
)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF dedupe_scope IS NOT NULL AND dedupe_scope NOT IN ('queued', 'live') THEN
        PERFORM pgq._invalid('dedupe_scope', format('%L is not a scope', dedupe_scope),
            'Use ''queued'' (until the job starts), ''live'' (until it finishes; the default), or NULL.');
    END IF;
    IF dedupe_mode IS NOT NULL AND dedupe_mode NOT IN ('keep', 'replace') THEN
        PERFORM pgq._invalid('dedupe_mode', format('%L is not a mode', dedupe_mode),
            'Use ''keep'' (the existing job stays as it is; the default), ''replace'' (a job not started yet '
            || 'takes the new payload, priority, run_at, headers, max_attempts and concurrency_key), or NULL.');
    END IF;
    IF dedupe_window IS NOT NULL AND (dedupe_window <= interval '0' OR dedupe_window > interval '10 years') THEN
        PERFORM pgq._invalid('dedupe_window', format('%s is out of range', dedupe_window),
            'Use a positive interval up to 10 years, e.g. ''1 hour'', or NULL for no window.');
    END IF;
    IF dedupe_window IS NOT NULL AND dedupe_scope = 'queued' THEN
        PERFORM pgq._invalid('dedupe_window', 'cannot be combined with dedupe_scope ''queued''',
            'A window also counts running and finished jobs: use dedupe_scope ''live'' (or NULL) with it.');
    END IF;
    IF NOT has_key AND coalesce(dedupe_scope, dedupe_mode, dedupe_window::text) IS NOT NULL THEN
        PERFORM pgq._invalid(
            CASE WHEN dedupe_scope IS NOT NULL THEN 'dedupe_scope'
                 WHEN dedupe_mode IS NOT NULL THEN 'dedupe_mode'
                 ELSE 'dedupe_window' END,
            format('needs a %s', key_argument),
            format('Pass %s as well, or leave dedupe_scope, dedupe_mode and dedupe_window NULL.', key_argument));
    END IF;
END
$$;

-- ==== sql/functions/_check_entrypoint.sql ====
-- pgq._check_entrypoint(argument, value): an entrypoint is a non-empty name of at most 200
-- characters without control characters (it travels in NOTIFY payloads and log lines).
-- pgq.enqueue's plain-call condition mirrors these checks: a change here changes it too.
CREATE OR REPLACE FUNCTION pgq._check_entrypoint(argument text, value text)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL OR btrim(value) = '' THEN
        PERFORM pgq._invalid(argument, 'must not be NULL or empty',
            'Pass the name of the entrypoint, e.g. ''send_email''.');
    ELSIF length(value) > 200 THEN
        PERFORM pgq._invalid(argument, format('is %s characters long', length(value)),
            'Entrypoint names are at most 200 characters.');
    ELSIF value <> btrim(value) THEN
        PERFORM pgq._invalid(argument, format('%L has leading or trailing spaces', value),
            'Remove the spaces: '' email'' and ''email'' would be different entrypoints.');
    ELSIF value ~ '[[:cntrl:]]' THEN
        PERFORM pgq._invalid(argument, 'contains control characters',
            'Use printable characters only.');
    END IF;
END
$$;

-- ==== sql/functions/_check_entrypoints.sql ====
-- pgq._check_entrypoints(argument, value): a non-empty array of valid entrypoints.
CREATE OR REPLACE FUNCTION pgq._check_entrypoints(argument text, value text[])
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_entrypoint text;
BEGIN
    IF value IS NULL OR cardinality(value) = 0 THEN
        PERFORM pgq._invalid(argument, 'must be a non-empty array',
            'Pass the entrypoints to work on, e.g. ARRAY[''send_email''].');
    END IF;
    IF array_ndims(value) > 1 THEN
        PERFORM pgq._invalid(argument, format('has %s dimensions', array_ndims(value)),
            'Pass a one-dimensional array, e.g. ARRAY[''send_email''].');
    END IF;
    IF cardinality(value) > 1000 THEN
        PERFORM pgq._invalid(argument, format('has %s elements', cardinality(value)),
            'At most 1000 entrypoints per call.');
    END IF;
    FOREACH v_entrypoint IN ARRAY value LOOP
        PERFORM pgq._check_entrypoint(argument || ' element', v_entrypoint);
    END LOOP;
END
$$;

-- ==== sql/functions/_check_ids.sql ====
-- pgq._check_ids(argument, value): a non-NULL array of job ids without NULL elements, at
-- most 10000 long (an empty array is valid and means "nothing").
CREATE OR REPLACE FUNCTION pgq._check_ids(argument text, value bigint[])
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL THEN
        PERFORM pgq._invalid(argument, 'must not be NULL', 'Pass an array of job ids, e.g. ARRAY[1, 2].');
    ELSIF array_ndims(value) > 1 THEN
        PERFORM pgq._invalid(argument, format('has %s dimensions', array_ndims(value)),
            'Pass a one-dimensional array of job ids, e.g. ARRAY[1, 2].');
    ELSIF cardinality(value) > 10000 THEN
        PERFORM pgq._invalid(argument, format('has %s elements', cardinality(value)),
            'At most 10000 job ids per call; split the call.');
    ELSIF array_position(value, NULL) IS NOT NULL THEN
        PERFORM pgq._invalid(argument, 'contains NULL', 'Remove the NULL elements.');
    END IF;
END
$$;

-- ==== sql/functions/_check_interval.sql ====
-- pgq._check_interval(argument, value, minimum): NULL passes (= leave as is / default).
CREATE OR REPLACE FUNCTION pgq._check_interval(argument text, value interval, minimum interval)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NOT NULL AND (value < minimum OR value > interval '10 years') THEN
        PERFORM pgq._invalid(argument, format('%s is out of range', value),
            format('Use an interval from %s to 10 years.', minimum));
    END IF;
END
$$;

-- ==== sql/functions/_check_job.sql ====
-- pgq._check_job(...): validation shared by pgq.enqueue and pgq.enqueue_batch.
-- Payloads are limited to 1 MiB in jsonb form (pg_column_size, before compression): a queue
-- row is read on every claim, and large blobs belong in a table the payload points to.
-- pgq.enqueue skips this call for arguments that pass it, tested by one condition that
-- mirrors these checks (and pgq._check_entrypoint's): a change here changes it too.
CREATE OR REPLACE FUNCTION pgq._check_job(
    entrypoint text,
    payload jsonb,
    run_at timestamptz,
    dedupe_key text,
    headers jsonb,
    max_attempts integer
)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pgq._check_entrypoint('entrypoint', entrypoint);
    IF pg_column_size(payload) > 1048576 THEN
        RAISE EXCEPTION 'pgq: payload is % bytes, over the 1 MiB limit', pg_column_size(payload)
            USING ERRCODE = 'PQ004', HINT = 'Store large data in a table and put its key in the payload.';
    END IF;
    IF run_at IS NOT NULL AND NOT isfinite(run_at) AND run_at > now() THEN
        PERFORM pgq._invalid('run_at', 'must not be infinity', 'Pass a finite time, or NULL for now.');
    END IF;
    -- In bytes: the key goes into a btree index with the entrypoint (at most 2704 bytes).
    IF dedupe_key IS NOT NULL AND (dedupe_key = '' OR octet_length(dedupe_key) > 1000) THEN
        PERFORM pgq._invalid('dedupe_key', 'must be 1 to 1000 bytes long',
            'Pass NULL for no deduplication.');
    END IF;
    IF headers IS NOT NULL AND jsonb_typeof(headers) <> 'object' THEN
        PERFORM pgq._invalid('headers', format('must be a JSON object, not %s', jsonb_typeof(headers)),
            'Pass e.g. ''{"trace_id": "abc"}''::jsonb, or NULL.');
    END IF;
    IF pg_column_size(headers) > 65536 THEN
        RAISE EXCEPTION 'pgq: headers are % bytes, over the 64 KiB limit', pg_column_size(headers)
            USING ERRCODE = 'PQ004', HINT = 'Headers are for small metadata; use the payload.';
    END IF;
    IF max_attempts IS NOT NULL AND (max_attempts < 1 OR max_attempts > 1000) THEN
        PERFORM pgq._invalid('max_attempts', format('%s is out of range', max_attempts),
            'Use 1 to 1000, or NULL for the entrypoint''s setting.');
    END IF;
END
$$;

-- ==== sql/functions/_check_keys.sql ====
-- pgq._check_keys(name, keys, scalar): validates concurrency keys (pgq.enqueue passes one,
-- scalar, pgq.enqueue_batch an array); NULL elements are jobs without a key. A key is 1 to 1000
-- bytes: it goes into a btree index with the entrypoint.
CREATE OR REPLACE FUNCTION pgq._check_keys(name text, keys text[], scalar boolean DEFAULT FALSE)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_bad integer;
BEGIN
    SELECT k.ord INTO v_bad
    FROM unnest(keys) WITH ORDINALITY AS k (key, ord)
    WHERE k.key = '' OR octet_length(k.key) > 1000
    LIMIT 1;
    IF v_bad IS NOT NULL THEN
        PERFORM pgq._invalid(
            CASE WHEN scalar THEN name ELSE format('%s[%s]', name, v_bad) END,
            'must be 1 to 1000 bytes long', 'Pass NULL for a job without a concurrency key.');
    END IF;
END
$$;

-- ==== sql/functions/_check_waiting.sql ====
-- pgq._check_waiting(): a deferred constraint trigger on new waiting jobs, fired when the
-- producer's transaction commits (see sql/setup.sql). pgq.enqueue locks nothing while the
-- producer's transaction is open, so a dependency may have ended before the new job became
-- visible to it: its completion found no dependent to release, its death none to cancel.
-- At commit, this takes a share lock on the job's dependencies, in id order (a completion,
-- failure or claim of one waits for this commit only, not for the producer's whole
-- transaction; one already under way is waited for) and looks again, in a fresh snapshot:
-- a dependency that is dead or ended other than succeeded cancels the job (and its own
-- dependents); when none is live any more, all succeeded and the job is queued. Otherwise
-- the dependencies still live will find the job (now committed) when they end.
CREATE OR REPLACE FUNCTION pgq._check_waiting()
RETURNS trigger
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty):
-- tests/py/test_empty_queue_plans.py says why; JIT off, which that cost would start.
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
    v_live bigint[];
    v_dead bigint;
    v_failed text;
    v_id bigint;
    v_outcome text;
BEGIN
    SELECT array_agg(d.id) FILTER (WHERE d.status <> 'dead'), min(d.id) FILTER (WHERE d.status = 'dead')
    INTO v_live, v_dead
    FROM (
        SELECT j.id, j.status FROM pgq._jobs AS j
        WHERE j.id = ANY (new.depends_on)
        ORDER BY j.id
        FOR SHARE
    ) AS d;
    -- The job may have left the waiting state in its own transaction (canceled, say).
    PERFORM 1 FROM pgq._jobs AS j WHERE j.id = new.id AND j.status = 'waiting';
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF v_dead IS NOT NULL THEN
        v_failed := format('dependency %s is dead', v_dead);
    ELSIF v_live IS NULL THEN
        FOR v_id IN SELECT DISTINCT u.id FROM unnest(new.depends_on) AS u (id) ORDER BY u.id LOOP
            SELECT o.outcome INTO v_outcome FROM pgq._final_outcome(v_id) AS o;
            IF v_outcome IS DISTINCT FROM 'succeeded' THEN
                v_failed := format('dependency %s ended %s', v_id, coalesce(v_outcome, 'unknown'));
                EXIT;
            END IF;
        END LOOP;
        IF v_failed IS NULL THEN
            UPDATE pgq._jobs AS j SET status = 'queued', run_at = greatest(j.run_at, now())
            WHERE j.id = new.id;
            PERFORM pg_notify('pgq', new.entrypoint);
            RETURN NULL;
        END IF;
    ELSE
        RETURN NULL;
    END IF;
    WITH canceled AS (
        DELETE FROM pgq._jobs AS j WHERE j.id = new.id RETURNING j.*
    )
    INSERT INTO pgq._outcomes (
        job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, error, payload, headers, depends_on,
        concurrency_key, enqueued_by
    )
    SELECT c.id, c.entrypoint, 'canceled', c.priority, c.attempt, c.deliveries, c.enqueued_at, v_failed,
           c.payload, c.headers, c.depends_on, c.concurrency_key, c.enqueued_by
    FROM canceled AS c;
    PERFORM pgq._cancel_dependents(ARRAY[new.id], format('dependency %s was canceled', new.id));
    RETURN NULL;
END
$$;

-- ==== sql/functions/_check_worker.sql ====
-- pgq._check_worker(worker_id): the registered entrypoints of a live worker. Raises PQ002
-- for an id that was never registered and PQ003 for a worker that stopped or was reaped as
-- dead (it must register again: its jobs may already be re-delivered to another worker).
CREATE OR REPLACE FUNCTION pgq._check_worker(worker_id uuid)
RETURNS text[]
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_state text;
    v_entrypoints text[];
BEGIN
    IF worker_id IS NULL THEN
        PERFORM pgq._invalid('worker_id', 'must not be NULL', 'Pass the id that pgq.register_worker returned.');
    END IF;
    SELECT w.state, w.entrypoints INTO v_state, v_entrypoints
    FROM pgq._workers AS w
    WHERE w.id = _check_worker.worker_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgq: unknown worker_id %', worker_id
            USING ERRCODE = 'PQ002', HINT = 'Register the worker first with pgq.register_worker().';
    ELSIF v_state <> 'alive' THEN
        RAISE EXCEPTION 'pgq: worker_id % is % and holds no jobs', worker_id, v_state
            USING ERRCODE = 'PQ003',
            HINT = 'Its jobs may have been re-delivered; register again with pgq.register_worker().';
    END IF;
    RETURN v_entrypoints;
END
$$;

-- ==== sql/functions/_check_worker_role.sql ====
-- pgq._check_worker_role(worker_id): may the caller act as this worker? A worker id is
-- bound to the login role (session_user) that registered it; members of pgq_admin (and
-- superusers) may act as any worker. Without this, any pgq_worker could read another
-- team's worker id from pgq.workers and complete or fail its jobs.
-- The one place of this check: claim, heartbeat, complete, fail, release and
-- unregister_worker call it first. A NULL or unknown id passes (the caller raises its own
-- error); so does a worker registered before 0.2 (registered_by NULL), so that workers
-- of the previous version keep running through an upgrade.
-- SECURITY DEFINER functions see their owner as current_user: the caller's identity that
-- survives them is the login role, so SET ROLE does not change whose worker it is.
-- Raises PQ010 when the worker was registered by another role.
CREATE OR REPLACE FUNCTION pgq._check_worker_role(worker_id uuid)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_role name;
BEGIN
    SELECT w.registered_by INTO v_role FROM pgq._workers AS w WHERE w.id = _check_worker_role.worker_id;
    IF v_role IS NULL OR v_role = session_user OR pg_catalog.pg_has_role(session_user, 'pgq_admin', 'USAGE') THEN
        RETURN;
    END IF;
    RAISE EXCEPTION 'pgq: worker_id % was registered by role %, not by %', worker_id, v_role, session_user
        USING ERRCODE = 'PQ010',
        HINT = 'A worker acts only under the login role that registered it; register a worker of your own.';
END
$$;

-- ==== sql/functions/_claim_keyed.sql ====
-- pgq._claim_keyed(entrypoint, allowed, key_limit, key_cursor): the claim of an entrypoint
-- that has jobs with a concurrency key (see pgq.claim). The caller holds the lock on the
-- entrypoint's settings row, so keyed claims of one entrypoint take turns and the running
-- jobs counted here cannot change under it (in READ COMMITTED each statement sees the
-- claims committed before the lock was granted).
-- The keys with queued jobs are found priority by priority with a skip scan of
-- _jobs_key_idx (one index probe per key, not per job). Each key offers its oldest due jobs,
-- at most its room: allowed, or key_limit minus its running jobs. The offers are ordered by
-- priority, then turn (a key's first job before any key's second), then key order starting
-- after key_cursor (the key the previous claim ended on), and locked in that order (SKIP
-- LOCKED) up to allowed. Jobs without a key take part as the key '' (before every real
-- key, which is never empty), from the head of the entrypoint's plain claim order.
-- The offers are built twice at most: first each key offers only about its share of the
-- batch (allowed / keys + 1), which is the whole answer unless a key that had more to offer
-- could have ranked within the batch (few keys with many jobs, several priorities); only
-- then every key offers its full room. One claim costs about the batch, not keys x batch.
-- Returns the ids locked, in claim order (empty when nothing is due).
CREATE OR REPLACE FUNCTION pgq._claim_keyed(entrypoint text, allowed integer, key_limit integer, key_cursor text)
RETURNS bigint[]
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
-- pgq.claim forces generic plans; these statements are planned per call.
SET plan_cache_mode = auto
AS $$
#variable_conflict use_column
DECLARE
    v_priorities integer[];
    v_keys text[];
    v_cap integer;
    v_ids bigint[];
    v_chosen_keys text[];
    v_exact boolean;
BEGIN
    -- The (priority, key) pairs with queued jobs: one index probe per pair.
    WITH RECURSIVE keys AS (
        (
            SELECT j.priority, j.concurrency_key AS key
            FROM pgq._jobs AS j
            WHERE j.entrypoint = _claim_keyed.entrypoint AND j.status = 'queued' AND j.concurrency_key IS NOT NULL
            ORDER BY j.priority DESC, j.concurrency_key
            LIMIT 1
        )
        UNION ALL
        SELECT nx.priority, nx.key
        FROM keys AS k
        CROSS JOIN LATERAL (
            SELECT s.priority, s.key
            FROM (
                (
                    SELECT j.priority, j.concurrency_key AS key
                    FROM pgq._jobs AS j
                    WHERE j.entrypoint = _claim_keyed.entrypoint AND j.status = 'queued'
                      AND j.concurrency_key IS NOT NULL AND j.priority = k.priority AND j.concurrency_key > k.key
                    ORDER BY j.priority DESC, j.concurrency_key
                    LIMIT 1
                )
                UNION ALL
                (
                    SELECT j.priority, j.concurrency_key AS key
                    FROM pgq._jobs AS j
                    WHERE j.entrypoint = _claim_keyed.entrypoint AND j.status = 'queued'
                      AND j.concurrency_key IS NOT NULL AND j.priority < k.priority
                    ORDER BY j.priority DESC, j.concurrency_key
                    LIMIT 1
                )
            ) AS s
            LIMIT 1
        ) AS nx
    )
    SELECT coalesce(array_agg(k.priority), '{}'), coalesce(array_agg(k.key), '{}') INTO v_priorities, v_keys
    FROM keys AS k;

    -- A key's share of the batch, plus one; jobs without a key always offer the batch.
    v_cap := least(_claim_keyed.allowed, _claim_keyed.allowed / greatest(cardinality(v_keys), 1) + 1);
    LOOP
        WITH pairs AS (
            SELECT u.priority, u.key FROM unnest(v_priorities, v_keys) AS u (priority, key)
        ),
        room AS (
            SELECT d.key,
                   CASE WHEN _claim_keyed.key_limit IS NULL THEN _claim_keyed.allowed
                        ELSE least(_claim_keyed.allowed, greatest(_claim_keyed.key_limit - (
                            SELECT count(*)
                            FROM pgq._jobs AS r
                            WHERE r.entrypoint = _claim_keyed.entrypoint AND r.status = 'running'
                              AND r.concurrency_key = d.key
                        ), 0))::integer
                   END AS room
            FROM (SELECT DISTINCT k.key FROM pairs AS k) AS d
        ),
        -- Each pair's oldest due jobs, one more than offered: that one tells whether the
        -- pair was cut short (`spare`), and is itself never offered.
        offers AS (
            SELECT c.id, k.priority, k.key, c.run_at, m.room,
                   row_number() OVER (PARTITION BY k.priority, k.key ORDER BY c.run_at, c.id) AS turn
            FROM pairs AS k
            JOIN room AS m ON m.key = k.key
            CROSS JOIN LATERAL (
                SELECT j.id, j.run_at
                FROM pgq._jobs AS j
                WHERE j.entrypoint = _claim_keyed.entrypoint AND j.status = 'queued'
                  AND j.concurrency_key IS NOT NULL AND j.priority = k.priority AND j.concurrency_key = k.key
                  AND j.run_at <= now()
                ORDER BY j.run_at, j.id
                LIMIT CASE WHEN m.room > v_cap THEN v_cap + 1 ELSE m.room END
            ) AS c
        ),
        pool AS (
            SELECT o.id, o.priority, o.key, o.run_at, o.room, o.turn
            FROM offers AS o
            WHERE o.turn <= least(o.room, v_cap)
            UNION ALL
            SELECT u.id, u.priority, '', u.run_at, _claim_keyed.allowed,
                   row_number() OVER (PARTITION BY u.priority ORDER BY u.run_at, u.id)
            FROM (
                SELECT j.id, j.priority, j.run_at, j.concurrency_key
                FROM pgq._jobs AS j
                WHERE j.entrypoint = _claim_keyed.entrypoint AND j.status = 'queued' AND j.run_at <= now()
                -- The claim index's order (-priority: one direction, see pgq._marks).
                ORDER BY -j.priority::bigint, j.run_at, j.id
                LIMIT _claim_keyed.allowed
            ) AS u
            WHERE u.concurrency_key IS NULL
        ),
        ranked AS (
            SELECT p.id, p.priority, p.key, p.turn, p.room,
                   row_number() OVER (PARTITION BY p.key ORDER BY p.priority DESC, p.run_at, p.id) AS nth
            FROM pool AS p
        ),
        ordered AS (
            SELECT r.id, r.priority, r.turn, r.key,
                   row_number() OVER (
                       ORDER BY r.priority DESC, r.turn, coalesce(r.key <= _claim_keyed.key_cursor, FALSE), r.key,
                                r.id
                   ) AS ord
            FROM ranked AS r
            WHERE r.nth <= r.room
        ),
        -- The first job a cut pair did not offer (turn v_cap + 1), in claim order terms:
        -- every offer ranked before it is where the full offers would rank it.
        spare AS (
            SELECT o.priority, o.turn, o.key
            FROM offers AS o
            WHERE o.turn = v_cap + 1
            ORDER BY -o.priority, o.turn, coalesce(o.key <= _claim_keyed.key_cursor, FALSE), o.key
            LIMIT 1
        ),
        exact AS (
            SELECT o.id, o.ord, o.key
            FROM ordered AS o
            LEFT JOIN spare AS s ON TRUE
            WHERE s.key IS NULL
               OR (-o.priority, o.turn, coalesce(o.key <= _claim_keyed.key_cursor, FALSE), o.key)
                  < (-s.priority, s.turn, coalesce(s.key <= _claim_keyed.key_cursor, FALSE), s.key)
        )
        SELECT
            coalesce(c.ids, '{}'), coalesce(c.keys, '{}'),
            NOT EXISTS (SELECT 1 FROM spare) OR (SELECT count(*) FROM exact) >= _claim_keyed.allowed
        INTO v_ids, v_chosen_keys, v_exact
        FROM (
            SELECT array_agg(e.id ORDER BY e.ord) AS ids, array_agg(e.key ORDER BY e.ord) AS keys
            FROM exact AS e
        ) AS c;
        EXIT WHEN v_exact OR v_cap >= _claim_keyed.allowed;
        v_cap := _claim_keyed.allowed;  -- a cut key might have ranked within the batch: all of it
    END LOOP;

    -- Lock in claim order up to allowed; a job another transaction holds is skipped, and the
    -- next in order takes its place. A job is locked only if it is still of the key it was
    -- chosen for, and due: a change committed since (a dedupe_mode 'replace' enqueue: another
    -- key or run_at) could put it past its new key's room or before its time, so it is left
    -- for the next claim (the lock re-checks these against the newest version).
    SELECT coalesce(array_agg(l.id ORDER BY l.ord), '{}') INTO v_ids
    FROM (
        SELECT j.id, u.ord
        FROM unnest(v_ids, v_chosen_keys) WITH ORDINALITY AS u (id, key, ord)
        JOIN pgq._jobs AS j ON j.id = u.id
        WHERE j.status = 'queued' AND j.entrypoint = _claim_keyed.entrypoint
          AND coalesce(j.concurrency_key, '') = u.key AND j.run_at <= now()
        ORDER BY u.ord
        LIMIT _claim_keyed.allowed
        FOR UPDATE OF j SKIP LOCKED
    ) AS l;
    RETURN v_ids;
END
$$;

-- ==== sql/functions/_cron_field.sql ====
-- pgq._cron_field(field_name, expr, low, high, names): parse one field of a 5-field cron
-- expression into the sorted, distinct set of values it allows.
-- Parameters: field_name (for messages: 'minute', 'day-of-week', ...); expr (the field);
--   low, high (the range of numbers); names (optional, lower case, matched case-insensitively: names[1] is low,
--   names[2] is low + 1, ...; a number past the last name wraps to the first, so with
--   low 0, high 7 and sun..sat, 7 is Sunday = 0).
-- Accepts *, numbers, names, ranges a-b, lists a,b,c and steps */n, a-b/n and a/n (a to high).
-- Returns int[]. Raises PQ006 naming the field for anything else (empty, out of range,
-- reversed range, step 0, unknown name, garbage).
CREATE OR REPLACE FUNCTION pgq._cron_field(
    field_name text,
    expr text,
    low integer,
    high integer,
    names text[] DEFAULT NULL
)
RETURNS integer[]
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_item text;
    v_parts text[];
    v_bounds text[];
    v_token text;
    v_first integer;
    v_last integer;
    v_step integer;
    v_value numeric;
    v_problem text;
    v_values integer[] := '{}';
    v_hint text := format(
        'The %s field takes *, a number %s-%s%s, a range a-b, a list a,b,c, or a step */n, a-b/n or a/n, '
        'e.g. ''*/2'', ''%s-%s'', ''%s,%s''%s.',
        field_name, low, high,
        CASE WHEN names IS NOT NULL
            THEN format(' or a name %s-%s', names[1], names[pg_catalog.cardinality(names)])
            ELSE '' END,
        low + 1, low + 4, low, low + 2,
        CASE WHEN names IS NOT NULL THEN format(' or ''%s-%s''', names[2], names[6]) ELSE '' END);
BEGIN
    IF expr IS NULL OR expr = '' THEN
        v_problem := 'is empty';
    ELSE
        <<items>>
        FOREACH v_item IN ARRAY pg_catalog.string_to_array(expr, ',') LOOP
            v_parts := pg_catalog.string_to_array(v_item, '/');
            IF v_item = '' THEN
                v_problem := 'has an empty list item';
                EXIT items;
            ELSIF pg_catalog.cardinality(v_parts) > 2 THEN
                v_problem := format('"%s" has more than one step', v_item);
                EXIT items;
            END IF;

            -- The step, if any.
            v_step := 1;
            IF pg_catalog.cardinality(v_parts) = 2 THEN
                IF v_parts[2] !~ '^[0-9]+$' THEN
                    v_problem := format('step "%s" is not a number', v_parts[2]);
                    EXIT items;
                ELSIF v_parts[2]::numeric < 1 OR v_parts[2]::numeric > high - low + 1 THEN
                    v_problem := format('step %s is out of range 1-%s', v_parts[2], high - low + 1);
                    EXIT items;
                END IF;
                v_step := v_parts[2]::integer;
            END IF;

            -- The base: *, a, or a-b; a with a step means a to high.
            IF v_parts[1] = '*' THEN
                v_bounds := ARRAY[low::text, high::text];
            ELSE
                v_bounds := pg_catalog.string_to_array(v_parts[1], '-');
                IF pg_catalog.cardinality(v_bounds) = 1 AND pg_catalog.cardinality(v_parts) = 2 THEN
                    v_bounds := v_bounds || high::text;
                ELSIF pg_catalog.cardinality(v_bounds) NOT IN (1, 2) THEN
                    v_problem := format('"%s" is not a number, a name or a range a-b', v_parts[1]);
                    EXIT items;
                END IF;
            END IF;

            -- Each bound: a number in range or a name.
            FOR v_i IN 1..pg_catalog.cardinality(v_bounds) LOOP
                v_token := v_bounds[v_i];
                IF v_token ~ '^[0-9]+$' THEN
                    v_value := v_token::numeric;
                    IF v_value < low OR v_value > high THEN
                        v_problem := format('%s is out of range %s-%s', v_token, low, high);
                        EXIT items;
                    END IF;
                ELSIF names IS NOT NULL AND pg_catalog.lower(v_token) = ANY(names) THEN
                    v_value := low + pg_catalog.array_position(names, pg_catalog.lower(v_token)) - 1;
                ELSIF names IS NOT NULL THEN
                    v_problem := format('"%s" is not a number %s-%s or a name %s-%s',
                        v_token, low, high, names[1], names[pg_catalog.cardinality(names)]);
                    EXIT items;
                ELSE
                    v_problem := format('"%s" is not a number %s-%s', v_token, low, high);
                    EXIT items;
                END IF;
                IF v_i = 1 THEN
                    v_first := v_value;
                END IF;
                v_last := v_value;
            END LOOP;

            IF v_first > v_last THEN
                v_problem := format('range %s is reversed', v_parts[1]);
                EXIT items;
            END IF;
            v_values := v_values || ARRAY(SELECT pg_catalog.generate_series(v_first, v_last, v_step));
        END LOOP;
    END IF;

    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'pgq: invalid cron expression: % field "%": %', field_name, expr, v_problem
            USING ERRCODE = 'PQ006', HINT = v_hint;
    END IF;

    -- Numbers past the last name wrap around (day-of-week 7 is Sunday, 0).
    RETURN ARRAY(
        SELECT DISTINCT
            CASE
                WHEN names IS NOT NULL AND v.v >= low + pg_catalog.cardinality(names)
                    THEN v.v - pg_catalog.cardinality(names)
                ELSE v.v
            END AS value
        FROM pg_catalog.unnest(v_values) AS v (v)
        ORDER BY value
    );
END
$$;

-- ==== sql/functions/_cron_matches.sql ====
-- pgq._cron_matches(cron, at): whether the minute containing at, in UTC, matches the cron
-- expression. Days follow Vixie cron: when neither day-of-month nor day-of-week starts with
-- * (as `*` and `*/2` do), a day matches if either matches; otherwise both must match.
-- Returns NULL when at is NULL. Raises PQ006 for an invalid expression (see pgq._cron_parse).
CREATE OR REPLACE FUNCTION pgq._cron_matches(cron text, at timestamptz)
RETURNS boolean
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_cron record := pgq._cron_parse(cron);
    v_at timestamp := at AT TIME ZONE 'UTC';
    v_day_of_month boolean;
    v_day_of_week boolean;
BEGIN
    IF at IS NULL OR NOT pg_catalog.isfinite(at) THEN
        RETURN NULL;
    END IF;
    v_day_of_month := pg_catalog.date_part('day', v_at)::integer = ANY(v_cron.days);
    v_day_of_week := pg_catalog.date_part('dow', v_at)::integer = ANY(v_cron.weekdays);
    RETURN pg_catalog.date_part('minute', v_at)::integer = ANY(v_cron.minutes)
        AND pg_catalog.date_part('hour', v_at)::integer = ANY(v_cron.hours)
        AND pg_catalog.date_part('month', v_at)::integer = ANY(v_cron.months)
        AND CASE
            WHEN v_cron.days_any OR v_cron.weekdays_any THEN v_day_of_month AND v_day_of_week
            ELSE v_day_of_month OR v_day_of_week
        END;
END
$$;

-- ==== sql/functions/_cron_next.sql ====
-- pgq._cron_next(cron, after): the first minute strictly after `after` that matches the cron
-- expression, in UTC (see pgq._cron_matches for the day rule).
-- Walks day by day from the minute after `after`, skipping months that cannot match, and
-- takes the first matching hour and minute of the first matching day. The walk spans 8 years
-- and a day: the longest gap of any expression that can match at all is between two Feb 29
-- across a century that is not a leap year (2096-02-29 to 2104-02-29).
-- Returns NULL when the expression never matches (e.g. '0 0 31 2 *'), or when after is NULL
-- or infinite. Raises PQ006 for an invalid expression (see pgq._cron_parse).
CREATE OR REPLACE FUNCTION pgq._cron_next(cron text, after timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_cron record := pgq._cron_parse(cron);
    v_start timestamp;
    v_start_hour integer;
    v_start_minute integer;
    v_day date;
    v_end date;
    v_day_of_month boolean;
    v_day_of_week boolean;
    v_day_matches boolean;
    v_minute_of_day integer;
BEGIN
    IF after IS NULL OR NOT pg_catalog.isfinite(after) THEN
        RETURN NULL;
    END IF;
    v_start := pg_catalog.date_trunc('minute', after AT TIME ZONE 'UTC') + interval '1 minute';
    v_start_hour := pg_catalog.date_part('hour', v_start)::integer;
    v_start_minute := pg_catalog.date_part('minute', v_start)::integer;
    v_day := v_start::date;
    v_end := (v_start + interval '8 years 1 day')::date;

    WHILE v_day <= v_end LOOP
        IF NOT pg_catalog.date_part('month', v_day)::integer = ANY(v_cron.months) THEN
            -- Skip to the first day of the next month.
            v_day := (pg_catalog.date_trunc('month', v_day::timestamp) + interval '1 month')::date;
            CONTINUE;
        END IF;
        v_day_of_month := pg_catalog.date_part('day', v_day)::integer = ANY(v_cron.days);
        v_day_of_week := pg_catalog.date_part('dow', v_day)::integer = ANY(v_cron.weekdays);
        v_day_matches := CASE
            WHEN v_cron.days_any OR v_cron.weekdays_any THEN v_day_of_month AND v_day_of_week
            ELSE v_day_of_month OR v_day_of_week
        END;
        IF v_day_matches THEN
            IF v_day > v_start::date THEN
                v_minute_of_day := v_cron.hours[1] * 60 + v_cron.minutes[1];
            ELSE
                -- On the first day, the first matching minute not before v_start: in its hour,
                -- else the first minute of a later hour.
                v_minute_of_day := NULL;
                IF v_start_hour = ANY(v_cron.hours) THEN
                    SELECT v_start_hour * 60 + min(m.m) INTO v_minute_of_day
                    FROM pg_catalog.unnest(v_cron.minutes) AS m (m)
                    WHERE m.m >= v_start_minute;
                END IF;
                IF v_minute_of_day IS NULL THEN
                    SELECT min(h.h) * 60 + v_cron.minutes[1] INTO v_minute_of_day
                    FROM pg_catalog.unnest(v_cron.hours) AS h (h)
                    WHERE h.h > v_start_hour;
                END IF;
            END IF;
            IF v_minute_of_day IS NOT NULL THEN
                RETURN (v_day + pg_catalog.make_interval(mins => v_minute_of_day)) AT TIME ZONE 'UTC';
            END IF;
        END IF;
        v_day := v_day + 1;
    END LOOP;
    RETURN NULL;
END
$$;

-- ==== sql/functions/_cron_parse.sql ====
-- pgq._cron_parse(cron): parse a standard 5-field cron expression
-- (minute hour day-of-month month day-of-week, separated by whitespace) or a macro
-- (@hourly, @daily, @midnight, @weekly, @monthly, @yearly, @annually).
-- Returns the allowed values of each field (see pgq._cron_field; months and days of week
-- also by name, jan..dec and sun..sat; day of week 0 and 7 are Sunday, returned as 0), and
-- whether day-of-month and day-of-week start with * (days_any, weekdays_any: `*` or a step
-- such as `*/2`, as in Vixie cron): when neither does,
-- a day matches if either field matches.
-- Raises PQ006 for NULL, a count of fields other than 5, an unknown macro or an invalid field.
CREATE OR REPLACE FUNCTION pgq._cron_parse(
    cron text,
    OUT minutes integer[],
    OUT hours integer[],
    OUT days integer[],
    OUT months integer[],
    OUT weekdays integer[],
    OUT days_any boolean,
    OUT weekdays_any boolean
)
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_hint constant text :=
        'Write five fields separated by spaces: minute (0-59) hour (0-23) day-of-month (1-31) '
        'month (1-12 or jan-dec) day-of-week (0-7 or sun-sat, 0 and 7 are Sunday), '
        'e.g. ''*/15 * * * *'' or ''0 3 * * mon-fri'', or a macro: '
        '@hourly, @daily, @midnight, @weekly, @monthly, @yearly, @annually.';
    v_text text := pg_catalog.btrim(cron, E' \t\n\r');
    v_fields text[];
BEGIN
    IF cron IS NULL THEN
        RAISE EXCEPTION 'pgq: invalid cron expression: must not be NULL'
            USING ERRCODE = 'PQ006', HINT = v_hint;
    END IF;

    IF v_text LIKE '@%' THEN
        v_text := CASE pg_catalog.lower(v_text)
            WHEN '@hourly' THEN '0 * * * *'
            WHEN '@daily' THEN '0 0 * * *'
            WHEN '@midnight' THEN '0 0 * * *'
            WHEN '@weekly' THEN '0 0 * * 0'
            WHEN '@monthly' THEN '0 0 1 * *'
            WHEN '@yearly' THEN '0 0 1 1 *'
            WHEN '@annually' THEN '0 0 1 1 *'
        END;
        IF v_text IS NULL THEN
            RAISE EXCEPTION 'pgq: invalid cron expression: unknown macro "%"', pg_catalog.btrim(cron)
                USING ERRCODE = 'PQ006', HINT = v_hint;
        END IF;
    END IF;

    v_fields := CASE WHEN v_text = '' THEN '{}'::text[]
        ELSE pg_catalog.regexp_split_to_array(v_text, '\s+') END;
    IF pg_catalog.cardinality(v_fields) <> 5 THEN
        RAISE EXCEPTION 'pgq: invalid cron expression: "%" has % field%, expected 5',
            cron, pg_catalog.cardinality(v_fields),
            CASE WHEN pg_catalog.cardinality(v_fields) = 1 THEN '' ELSE 's' END
            USING ERRCODE = 'PQ006', HINT = v_hint;
    END IF;

    minutes := pgq._cron_field('minute', v_fields[1], 0, 59);
    hours := pgq._cron_field('hour', v_fields[2], 0, 23);
    days := pgq._cron_field('day-of-month', v_fields[3], 1, 31);
    months := pgq._cron_field('month', v_fields[4], 1, 12,
        ARRAY['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec']);
    weekdays := pgq._cron_field('day-of-week', v_fields[5], 0, 7,
        ARRAY['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat']);
    days_any := v_fields[3] LIKE '*%';
    weekdays_any := v_fields[5] LIKE '*%';
END
$$;

-- ==== sql/functions/_default_settings.sql ====
-- pgq._default_settings: the settings of an entrypoint that pgq.configure never touched, and
-- the fallback for every setting left NULL: one row. One place, so code and docs cannot
-- disagree (pgq._defaults() returns the same row as a record).
-- A view of constants, so that reading it costs nothing: the planner sees the constants
-- (a function returning a record is never folded, and each call of it costs tens of
-- microseconds), and a view that reads it needs no privilege of its readers. It is created
-- with the functions, not the views: SQL functions that read it are checked at creation.
CREATE OR REPLACE VIEW pgq._default_settings AS
SELECT
    5 AS max_attempts,
    interval '1 second' AS backoff_base,
    interval '1 hour' AS backoff_max,
    interval '30 seconds' AS lease,
    interval '1 hour' AS timeout,
    interval '7 days' AS retention,
    10 AS max_deliveries,
    100 AS max_snoozes;

COMMENT ON VIEW pgq._default_settings IS
'Internal: the default settings of every entrypoint (one row of constants; pgq.settings shows the effective values).';

-- ==== sql/functions/_defaults.sql ====
-- pgq._defaults(): the row of the view pgq._default_settings as one record, for
-- expressions such as (pgq._defaults()).lease in rarely run statements. Hot paths read the
-- view (constants to the planner); each call of this function costs tens of microseconds.
CREATE OR REPLACE FUNCTION pgq._defaults(
    OUT max_attempts integer,
    OUT backoff_base interval,
    OUT backoff_max interval,
    OUT lease interval,
    OUT timeout interval,
    OUT retention interval,
    OUT max_deliveries integer,
    OUT max_snoozes integer
)
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $$
    SELECT
        d.max_attempts, d.backoff_base, d.backoff_max, d.lease, d.timeout, d.retention, d.max_deliveries,
        d.max_snoozes
    FROM pgq._default_settings AS d
$$;

-- ==== sql/functions/_dependencies.sql ====
-- pgq._dependencies(depends_on): what a new job would wait for, as of now. Locks nothing:
-- a producer may hold its transaction open for long, and the jobs it waits for must go on
-- being claimed and completed meanwhile. One of them may therefore end before the new job
-- is visible to it; pgq._check_waiting, run when the producer commits, settles that case.
-- Returns waits_for (the live, not dead, dependencies; NULL when none) and failed (why the
-- job cannot run: a dependency that is dead or ended canceled; NULL when none).
-- Raises PQ001 for NULL elements, too many ids, or an id that is neither live nor logged.
-- A job the caller may not read (pgq._may_read: not its producer's, nor its worker's, nor
-- an admin's) is unknown to it, as pgq.job_status says: ids are sequential, and an answer
-- about another producer's job (waiting, canceled with it) would tell whether it exists
-- and how it ended.
CREATE OR REPLACE FUNCTION pgq._dependencies(depends_on bigint[], OUT waits_for bigint[], OUT failed text)
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_dead bigint;
    v_hidden bigint;
    v_id bigint;
    v_outcome text;
    v_visible boolean;
BEGIN
    PERFORM pgq._check_ids('depends_on', depends_on);
    SELECT array_agg(j.id ORDER BY j.id) FILTER (WHERE j.status <> 'dead'),
           min(j.id) FILTER (WHERE j.status = 'dead'),
           min(j.id) FILTER (WHERE NOT pgq._may_read(j.enqueued_by, j.worker_id))
    INTO waits_for, v_dead, v_hidden
    FROM pgq._jobs AS j
    WHERE j.id = ANY (_dependencies.depends_on);
    IF v_hidden IS NOT NULL THEN
        PERFORM pgq._invalid('depends_on', format('job %s is unknown (or its outcome was pruned)', v_hidden),
            'Pass ids returned by pgq.enqueue of jobs that are live or finished recently.');
    END IF;
    IF v_dead IS NOT NULL THEN
        failed := format('dependency %s is dead', v_dead);
        RETURN;
    END IF;

    -- The others have finished: they must have succeeded.
    FOR v_id IN
        SELECT DISTINCT u.id FROM unnest(_dependencies.depends_on) AS u (id)
        WHERE u.id <> ALL (coalesce(waits_for, '{}'))
        ORDER BY u.id
    LOOP
        SELECT o.outcome, pgq._may_read(o.enqueued_by, NULL) INTO v_outcome, v_visible
        FROM pgq._final_outcome(v_id) AS o;
        IF v_outcome IS NULL OR NOT v_visible THEN
            PERFORM pgq._invalid('depends_on', format('job %s is unknown (or its outcome was pruned)', v_id),
                'Pass ids returned by pgq.enqueue of jobs that are live or finished recently.');
        ELSIF v_outcome <> 'succeeded' THEN
            failed := format('dependency %s ended %s', v_id, v_outcome);
            RETURN;
        END IF;
    END LOOP;
END
$$;

-- ==== sql/functions/_ensure_partitions.sql ====
-- pgq._ensure_partitions(): the outcome log has one partition per UTC day; create today's
-- and the next three days' if missing (pgq.prune calls this hourly, install once). Rows
-- that landed in the default partition for such a day (when the sweeps did not run) are
-- moved into the new partition, under a lock that holds off inserts into the default one.
-- Returns the number of partitions created.
CREATE OR REPLACE FUNCTION pgq._ensure_partitions()
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
-- It reads whole partitions of the outcome log: sequential scans are right here, also when
-- pgq.sweep (which turns them off for pgq._jobs) calls it.
SET enable_seqscan = on
AS $$
DECLARE
    v_day date;
    v_name text;
    v_from timestamptz;
    v_to timestamptz;
    v_created integer := 0;
BEGIN
    FOR v_day IN
        SELECT (now() AT TIME ZONE 'UTC')::date + d
        FROM generate_series(0, 3) AS d
    LOOP
        v_name := '_outcomes_' || to_char(v_day, 'YYYYMMDD');
        CONTINUE WHEN to_regclass(format('pgq.%I', v_name)) IS NOT NULL;
        v_from := v_day::timestamp AT TIME ZONE 'UTC';
        v_to := (v_day + 1)::timestamp AT TIME ZONE 'UTC';
        LOCK TABLE pgq._outcomes_default IN SHARE ROW EXCLUSIVE MODE;
        IF EXISTS (
            SELECT 1 FROM pgq._outcomes_default AS o WHERE o.finished_at >= v_from AND o.finished_at < v_to
        ) THEN
            EXECUTE format(
                'CREATE TABLE pgq.%I (LIKE pgq._outcomes INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', v_name
            );
            EXECUTE format(
                'WITH moved AS (DELETE FROM pgq._outcomes_default AS o'
                ' WHERE o.finished_at >= $1 AND o.finished_at < $2 RETURNING o.*)'
                ' INSERT INTO pgq.%I SELECT * FROM moved', v_name
            ) USING v_from, v_to;
            EXECUTE format(
                'ALTER TABLE pgq._outcomes ATTACH PARTITION pgq.%I FOR VALUES FROM (%L) TO (%L)',
                v_name, v_from, v_to
            );
        ELSE
            EXECUTE format(
                'CREATE TABLE pgq.%I PARTITION OF pgq._outcomes FOR VALUES FROM (%L) TO (%L)',
                v_name, v_from, v_to
            );
        END IF;
        v_created := v_created + 1;
    END LOOP;
    RETURN v_created;
END
$$;

-- ==== sql/functions/_entrypoints_to_claim.sql ====
-- pgq._entrypoints_to_claim(entrypoints): each distinct entrypoint a claim asks for that is
-- not paused, with its timeout and max_attempts (the entrypoint's, else the defaults) and
-- where the claim's scan of its queued jobs starts (pgq._raise_mark): the lesser of its
-- mark and the lowest of its lows; the front without a mark (below any -priority; ids
-- start at 1). limited: it has a concurrency limit, a rate or keyed jobs, so the claim
-- may take its jobs only under the lock on its settings row (pgq.claim's first step): one
-- that step did not lock (it was paused then, or had none of them yet) is not claimed by
-- that call.
-- Written to be inlined into pgq.claim's statements (LANGUAGE sql, STABLE, no SET clause,
-- not STRICT): the planner then plans it as part of them, so each of their variants shares
-- this text and none pays for a function call.
CREATE OR REPLACE FUNCTION pgq._entrypoints_to_claim(entrypoints text[])
RETURNS TABLE (
    ep text,
    timeout interval,
    max_attempts integer,
    from_np bigint,
    from_run timestamptz,
    from_id bigint,
    limited boolean
)
LANGUAGE sql
STABLE
AS $$
    SELECT
        e.ep,
        coalesce(q.timeout, d.timeout),
        coalesce(q.max_attempts, d.max_attempts),
        CASE WHEN m.id IS NULL THEN -2147483648 WHEN lo.below THEN lo.neg_priority ELSE m.neg_priority END,
        CASE WHEN m.id IS NULL THEN '-infinity' WHEN lo.below THEN lo.run_at ELSE m.run_at END,
        CASE WHEN m.id IS NULL THEN 0 WHEN lo.below THEN lo.id ELSE m.id END,
        coalesce(q.concurrency IS NOT NULL OR q.rate IS NOT NULL OR q.keyed, FALSE)
    FROM (SELECT DISTINCT u.ep FROM pg_catalog.unnest(entrypoints) AS u (ep)) AS e
    CROSS JOIN pgq._default_settings AS d
    LEFT JOIN pgq._queues AS q ON q.entrypoint = e.ep
    LEFT JOIN pgq._marks AS m ON m.entrypoint = e.ep
    LEFT JOIN LATERAL (
        SELECT
            l.neg_priority, l.run_at, l.id,
            ROW(l.neg_priority, l.run_at, l.id) < ROW(m.neg_priority, m.run_at, m.id) AS below
        FROM pgq._mark_lows AS l
        WHERE l.entrypoint = e.ep
        ORDER BY l.neg_priority, l.run_at, l.id
        LIMIT 1
    ) AS lo ON TRUE
    WHERE NOT coalesce(q.paused, FALSE)
$$;

-- ==== sql/functions/_fail.sql ====
-- pgq._fail(job_id, error, retry_in): the fate of a failed run, shared by pgq.fail and the
-- reaper's timeout. The caller has checked that the job is running (and who holds it) and
-- holds its row lock.
-- attempt counts failures; while attempt < max_attempts (the job's, else the entrypoint's)
-- the job is queued again after retry_in, else exponential backoff with jitter:
-- backoff_base * 2^(attempt - 1), capped at backoff_max, then scaled by a random factor
-- in [0.5, 1) so that jobs failing together do not retry together. Otherwise it is dead:
-- kept in the hot table, visible and retryable with pgq.retry. A job whose cancellation
-- was requested is canceled instead. Each failure is logged as a 'failed' outcome.
-- Workers are woken (NOTIFY pgq) when the job is due again at once or when it freed a slot
-- of a concurrency-limited entrypoint.
-- Returns 'queued', 'dead' or 'canceled'.
CREATE OR REPLACE FUNCTION pgq._fail(job_id bigint, error text, retry_in interval)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_job pgq._jobs;
    v_max integer;
    v_base interval;
    v_cap interval;
    v_limited boolean;
    v_delay interval;
    v_status text;
    v_error text := left(error, 65536);
    -- The wall clock: a transactional handler fails at the end of a long transaction.
    v_now timestamptz := clock_timestamp();
BEGIN
    SELECT j.* INTO v_job FROM pgq._jobs AS j WHERE j.id = _fail.job_id;
    SELECT
        coalesce(v_job.max_attempts, q.max_attempts, d.max_attempts),
        coalesce(q.backoff_base, d.backoff_base),
        coalesce(q.backoff_max, d.backoff_max),
        q.concurrency IS NOT NULL OR q.key_concurrency IS NOT NULL
    INTO v_max, v_base, v_cap, v_limited
    FROM pgq._default_settings AS d
    LEFT JOIN pgq._queues AS q ON q.entrypoint = v_job.entrypoint;

    IF v_job.cancel_requested THEN
        DELETE FROM pgq._jobs AS j WHERE j.id = v_job.id;
        INSERT INTO pgq._outcomes (
            job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, started_at, finished_at,
            worker_id, error, payload, headers, depends_on, concurrency_key, enqueued_by
        )
        VALUES (v_job.id, v_job.entrypoint, 'canceled', v_job.priority, v_job.attempt + 1, v_job.deliveries,
                v_job.enqueued_at, v_job.started_at, v_now, v_job.worker_id, v_error,
                v_job.payload, v_job.headers, v_job.depends_on, v_job.concurrency_key, v_job.enqueued_by);
        PERFORM pgq._cancel_dependents(ARRAY[v_job.id], format('dependency %s was canceled', v_job.id));
        IF v_limited THEN
            PERFORM pg_notify('pgq', v_job.entrypoint);
        END IF;
        RETURN 'canceled';
    END IF;

    IF v_job.attempt + 1 < v_max THEN
        -- In seconds (double precision), so that a large attempt cannot overflow an interval.
        v_delay := coalesce(
            retry_in,
            make_interval(secs => least(
                extract(EPOCH FROM v_base) * power(2, least(v_job.attempt, 60)),
                extract(EPOCH FROM v_cap)
            ) * (0.5 + random() / 2))
        );
        v_status := 'queued';
    ELSE
        v_status := 'dead';
    END IF;
    INSERT INTO pgq._outcomes (
        job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, started_at, finished_at,
        worker_id, error, fatal, concurrency_key
    )
    VALUES (v_job.id, v_job.entrypoint, 'failed', v_job.priority, v_job.attempt + 1, v_job.deliveries,
            v_job.enqueued_at, v_job.started_at, v_now, v_job.worker_id, v_error, v_status = 'dead',
            v_job.concurrency_key);
    UPDATE pgq._jobs AS j
    SET status = v_status,
        attempt = j.attempt + 1,
        run_at = CASE WHEN v_status = 'queued' THEN now() + v_delay ELSE j.run_at END,
        worker_id = NULL,
        started_at = NULL,
        last_error = v_error
    WHERE j.id = v_job.id;
    IF v_status = 'dead' THEN
        PERFORM pgq._cancel_dependents(ARRAY[v_job.id], format('dependency %s is dead', v_job.id));
    END IF;
    IF v_limited OR (v_status = 'queued' AND v_delay <= interval '0') THEN
        PERFORM pg_notify('pgq', v_job.entrypoint);
    END IF;
    RETURN v_status;
END
$$;

-- ==== sql/functions/_final_outcome.sql ====
-- pgq._final_outcome(job_id): the row of the outcome log that says how a finished job ended
-- (succeeded, canceled, dead), or none. Other rows record attempts, not fates: 'failed' one
-- per failure, 'snoozed' one per snooze (and a cancel, stamped with its transaction's
-- start, can log an earlier time than a snooze of the same job). The one reading of a
-- job's fate for pgq.job_status, pgq.job and the dependency checks.
-- Written to be inlined (LANGUAGE sql, STABLE, no SET clause): the log's BRIN index on
-- job_id finds it.
CREATE OR REPLACE FUNCTION pgq._final_outcome(job_id bigint)
RETURNS SETOF pgq._outcomes
LANGUAGE sql
STABLE
AS $$
    SELECT o.*
    FROM pgq._outcomes AS o
    WHERE o.job_id = _final_outcome.job_id AND o.outcome IN ('succeeded', 'canceled', 'dead')
    ORDER BY o.finished_at DESC
    LIMIT 1
$$;

-- ==== sql/functions/_invalid.sql ====
-- pgq._invalid(argument, problem, hint): raise the project's invalid-argument error (PQ001)
-- with a message that names the argument. Every public function validates through this.
CREATE OR REPLACE FUNCTION pgq._invalid(argument text, problem text, hint text)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'pgq: invalid argument %: %', argument, problem
        USING ERRCODE = 'PQ001', HINT = hint;
END
$$;

-- ==== sql/functions/_lower_mark.sql ====
-- pgq._lower_mark(entrypoint, neg_priority, run_at, id): a job of entrypoint became queued
-- at claim position (neg_priority, run_at, id) in this transaction (the triggers of
-- pgq._jobs call it). Keeps the invariant of pgq._marks: no queued job sorts before its
-- entrypoint's mark and all of its lows. Its partner is pgq._raise_mark; the argument is in
-- docs/held-snapshot.md.
-- In READ COMMITTED: the mark lock (share mode, held until this transaction ends) keeps
-- raises out while this job is invisible to them: a raise either ended before the read
-- below, which then sees its mark, or starts after this commit and sees the job. A job
-- below the mark lowers it in place.
-- Otherwise the job's position is added to pgq._mark_lows, in this transaction: claims
-- start at the lowest of the mark and the lows, and a raise deletes only the lows it can
-- see, so a low needs no lock. That is the way when this snapshot may predate the last
-- raise (another isolation level: no lock is taken then, and no raise is kept out), when
-- another producer is lowering the same mark (its row lock lasts until it commits: no
-- waiting for it), and when a raise holds the mark lock for more than 50 ms (a claim inside
-- a longer transaction). Keyed entrypoints do not use the mark (their claims walk their own
-- index): no low for them.
CREATE OR REPLACE FUNCTION pgq._lower_mark(
    entrypoint text, neg_priority bigint, run_at timestamptz, id bigint
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_mark record;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        IF EXISTS (SELECT 1 FROM pgq._queues AS q WHERE q.entrypoint = _lower_mark.entrypoint AND q.keyed) THEN
            RETURN;
        END IF;
    ELSIF pg_try_advisory_xact_lock_shared(7366514, hashtext(_lower_mark.entrypoint))
          OR pgq._mark_lock_shared(_lower_mark.entrypoint) THEN
        SELECT m.neg_priority, m.run_at, m.id INTO v_mark
        FROM pgq._marks AS m WHERE m.entrypoint = _lower_mark.entrypoint;
        IF NOT FOUND OR ROW(_lower_mark.neg_priority, _lower_mark.run_at, _lower_mark.id)
                        >= ROW(v_mark.neg_priority, v_mark.run_at, v_mark.id) THEN
            RETURN;
        END IF;
        PERFORM 1 FROM pgq._marks AS m WHERE m.entrypoint = _lower_mark.entrypoint FOR NO KEY UPDATE SKIP LOCKED;
        IF FOUND THEN
            UPDATE pgq._marks AS m
            SET neg_priority = _lower_mark.neg_priority, run_at = _lower_mark.run_at, id = _lower_mark.id
            WHERE m.entrypoint = _lower_mark.entrypoint
              AND ROW(m.neg_priority, m.run_at, m.id)
                  > ROW(_lower_mark.neg_priority, _lower_mark.run_at, _lower_mark.id);
            RETURN;
        END IF;
    END IF;
    INSERT INTO pgq._mark_lows (entrypoint, neg_priority, run_at, id)
    VALUES (_lower_mark.entrypoint, _lower_mark.neg_priority, _lower_mark.run_at, _lower_mark.id);
END
$$;

COMMENT ON FUNCTION pgq._lower_mark(text, bigint, timestamptz, bigint) IS
'Internal: keep the claim mark of an entrypoint at or below a job that became queued.';

-- ==== sql/functions/_mark_keyed.sql ====
-- pgq._mark_keyed(entrypoint): the entrypoint has jobs with a concurrency key, so its
-- claims take the keyed path (fair rotation, per-key limits; see pgq.claim). Checked with a
-- plain read first: only the first keyed enqueue of an entrypoint writes (and locks) its
-- settings row, so producers do not queue behind one another on it.
CREATE OR REPLACE FUNCTION pgq._mark_keyed(entrypoint text)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pgq._queues AS q WHERE q.entrypoint = _mark_keyed.entrypoint AND q.keyed) THEN
        INSERT INTO pgq._queues AS q (entrypoint, keyed)
        VALUES (_mark_keyed.entrypoint, TRUE)
        ON CONFLICT ON CONSTRAINT _queues_pkey DO UPDATE SET keyed = TRUE WHERE NOT q.keyed;
    END IF;
END
$$;

-- ==== sql/functions/_mark_lock_shared.sql ====
-- pgq._mark_lock_shared(entrypoint): take the entrypoint's mark lock in share mode, waiting
-- at most 50 ms for a raise (pgq._raise_mark holds it exclusively until its transaction
-- ends: a claim's, normally over within milliseconds). FALSE when the wait ran out: the
-- raise is in a longer transaction, which no producer should wait for (it records a low
-- instead).
-- Its own function for the lock_timeout clause, and so that only producers that meet a
-- raise pay for the exception block.
CREATE OR REPLACE FUNCTION pgq._mark_lock_shared(entrypoint text)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
SET lock_timeout = '50ms'
AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(7366514, hashtext(_mark_lock_shared.entrypoint));
    RETURN TRUE;
EXCEPTION WHEN lock_not_available THEN
    RETURN FALSE;
END
$$;

COMMENT ON FUNCTION pgq._mark_lock_shared(text) IS
'Internal: take an entrypoint''s claim-mark lock in share mode, waiting at most 50 ms.';

-- ==== sql/functions/_marks_inserted.sql ====
-- pgq._marks_inserted(): statement trigger after INSERT on pgq._jobs (see sql/setup.sql):
-- the first new queued job of each entrypoint, in claim order, lowers its mark if needed.
-- Once per statement, so an enqueue_batch of 1000 jobs pays for one check, not 1000.
CREATE OR REPLACE FUNCTION pgq._marks_inserted()
RETURNS trigger
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_first record;
BEGIN
    FOR v_first IN
        SELECT DISTINCT ON (n.entrypoint) n.entrypoint, -n.priority::bigint AS neg_priority, n.run_at, n.id
        FROM new_jobs AS n
        WHERE n.status = 'queued'
        ORDER BY n.entrypoint, -n.priority::bigint, n.run_at, n.id
    LOOP
        PERFORM pgq._lower_mark(v_first.entrypoint, v_first.neg_priority, v_first.run_at, v_first.id);
    END LOOP;
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION pgq._marks_inserted() IS
'Internal: trigger keeping the claim marks below newly inserted queued jobs.';

-- ==== sql/functions/_marks_updated.sql ====
-- pgq._marks_updated(): row trigger after UPDATE on pgq._jobs, for a job that became queued
-- (a retry, a release, a snooze, a dependency that succeeded) or moved earlier in claim
-- order while queued (a higher priority, an earlier run_at); its WHEN clause (sql/setup.sql)
-- keeps claims and completions from calling it at all.
CREATE OR REPLACE FUNCTION pgq._marks_updated()
RETURNS trigger
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pgq._lower_mark(new.entrypoint, -new.priority::bigint, new.run_at, new.id);
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION pgq._marks_updated() IS
'Internal: trigger keeping the claim mark below a job that became queued or moved earlier.';

-- ==== sql/functions/_may_read.sql ====
-- pgq._may_read(enqueued_by, worker_id): may the caller read this job (its payload, headers,
-- result, errors, even its status)? Its producer may: the login role (session_user) that
-- enqueued it, whatever role it SET since, as a worker id is bound to the role that
-- registered it. So may the worker that holds it now (worker_id: the holder of a running
-- job, NULL otherwise) and members of pgq_admin (and superusers). Anyone else is told
-- nothing: job ids are sequential, so any other answer would let a producer read every
-- job by counting. Jobs queued before the upgrade that added enqueued_by (NULL) are
-- pgq_admin's.
-- Written to be inlined (LANGUAGE sql, STABLE, no SET clause): it runs inside pgq.job,
-- pgq.job_status and pgq.watch, which are SECURITY DEFINER.
-- Returns true or false, never NULL.
CREATE OR REPLACE FUNCTION pgq._may_read(enqueued_by text, worker_id uuid)
RETURNS boolean
LANGUAGE sql
STABLE
AS $$
    SELECT coalesce(_may_read.enqueued_by = session_user, FALSE)
        OR pg_catalog.pg_has_role(session_user, 'pgq_admin', 'USAGE')
        OR EXISTS (
            SELECT 1 FROM pgq._workers AS w
            WHERE w.id = _may_read.worker_id AND w.registered_by = session_user
        )
$$;

-- ==== sql/functions/_notify_finished.sql ====
-- pgq._notify_finished(): the trigger function that tells waiters a job has finished. A job
-- someone waits for (pgq.watch set `watched`) notifies channel pgq_finished, payload its
-- id, when it leaves the hot table (succeeded, canceled, discarded) or goes dead. The WHEN
-- clauses of its triggers (sql/setup.sql) look only at the row's own flag, so jobs nobody
-- waits for never call this function and the functions that finish jobs stay as they are.
CREATE OR REPLACE FUNCTION pgq._notify_finished()
RETURNS trigger
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF tg_op = 'DELETE' THEN
        PERFORM pg_catalog.pg_notify('pgq_finished', old.id::text);
    ELSE
        PERFORM pg_catalog.pg_notify('pgq_finished', new.id::text);
    END IF;
    RETURN NULL;
END
$$;

-- ==== sql/functions/_queue_counts.sql ====
-- pgq._queue_counts(exact_limit): the job counts of pgq.queues, one row per entrypoint with
-- live jobs, read through the partial indexes of pgq._jobs so that a million queued jobs
-- cost no scan of the table:
-- - the entrypoints and priorities of queued jobs, and the entrypoints of dead jobs: loose
--   index scans (one index descent per step) of _jobs_claim_idx and _jobs_dead_idx;
--   running: _jobs_running_idx; waiting: _jobs_waiting_idx (exact, in proportion to the
--   waiting jobs);
-- - queued (due) and scheduled: per entrypoint and priority, two ranges of the claim index
--   (it is ordered by run_at within a priority), each counted up to the entrypoint's share
--   of exact_limit (in index order, so that the planner never prefers a scan of the table
--   that stops early); the first entry of each priority gives the oldest due job;
-- - dead: the dead index, counted up to the entrypoint's share of exact_limit.
-- exact_limit is about how many index entries of a state are counted: each entrypoint with
-- jobs in that state gets exact_limit / (number of such entrypoints), at least 100 (or
-- exact_limit when lower), per priority. A count up to its share is exact. Above it the count is an
-- estimate (approximate is TRUE): the state's index size from the statistics of the last
-- VACUUM or ANALYZE (scaled to the index's current size, as the planner does; without
-- usable statistics, from the index's size alone), less what was counted exactly, shared
-- among the entrypoints over their share by their frequency in the table's statistics;
-- never less than what was counted.
-- exact_limit NULL: the setting pgq.queues_exact_limit, else 10000.
-- Raises PQ001 when the limit (argument or setting) is not a whole number from 0 up.
-- SECURITY DEFINER: the readers of pgq.queues may not read pgq._jobs or its statistics.
CREATE OR REPLACE FUNCTION pgq._queue_counts(exact_limit integer DEFAULT NULL)
RETURNS TABLE (
    entrypoint text,
    queued bigint,
    scheduled bigint,
    waiting bigint,
    running bigint,
    dead bigint,
    oldest_queued_age interval,
    approximate boolean
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty):
-- tests/py/test_empty_queue_plans.py says why.
SET enable_seqscan = off
-- Compiling these short index probes would cost seconds (their estimated costs can cross
-- the JIT thresholds), running them a few milliseconds.
SET jit = off
-- One plan per session: planning this statement costs more than running it, and its
-- parameters (the entrypoints, the shares) do not change the best plan.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_setting text := pg_catalog.current_setting('pgq.queues_exact_limit', TRUE);
    v_limit integer := _queue_counts.exact_limit;
    v_pair_ep text[];
    v_pair_pr integer[];
    v_pair_first timestamptz[];
    v_dead text[];
    v_share_queued integer;
    v_share_dead integer;
BEGIN
    IF v_limit IS NULL AND coalesce(v_setting, '') <> '' THEN
        IF v_setting !~ '^\s*[0-9]{1,9}\s*$' THEN
            PERFORM pgq._invalid(
                'pgq.queues_exact_limit',
                format('%L is not a whole number from 0 to 999999999', v_setting),
                'SET pgq.queues_exact_limit = 10000 (jobs counted per state; more are estimated), or RESET it'
            );
        END IF;
        v_limit := v_setting::integer;
    END IF;
    IF v_limit < 0 THEN
        PERFORM pgq._invalid(
            'exact_limit', format('%s is negative', v_limit), 'pass a count from 0 up, or NULL for the default'
        );
    END IF;
    v_limit := coalesce(v_limit, 10000);

    -- The (entrypoint, priority) pairs of queued jobs with the run_at of each pair's first
    -- (oldest) job: a loose index scan of the claim index in its order, one descent per
    -- pair (a row comparison on the index's first two columns: the next priority of the
    -- same entrypoint, else the next entrypoint).
    SELECT coalesce(array_agg(t.ep), '{}'), coalesce(array_agg(t.pr), '{}'), coalesce(array_agg(t.first), '{}')
    INTO v_pair_ep, v_pair_pr, v_pair_first
    FROM (
        WITH RECURSIVE t AS (
            (
                SELECT j.entrypoint AS ep, j.priority AS pr, j.run_at AS first FROM pgq._jobs AS j
                WHERE j.status = 'queued' ORDER BY j.entrypoint, -j.priority::bigint, j.run_at LIMIT 1
            )
            UNION ALL
            SELECT n.ep, n.pr, n.first
            FROM t
            CROSS JOIN LATERAL (
                SELECT j.entrypoint AS ep, j.priority AS pr, j.run_at AS first FROM pgq._jobs AS j
                WHERE j.status = 'queued' AND ROW(j.entrypoint, -j.priority::bigint) > ROW(t.ep, -t.pr::bigint)
                ORDER BY j.entrypoint, -j.priority::bigint, j.run_at LIMIT 1
            ) AS n
        )
        SELECT t.ep, t.pr, t.first FROM t
    ) AS t;
    -- The entrypoints with dead jobs: a loose index scan of the dead index.
    v_dead := ARRAY(
        WITH RECURSIVE e AS (
            (
                SELECT j.entrypoint AS ep FROM pgq._jobs AS j
                WHERE j.status = 'dead' ORDER BY j.entrypoint LIMIT 1
            )
            UNION ALL
            SELECT (
                SELECT j.entrypoint FROM pgq._jobs AS j
                WHERE j.status = 'dead' AND j.entrypoint > e.ep ORDER BY j.entrypoint LIMIT 1
            )
            FROM e WHERE e.ep IS NOT NULL
        )
        SELECT e.ep FROM e WHERE e.ep IS NOT NULL
    );
    v_share_queued := greatest(
        v_limit / greatest((SELECT count(DISTINCT e.ep) FROM unnest(v_pair_ep) AS e (ep)), 1)::integer,
        least(v_limit, 100)
    );
    v_share_dead := greatest(v_limit / greatest(cardinality(v_dead), 1), least(v_limit, 100));

    RETURN QUERY
    WITH RECURSIVE
    per_priority AS MATERIALIZED (
        SELECT
            p.ep,
            p.first_run_at,
            CASE WHEN p.first_run_at > now() THEN 0 ELSE (
                SELECT count(*) FROM (
                    SELECT 1 FROM pgq._jobs AS j
                    WHERE j.status = 'queued' AND j.entrypoint = p.ep AND -j.priority::bigint = -p.pr::bigint
                      AND j.run_at <= now()
                    ORDER BY -j.priority::bigint, j.run_at LIMIT v_share_queued + 1
                ) AS s
            ) END AS due,
            (
                SELECT count(*) FROM (
                    SELECT 1 FROM pgq._jobs AS j
                    WHERE j.status = 'queued' AND j.entrypoint = p.ep AND -j.priority::bigint = -p.pr::bigint
                      AND j.run_at > now()
                    ORDER BY -j.priority::bigint, j.run_at LIMIT v_share_queued + 1
                ) AS s
            ) AS later
        FROM unnest(v_pair_ep, v_pair_pr, v_pair_first) AS p (ep, pr, first_run_at)
    ),
    per_ep AS (
        SELECT
            q.ep,
            sum(q.due)::bigint AS due,
            sum(q.later)::bigint AS later,
            bool_or(q.due > v_share_queued) AS due_over,
            bool_or(q.later > v_share_queued) AS later_over,
            min(q.first_run_at) FILTER (WHERE q.first_run_at <= now()) AS oldest
        FROM per_priority AS q
        GROUP BY q.ep
    ),
    dead_counts AS MATERIALIZED (
        SELECT
            d.ep,
            (
                SELECT count(*) FROM (
                    SELECT 1 FROM pgq._jobs AS j WHERE j.status = 'dead' AND j.entrypoint = d.ep
                    ORDER BY j.id LIMIT v_share_dead + 1
                ) AS s
            ) AS n
        FROM unnest(v_dead) AS d (ep)
    ),
    -- Jobs per state from the statistics of its index (density at the last VACUUM or
    -- ANALYZE times the index's current size); from the size alone when the statistics are
    -- missing or plainly stale (fewer than were just counted): entries of about `width`
    -- bytes (line pointer included) filling 90% of a page, as jobs appended in run_at order
    -- fill them (jobs of many entrypoints interleaved leave pages emptier: an overestimate
    -- until autovacuum analyzes the table).
    totals AS (
        SELECT
            x.status,
            CASE
                WHEN x.by_stats >= x.counted THEN x.by_stats
                ELSE greatest(x.by_size, x.counted)
            END AS n
        FROM (
            SELECT
                i.status,
                -- Rounded: 8 / 1361 * 1361 is 7.999... in floating point, under a count of 8.
                CASE WHEN c.relpages > 1 AND c.reltuples >= 0 THEN round(c.reltuples / c.relpages * i.pages) END AS by_stats,
                (i.pages - 1) * (i.block - 40) * 0.9 / i.width AS by_size,
                (
                    SELECT coalesce(sum(e.due + e.later), 0) FROM per_ep AS e WHERE i.status = 'queued'
                ) + (
                    SELECT coalesce(sum(d.n), 0) FROM dead_counts AS d WHERE i.status = 'dead'
                ) AS counted
            FROM (
                SELECT
                    v.status, v.idx, v.width,
                    pg_catalog.current_setting('block_size')::float8 AS block,
                    pg_catalog.pg_relation_size(v.idx)
                    / pg_catalog.current_setting('block_size')::float8 AS pages
                FROM (
                    VALUES ('queued', 'pgq._jobs_claim_idx'::regclass, 52), ('dead', 'pgq._jobs_dead_idx'::regclass, 32)
                ) AS v (status, idx, width)
            ) AS i
            INNER JOIN pg_catalog.pg_class AS c ON i.idx = c.oid
        ) AS x
    ),
    ep_stats AS MATERIALIZED (
        SELECT
            s.most_common_vals::text::text [] AS vals,
            s.most_common_freqs AS freqs,
            (1 - s.null_frac - coalesce((SELECT sum(f) FROM unnest(s.most_common_freqs) AS f), 0))
            / greatest(
                CASE WHEN s.n_distinct >= 0 THEN s.n_distinct
                    ELSE -s.n_distinct * greatest(t.reltuples, 0) END
                - coalesce(cardinality(s.most_common_freqs), 0),
                1
            ) AS other_freq
        FROM pg_catalog.pg_stats AS s
        CROSS JOIN pg_catalog.pg_class AS t
        WHERE s.schemaname = 'pgq' AND s.tablename = '_jobs' AND s.attname = 'entrypoint'
          AND t.oid = 'pgq._jobs'::regclass
    ),
    mcv AS MATERIALIZED (
        SELECT u.val, u.freq FROM ep_stats AS st, unnest(st.vals, st.freqs) AS u (val, freq)
    ),
    -- The counts that went over the limit, with what was counted (a lower bound) and the
    -- entrypoint's weight: its frequency in the table's statistics.
    over AS (
        SELECT
            o.ep, o.kind, o.status, o.counted,
            greatest(coalesce(m.freq, (SELECT st.other_freq FROM ep_stats AS st), 1), 1e-9)::float8 AS weight
        FROM (
            SELECT e.ep, 'due' AS kind, 'queued' AS status, e.due AS counted FROM per_ep AS e WHERE e.due_over
            UNION ALL
            SELECT e.ep, 'later', 'queued', e.later FROM per_ep AS e WHERE e.later_over
            UNION ALL
            SELECT d.ep, 'dead', 'dead', d.n FROM dead_counts AS d WHERE d.n > v_share_dead
        ) AS o
        LEFT JOIN mcv AS m ON o.ep = m.val
    ),
    exact_sums AS (
        SELECT 'queued' AS status, coalesce(sum(e.due) FILTER (WHERE NOT e.due_over), 0)
            + coalesce(sum(e.later) FILTER (WHERE NOT e.later_over), 0) AS n
        FROM per_ep AS e
        UNION ALL
        SELECT 'dead', coalesce(sum(d.n) FILTER (WHERE d.n <= v_share_dead), 0) FROM dead_counts AS d
    ),
    -- Within an entrypoint whose due and scheduled counts both went over, the weight is
    -- split by what was counted of each.
    estimates AS (
        SELECT
            o.ep, o.kind,
            greatest(
                o.counted,
                round(
                    (t.n - x.n) * o.weight * o.counted
                    / sum(o.weight * o.counted) OVER (PARTITION BY o.status)
                )
            )::bigint AS n
        FROM over AS o
        INNER JOIN totals AS t ON o.status = t.status
        INNER JOIN exact_sums AS x ON o.status = x.status
    ),
    -- Per entrypoint: the estimates, and the running and waiting jobs.
    est AS (
        SELECT
            x.ep,
            max(x.n) FILTER (WHERE x.kind = 'due') AS due,
            max(x.n) FILTER (WHERE x.kind = 'later') AS later,
            max(x.n) FILTER (WHERE x.kind = 'dead') AS dead
        FROM estimates AS x
        GROUP BY x.ep
    ),
    live AS (
        SELECT l.ep, sum(l.running)::bigint AS running, sum(l.waiting)::bigint AS waiting
        FROM (
            SELECT j.entrypoint AS ep, count(*) AS running, 0 AS waiting
            FROM pgq._jobs AS j WHERE j.status = 'running' GROUP BY j.entrypoint
            UNION ALL
            SELECT j.entrypoint, 0, count(*)
            FROM pgq._jobs AS j WHERE j.status = 'waiting' GROUP BY j.entrypoint
        ) AS l
        GROUP BY l.ep
    ),
    eps AS (
        SELECT e.ep FROM per_ep AS e
        UNION
        SELECT d.ep FROM dead_counts AS d
        UNION
        SELECT l.ep FROM live AS l
    )
    SELECT
        eps.ep,
        coalesce(x.due, q.due, 0),
        coalesce(x.later, q.later, 0),
        coalesce(l.waiting, 0),
        coalesce(l.running, 0),
        coalesce(x.dead, d.n, 0),
        now() - q.oldest,
        coalesce(q.due_over OR q.later_over, FALSE) OR coalesce(d.n > v_share_dead, FALSE)
    FROM eps
    LEFT JOIN per_ep AS q ON eps.ep = q.ep
    LEFT JOIN dead_counts AS d ON eps.ep = d.ep
    LEFT JOIN est AS x ON eps.ep = x.ep
    LEFT JOIN live AS l ON eps.ep = l.ep;
END
$$;

-- ==== sql/functions/_raise_mark.sql ====
-- pgq._raise_mark(entrypoint): move the entrypoint's claim mark up to its first queued job,
-- so that claims start their index scan there instead of walking the entries of every job
-- claimed since the oldest snapshot (vacuum cannot remove them while a long transaction, a
-- report or pg_dump holds that snapshot). pgq.claim calls it every 0.2 s or so.
-- Safe because no producer that could lower the mark is between writing a queued job and
-- committing while this runs: each holds the mark lock in share mode (pgq._lower_mark),
-- which this takes exclusively without waiting. Producers that come while this
-- transaction holds it wait for its end and then read the new mark; those that stop
-- waiting after 50 ms record a low, which commits with their job. The search runs in a
-- snapshot taken after the lock (READ COMMITTED only), from the lesser of the mark and the
-- lows it sees, and deletes just those lows: a low it cannot see yet is left for claims
-- and the next raise.
-- The mark trails the present by a second within its priority, so that producers whose
-- transactions overlap (a job's run_at defaults to its transaction's start) land above it
-- rather than lower it; claims walk that second's entries. With no queued job, the mark
-- keeps its priority level (or 0) and moves to a second ago.
-- Returns whether the mark was raised (FALSE: a producer is in flight, a verify holds the
-- mark row, or not READ COMMITTED).
CREATE OR REPLACE FUNCTION pgq._raise_mark(entrypoint text)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_mark record;
    v_low record;
    v_seen tid[];
    v_np bigint;
    v_run timestamptz;
    v_id bigint;
    v_first record;
    v_level bigint;
    v_trail timestamptz := clock_timestamp() - interval '1 second';
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed'
       OR NOT pg_try_advisory_xact_lock(7366514, hashtext(_raise_mark.entrypoint)) THEN
        RETURN FALSE;
    END IF;
    -- The mark row is locked without waiting: a claim's pgq._verify_mark holds it until that
    -- claim commits, and that claim's own raises may be waiting for a mark row this
    -- transaction holds (another entrypoint's): waiting here would close the cycle (40P01).
    -- A held row leaves the mark to the next claim. Producers that hold it also hold the
    -- mark lock in share mode, which this raise excludes.
    SELECT m.neg_priority, m.run_at, m.id INTO v_mark
    FROM pgq._marks AS m WHERE m.entrypoint = _raise_mark.entrypoint
    FOR NO KEY UPDATE SKIP LOCKED;
    IF NOT FOUND AND EXISTS (SELECT 1 FROM pgq._marks AS m WHERE m.entrypoint = _raise_mark.entrypoint) THEN
        RETURN FALSE;
    END IF;
    SELECT array_agg(l.ctid) INTO v_seen FROM pgq._mark_lows AS l WHERE l.entrypoint = _raise_mark.entrypoint;
    SELECT l.neg_priority, l.run_at, l.id INTO v_low
    FROM pgq._mark_lows AS l WHERE l.ctid = ANY (v_seen)
    ORDER BY l.neg_priority, l.run_at, l.id
    LIMIT 1;
    -- Where the claims start now: the lesser of the mark and the lows (the front if no mark).
    IF v_mark.id IS NULL THEN
        v_np := -2147483648;
        v_run := '-infinity';
        v_id := 0;
    ELSIF v_low.id IS NOT NULL
          AND ROW(v_low.neg_priority, v_low.run_at, v_low.id) < ROW(v_mark.neg_priority, v_mark.run_at, v_mark.id) THEN
        v_np := v_low.neg_priority;
        v_run := v_low.run_at;
        v_id := v_low.id;
    ELSE
        v_np := v_mark.neg_priority;
        v_run := v_mark.run_at;
        v_id := v_mark.id;
    END IF;
    SELECT -j.priority::bigint AS neg_priority, j.run_at, j.id INTO v_first
    FROM pgq._jobs AS j
    WHERE j.entrypoint = _raise_mark.entrypoint AND j.status = 'queued'
      AND ROW(-j.priority::bigint, j.run_at, j.id) >= ROW(v_np, v_run, v_id)
    ORDER BY -j.priority::bigint, j.run_at, j.id
    LIMIT 1;
    v_level := coalesce(v_first.neg_priority, v_mark.neg_priority, 0);
    IF v_first.id IS NOT NULL AND ROW(v_first.neg_priority, v_first.run_at, v_first.id)
                                  <= ROW(v_level, v_trail, 0::bigint) THEN
        v_np := v_first.neg_priority;
        v_run := v_first.run_at;
        v_id := v_first.id;
    ELSE
        v_np := v_level;
        v_run := v_trail;
        v_id := 0;
    END IF;
    INSERT INTO pgq._marks AS m (entrypoint, neg_priority, run_at, id, raised_at, verified_at)
    VALUES (_raise_mark.entrypoint, v_np, v_run, v_id, clock_timestamp(), clock_timestamp())
    ON CONFLICT ON CONSTRAINT _marks_pkey DO UPDATE
    SET neg_priority = excluded.neg_priority, run_at = excluded.run_at, id = excluded.id,
        raised_at = excluded.raised_at;
    DELETE FROM pgq._mark_lows AS l WHERE l.ctid = ANY (v_seen) AND l.entrypoint = _raise_mark.entrypoint;
    RETURN TRUE;
END
$$;

COMMENT ON FUNCTION pgq._raise_mark(text) IS
'Internal: move the claim mark of an entrypoint up to its first queued job (see docs/held-snapshot.md).';

-- ==== sql/functions/_reap.sql ====
-- pgq._reap(thorough): the sweep behind pgq.reap (see there for the rules). Its cost does
-- not grow with the jobs claimed since the oldest snapshot, which leaves an entry in the
-- running index for each of them (docs/held-snapshot.md):
-- - the jobs of workers that stopped or were found dead are looked up per worker, by id,
--   and only for workers whose jobs were not all given back yet (released_at);
-- - timeouts read only the running jobs started before the shortest timeout plus lease
--   (pgq._timed_out).
-- thorough also walks every running job for the ones whose worker row is missing or whose
-- worker is not alive though marked released (neither should happen: rows are deleted
-- only when no job refers to them, and see pgq._release_gone); pgq.reap and pgq.sweep are
-- thorough (pg_cron, the workers' minute sweep), heartbeats and registrations are not.
-- Bounded, so that it never cancels its caller under a statement_timeout (docs/errors.md
-- does not list it: nothing is raised): the light form acts on at most 200 jobs per call
-- (a heartbeat, a registration; a fleet of silent workers drains a batch per beat, and
-- through the sweeps), and starts no batch after a quarter of the statement's timeout;
-- thorough does all the work, but starts no batch after half of it. The first batch of a
-- call starts whatever the time (a new session, such as pg_cron's, spends the first
-- milliseconds planning). Batches start at 50 jobs and double, up to 1000, while one takes
-- under a quarter of the time left, so that even a short timeout lets one finish.
-- Each step runs in a subtransaction: when the timeout (or a lock_timeout) strikes anyway,
-- that step is undone, what the steps before it did is kept, and the call returns: a
-- sweep that is cut short still frees what it reached (a WARNING says so).
CREATE OR REPLACE FUNCTION pgq._reap(thorough boolean)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_dead uuid[];
    v_stopped uuid[];
    v_count integer := 0;
    v_worker record;
    v_job record;
    -- Jobs this call may still act on (NULL: no bound).
    v_left integer := CASE WHEN thorough THEN NULL ELSE 200 END;
    v_until timestamptz := pgq._sweep_deadline(CASE WHEN thorough THEN 0.5 ELSE 0.25 END);
    v_size integer := 50;
    v_batch integer;
    v_began timestamptz;
    v_batches integer := 0;
    v_n integer;
BEGIN
    -- Key: 'pgq' in ASCII, then 1 for the sweep.
    IF NOT pg_try_advisory_xact_lock(7366513, 1) THEN
        RETURN 0;
    END IF;

    -- A worker paces its heartbeats by the lease it learned at its last beat: a lease
    -- shortened since then applies to it only from its next beat. A worker row that is
    -- locked is skipped until the next sweep: a claim holds it until it commits, and one
    -- left open in a transaction must not stop this sweep (and, under its lock, every
    -- other) from reaping the other workers.
    BEGIN
        UPDATE pgq._workers AS w
        SET state = 'dead', stopped_at = now()
        WHERE w.id IN (
            SELECT s.id
            FROM pgq._workers AS s
            WHERE s.state = 'alive'
              AND s.heartbeat_at < now() - greatest(s.lease, (
                  SELECT min(coalesce(q.lease, d.lease))
                  FROM unnest(s.entrypoints) AS e (ep)
                  CROSS JOIN pgq._default_settings AS d
                  LEFT JOIN pgq._queues AS q ON q.entrypoint = e.ep
              ))
            FOR NO KEY UPDATE SKIP LOCKED
        );
    EXCEPTION WHEN query_canceled OR lock_not_available THEN
        RAISE WARNING 'pgq: sweep cut short: % (%)', sqlerrm, sqlstate;
        RETURN v_count;
    END;

    -- Jobs of workers that are not alive go back. A worker that died lost them: that
    -- counts towards max_deliveries; one that unregistered did not. Once none of its jobs
    -- is left, a worker is not looked up again (pgq._release_gone).
    <<workers>>
    FOR v_worker IN
        SELECT w.id, w.state FROM pgq._workers AS w
        WHERE w.state <> 'alive' AND w.released_at IS NULL
        ORDER BY w.id
    LOOP
        LOOP
            EXIT workers WHEN v_left <= 0 OR (v_batches > 0 AND clock_timestamp() >= v_until);
            v_batch := least(v_left, v_size);
            v_began := clock_timestamp();
            v_batches := v_batches + 1;
            BEGIN
                v_n := pgq._release_gone(v_worker.id, v_worker.state = 'dead', v_batch);
            EXCEPTION WHEN query_canceled OR lock_not_available THEN
                RAISE WARNING 'pgq: sweep cut short: % (%)', sqlerrm, sqlstate;
                RETURN v_count;
            END;
            v_count := v_count + v_n;
            v_left := v_left - v_n;
            EXIT WHEN v_n < v_batch;
            IF v_size < 1000 AND (v_until = 'infinity'
                                  OR (clock_timestamp() - v_began) * 4 < v_until - clock_timestamp()) THEN
                v_size := v_size * 2;
            END IF;
        END LOOP;
    END LOOP;

    IF thorough AND clock_timestamp() < v_until THEN
        -- Orphans the loop above cannot see: running jobs whose worker row is gone (or
        -- was marked released wrongly). A worker whose row is gone counts as lost.
        BEGIN
            SELECT array_agg(DISTINCT j.worker_id) FILTER (WHERE w.state IS DISTINCT FROM 'stopped'),
                   array_agg(DISTINCT j.worker_id) FILTER (WHERE w.state = 'stopped')
            INTO v_dead, v_stopped
            FROM pgq._jobs AS j
            LEFT JOIN pgq._workers AS w ON w.id = j.worker_id
            WHERE j.status = 'running' AND w.state IS DISTINCT FROM 'alive';
            v_n := 0;
            IF v_dead IS NOT NULL THEN
                v_n := v_n + pgq._release(v_dead, '{}', TRUE);
            END IF;
            IF v_stopped IS NOT NULL THEN
                v_n := v_n + pgq._release(v_stopped, '{}', FALSE);
            END IF;
        EXCEPTION WHEN query_canceled OR lock_not_available THEN
            RAISE WARNING 'pgq: sweep cut short: % (%)', sqlerrm, sqlstate;
            RETURN v_count;
        END;
        v_count := v_count + v_n;
    END IF;

    -- Timeouts: the worker should have stopped the handler; it did not.
    IF (v_left IS NULL OR v_left > 0) AND clock_timestamp() < v_until THEN
        v_n := 0;
        BEGIN
            FOR v_job IN SELECT t.id, t.timeout FROM pgq._timed_out() AS t LOOP
                EXIT WHEN v_n >= v_left OR clock_timestamp() >= v_until;
                PERFORM pgq._fail(v_job.id, format('timeout: ran longer than %s', v_job.timeout), NULL);
                v_n := v_n + 1;
            END LOOP;
        EXCEPTION WHEN query_canceled OR lock_not_available THEN
            RAISE WARNING 'pgq: sweep cut short: % (%)', sqlerrm, sqlstate;
            RETURN v_count;
        END;
        v_count := v_count + v_n;
    END IF;

    BEGIN
        DELETE FROM pgq._workers AS w
        WHERE w.state <> 'alive' AND w.stopped_at < now() - interval '1 day'
          -- Only running jobs have a worker (_jobs_held_check): through _jobs_running_idx.
          -- `j.entrypoint >= ''` holds for every job: it bounds the first column of
          -- _jobs_running_idx so that PostgreSQL 18's planner skips through it by worker_id,
          -- as 14 to 17 do without it, instead of walking _jobs_started_idx and visiting the
          -- row of every entry (dead ones too, under a held snapshot).
          AND NOT EXISTS (
              SELECT 1 FROM pgq._jobs AS j
              WHERE j.status = 'running' AND j.entrypoint >= '' AND j.worker_id = w.id
          );
    EXCEPTION WHEN query_canceled OR lock_not_available THEN
        RAISE WARNING 'pgq: sweep cut short: % (%)', sqlerrm, sqlstate;
    END;
    RETURN v_count;
END
$$;

-- ==== sql/functions/_recent_success.sql ====
-- pgq._recent_success(entrypoint, dedupe_key, dedupe_window): the newest job of the
-- entrypoint with this dedupe key that succeeded within the window, or NULL (pgq.enqueue_job's
-- dedupe_window). VOLATILE on purpose: each call reads with a fresh snapshot, so a call made
-- after the key was taken sees a success committed while the enqueue waited for it.
CREATE OR REPLACE FUNCTION pgq._recent_success(entrypoint text, dedupe_key text, dedupe_window interval)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (
        SELECT o.job_id
        FROM pgq._outcomes AS o
        WHERE o.entrypoint = _recent_success.entrypoint AND o.dedupe_key = _recent_success.dedupe_key
          AND o.dedupe_key IS NOT NULL AND o.outcome = 'succeeded'
          AND o.finished_at >= now() - _recent_success.dedupe_window
        ORDER BY o.finished_at DESC
        LIMIT 1
    );
END
$$;

-- ==== sql/functions/_release.sql ====
-- pgq._release(worker_ids, keep, lost): running jobs held by these workers (stopped, dead,
-- or a live one that does not run them), except those in keep, go back to queued, or to
-- canceled when cancellation was requested. Rows are locked with SKIP LOCKED:
-- a job that another transaction is settling right now (a late complete, a cancel) is left
-- to it, and the sweep never waits or deadlocks; what is skipped, the next sweep finds.
-- lost: the workers were lost (reaped), so each job counts a lost delivery, and a job that
-- lost its worker max_deliveries times goes dead (a poison pill: it keeps killing its
-- worker) instead of being delivered again.
-- max_jobs (NULL: all): release at most that many (a sweep's batch; the rest stay held, for
-- the next batch or sweep).
-- claimed_before (NULL: any): only jobs claimed before then. A worker's own list of the jobs
-- it runs (keep) is true of the moment it was sent: a heartbeat or pgq.release the worker
-- gave up on (its deadline passed) can still run later, once a lock it waited for is free,
-- and must not release a job the worker claimed after it (the job would run twice at once).
-- Returns the number of jobs released, canceled or killed.
CREATE OR REPLACE FUNCTION pgq._release(
    worker_ids uuid[],
    keep bigint[] DEFAULT '{}',
    lost boolean DEFAULT FALSE,
    max_jobs integer DEFAULT NULL,
    claimed_before timestamptz DEFAULT NULL
)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_ids bigint[];
    v_canceled bigint[];
    v_dead bigint[];
    v_released integer;
    v_entrypoints text[];
    v_now timestamptz := clock_timestamp();
BEGIN
    -- One lookup per worker, by equality: the running index then skips the entries of
    -- other workers inside the index, without visiting their rows (`= ANY` on its second
    -- column is only a filter, checked on each row, and under a held snapshot the running
    -- index keeps an entry for every job claimed since). `j.entrypoint >= ''` holds for every
    -- job: it bounds the index's first column so that PostgreSQL 18's planner skips through
    -- it by worker_id, as 14 to 17 do without it, instead of walking _jobs_started_idx.
    SELECT array_agg(b.id ORDER BY b.id) INTO v_ids
    FROM (
        SELECT l.id
        FROM (SELECT DISTINCT u.id FROM unnest(worker_ids) AS u (id)) AS w
        CROSS JOIN LATERAL (
            SELECT j.id FROM pgq._jobs AS j
            WHERE j.status = 'running' AND j.entrypoint >= '' AND j.worker_id = w.id AND j.id <> ALL (keep)
              -- A claim's started_at is its transaction's start (or, rate-limited, a clock
              -- read later): a claim that began after the caller's statement is left alone.
              AND (_release.claimed_before IS NULL OR j.started_at < _release.claimed_before)
            LIMIT _release.max_jobs
            FOR UPDATE SKIP LOCKED
        ) AS l
        -- Rows past the limit are not fetched, so not locked.
        LIMIT _release.max_jobs
    ) AS b;
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;

    WITH canceled AS (
        DELETE FROM pgq._jobs AS j
        WHERE j.id = ANY (v_ids) AND j.cancel_requested
        RETURNING j.*
    ),
    logged AS (
        INSERT INTO pgq._outcomes (
            job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, started_at, finished_at,
            worker_id, error, payload, headers, depends_on, concurrency_key, enqueued_by
        )
        SELECT c.id, c.entrypoint, 'canceled', c.priority, c.attempt, c.deliveries, c.enqueued_at,
               c.started_at, v_now, c.worker_id, 'canceled while its worker was lost',
               c.payload, c.headers, c.depends_on, c.concurrency_key, c.enqueued_by
        FROM canceled AS c
    )
    SELECT array_agg(c.id) INTO v_canceled FROM canceled AS c;
    IF v_canceled IS NOT NULL THEN
        PERFORM pgq._cancel_dependents(v_canceled, 'a dependency was canceled');
    END IF;

    WITH held AS (
        SELECT k.id, k.worker_id,
               _release.lost AND cap.n > 0 AND k.lost + 1 >= cap.n AS poisoned, cap.n AS cap
        FROM pgq._jobs AS k
        LEFT JOIN pgq._queues AS q ON q.entrypoint = k.entrypoint
        CROSS JOIN LATERAL (
            SELECT coalesce(q.max_deliveries, d.max_deliveries) AS n FROM pgq._default_settings AS d
        ) AS cap
        -- Held means running (_jobs_held_check), and by the primary key: a test of status
        -- would let the planner walk the running index (see pgq.fail).
        WHERE k.id = ANY (v_ids) AND k.worker_id IS NOT NULL
    ),
    released AS (
        UPDATE pgq._jobs AS j
        SET status = CASE WHEN h.poisoned THEN 'dead' ELSE 'queued' END,
            lost = j.lost + CASE WHEN _release.lost THEN 1 ELSE 0 END,
            last_error = CASE WHEN h.poisoned
                THEN format('lost its worker %s times (max_deliveries %s): it may crash its worker',
                            j.lost + 1, h.cap)
                ELSE j.last_error END,
            worker_id = NULL,
            started_at = NULL
        FROM held AS h
        WHERE j.id = h.id
        RETURNING j.id, j.entrypoint, j.priority, j.attempt, j.deliveries, j.enqueued_at, j.last_error,
                  j.concurrency_key, h.poisoned, h.worker_id AS held_by
    ),
    logged AS (
        INSERT INTO pgq._outcomes (
            job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, finished_at, worker_id,
            error, fatal, concurrency_key
        )
        SELECT r.id, r.entrypoint, 'failed', r.priority, r.attempt, r.deliveries, r.enqueued_at, v_now,
               r.held_by, r.last_error, TRUE, r.concurrency_key
        FROM released AS r
        WHERE r.poisoned
    )
    SELECT count(*), array_agg(DISTINCT r.entrypoint) FILTER (WHERE NOT r.poisoned),
           array_agg(r.id) FILTER (WHERE r.poisoned)
    INTO v_released, v_entrypoints, v_dead
    FROM released AS r;
    IF v_dead IS NOT NULL THEN
        PERFORM pgq._cancel_dependents(v_dead, 'a dependency is dead');
    END IF;
    -- Wake workers for the released jobs.
    PERFORM pg_notify('pgq', e.ep) FROM unnest(v_entrypoints) AS e (ep);
    RETURN v_released + coalesce(cardinality(v_canceled), 0);
END
$$;

-- ==== sql/functions/_release_dependents.sql ====
-- pgq._release_dependents(job_ids): these jobs succeeded; their waiting dependents whose
-- dependencies have now all succeeded become queued. The dependents are locked first and
-- checked in a later statement, so that two dependencies completing at once in two
-- transactions cannot both miss the release (the second sees the first's commit).
CREATE OR REPLACE FUNCTION pgq._release_dependents(job_ids bigint[])
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_entrypoints text[];
BEGIN
    PERFORM 1 FROM pgq._jobs AS w
    WHERE w.status = 'waiting' AND w.depends_on && job_ids
    ORDER BY w.id
    FOR NO KEY UPDATE;

    WITH released AS (
        UPDATE pgq._jobs AS w
        SET status = 'queued', run_at = greatest(w.run_at, now())
        WHERE w.status = 'waiting' AND w.depends_on && job_ids
          AND NOT EXISTS (SELECT 1 FROM pgq._jobs AS d WHERE d.id = ANY (w.depends_on))
        RETURNING w.entrypoint
    )
    SELECT array_agg(DISTINCT r.entrypoint) INTO v_entrypoints FROM released AS r;
    PERFORM pg_notify('pgq', e.ep) FROM unnest(v_entrypoints) AS e (ep);
END
$$;

-- ==== sql/functions/_release_gone.sql ====
-- pgq._release_gone(worker_id, lost): the jobs of a worker that stopped or was found dead
-- go back (pgq._release; lost: it died, so each counts a lost delivery), and once none is
-- left the worker is marked released (released_at): the heartbeats' sweep never looks it
-- up again. That is safe because a worker that is not alive never claims again: a claim
-- that took jobs holds its worker's row (FOR SHARE, see pgq.claim), so the statement that
-- ended the worker either waited for that claim, and this one sees its jobs, or came
-- first, and the claim failed. A job skipped because another transaction holds it (a late
-- complete) keeps the worker unreleased: the next sweep looks again.
-- max_jobs (NULL: all): release at most that many; the worker stays unreleased while it
-- holds any, and the next call goes on.
-- Returns the number of jobs released, canceled or killed.
CREATE OR REPLACE FUNCTION pgq._release_gone(worker_id uuid, lost boolean, max_jobs integer DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_count integer;
BEGIN
    v_count := pgq._release(ARRAY[worker_id], '{}', lost, max_jobs);
    UPDATE pgq._workers AS w
    SET released_at = now()
    WHERE w.id = _release_gone.worker_id AND w.state <> 'alive' AND w.released_at IS NULL
      -- `j.entrypoint >= ''` holds for every job: it bounds the first column of _jobs_running_idx
      -- so that PostgreSQL 18's planner skips through it by worker_id, as 14 to 17 do without it,
      -- instead of walking _jobs_started_idx and visiting the row of every entry (dead ones too,
      -- under a held snapshot).
      AND NOT EXISTS (
          SELECT 1 FROM pgq._jobs AS j
          WHERE j.status = 'running' AND j.entrypoint >= '' AND j.worker_id = _release_gone.worker_id
      );
    RETURN v_count;
END
$$;

-- ==== sql/functions/_sweep.sql ====
-- pgq._sweep(with_prune): the periodic maintenance, each task in a subtransaction of its
-- own so that one failing task neither fails the caller nor undoes the others (it is
-- reported as a WARNING): the reap (pgq._reap, thorough when with_prune: heartbeats run
-- the light form, pgq.sweep the whole), pgq.run_schedules (an index lookup when nothing
-- is due), and, when with_prune, pgq.prune if the last prune is over two hours old
-- (pg_cron prunes hourly, so with pg_cron the workers never do).
-- A statement_timeout (or a cancel) that strikes inside a task is caught like any failure
-- (WHEN OTHERS does not catch query_canceled: it is named), so it cannot fail a heartbeat;
-- once the statement is past three quarters of its timeout, the tasks not begun are left
-- to the next call.
-- Returns the number of jobs pgq.reap acted on. with_prune defaults to FALSE: 0.1.0's
-- heartbeat calls pgq._sweep(), and one of its calls under way while an upgrade commits
-- then looks the function up again.
CREATE OR REPLACE FUNCTION pgq._sweep(with_prune boolean DEFAULT FALSE)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_reaped integer := 0;
    v_until timestamptz := pgq._sweep_deadline(0.75);
BEGIN
    BEGIN
        v_reaped := pgq._reap(with_prune);
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        RAISE WARNING 'pgq: reap failed: % (%)', sqlerrm, sqlstate;
    END;
    IF clock_timestamp() >= v_until THEN
        RETURN v_reaped;
    END IF;
    BEGIN
        PERFORM pgq.run_schedules();
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        RAISE WARNING 'pgq: run_schedules failed: % (%)', sqlerrm, sqlstate;
    END;
    IF with_prune AND clock_timestamp() < v_until AND NOT EXISTS (
        SELECT 1 FROM pgq._maintenance AS m
        WHERE m.task = 'prune' AND m.last_run > now() - interval '2 hours'
    ) THEN
        BEGIN
            PERFORM pgq.prune();
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            RAISE WARNING 'pgq: prune failed: % (%)', sqlerrm, sqlstate;
        END;
    END IF;
    RETURN v_reaped;
END
$$;

-- ==== sql/functions/_sweep_deadline.sql ====
-- pgq._sweep_deadline(share): the time after which maintenance running inside the current
-- statement starts no new batch: the statement's start plus share of its statement_timeout
-- (a DBA's or a managed service's setting, often on the role), or the transaction's start
-- plus share of its transaction_timeout (PostgreSQL 17 and newer: it ends the session, which
-- no subtransaction can catch), whichever comes first; infinity when neither is set. Keeps the rest of the statement (a heartbeat's own work, a sweep's other tasks)
-- inside the timeout, so that maintenance that is due never cancels its caller.
CREATE OR REPLACE FUNCTION pgq._sweep_deadline(share double precision)
RETURNS timestamptz
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT least(
        CASE WHEN s.span > interval '0' THEN statement_timestamp() + s.span * share ELSE 'infinity' END,
        CASE WHEN t.span > interval '0' THEN transaction_timestamp() + t.span * share ELSE 'infinity' END
    )
    FROM (SELECT current_setting('statement_timeout')::interval AS span) AS s,
        -- NULL before PostgreSQL 17, which has no transaction_timeout.
        (SELECT coalesce(current_setting('transaction_timeout', TRUE), '0')::interval AS span) AS t
$$;

COMMENT ON FUNCTION pgq._sweep_deadline(double precision) IS
'Internal: when maintenance inside this statement must stop starting batches (a share of statement_timeout or transaction_timeout).';

-- ==== sql/functions/_timed_out.sql ====
-- pgq._timed_out(): the running jobs past their entrypoint's timeout plus lease, locked
-- (SKIP LOCKED: a job being settled right now is left to its settler), with that timeout.
-- Reads _jobs_started_idx from its start to now() - the shortest timeout plus lease, so
-- that a held snapshot's dead entries of jobs claimed since are not visited. Sorting is
-- turned off for it: the planner, which counts few running jobs, would otherwise take a
-- full walk of the running index and a sort as just as cheap.
CREATE OR REPLACE FUNCTION pgq._timed_out()
RETURNS TABLE (id bigint, timeout interval)
LANGUAGE sql
VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_sort = off
AS $$
    WITH shortest AS (
        SELECT least(d.timeout + d.lease, min(coalesce(q.timeout, d.timeout) + coalesce(q.lease, d.lease))) AS span
        FROM pgq._default_settings AS d
        LEFT JOIN pgq._queues AS q ON TRUE
        GROUP BY d.timeout, d.lease
    )
    SELECT j.id, coalesce(q.timeout, d.timeout)
    FROM pgq._jobs AS j
    CROSS JOIN pgq._default_settings AS d
    LEFT JOIN pgq._queues AS q ON q.entrypoint = j.entrypoint
    WHERE j.status = 'running'
      AND j.started_at < now() - (SELECT s.span FROM shortest AS s)
      AND j.started_at < now() - coalesce(q.timeout, d.timeout) - coalesce(q.lease, d.lease)
    ORDER BY j.started_at
    FOR UPDATE OF j SKIP LOCKED
$$;

-- ==== sql/functions/_verify_mark.sql ====
-- pgq._verify_mark(entrypoint): look for a queued job of entrypoint that sorts before its
-- mark and all of its lows, which the protocol of pgq._raise_mark and pgq._lower_mark
-- never leaves (jobs written while the triggers of pgq._jobs were disabled would be one).
-- Claims would pass such a job over, even when it is the only one due, so pgq.claim runs
-- this every 30 s per entrypoint whether it took jobs or not. A job found is reported with
-- a WARNING and given a low, so the next claim starts at it.
-- Takes no lock: the job, the mark and the lows are read in one snapshot, in which a job and
-- its producer's lowered mark or low are both visible or both not. The search walks from
-- the front, the entries a held snapshot keeps included: a few hundred milliseconds at a
-- million, which no producer waits for.
CREATE OR REPLACE FUNCTION pgq._verify_mark(entrypoint text)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_job record;
BEGIN
    SELECT f.neg_priority, f.run_at, f.id INTO v_job
    FROM (
        SELECT -j.priority::bigint AS neg_priority, j.run_at, j.id
        FROM pgq._jobs AS j
        WHERE j.entrypoint = _verify_mark.entrypoint AND j.status = 'queued'
        ORDER BY -j.priority::bigint, j.run_at, j.id
        LIMIT 1
    ) AS f
    INNER JOIN pgq._marks AS m ON m.entrypoint = _verify_mark.entrypoint
    -- A keyed entrypoint's claims ignore the mark (one left from before it became keyed).
    LEFT JOIN pgq._queues AS q ON q.entrypoint = _verify_mark.entrypoint
    WHERE ROW(f.neg_priority, f.run_at, f.id) < ROW(m.neg_priority, m.run_at, m.id)
      AND NOT coalesce(q.keyed, FALSE)
      AND NOT EXISTS (
          SELECT 1 FROM pgq._mark_lows AS l
          WHERE l.entrypoint = _verify_mark.entrypoint
            AND ROW(l.neg_priority, l.run_at, l.id) <= ROW(f.neg_priority, f.run_at, f.id)
      );
    IF FOUND THEN
        RAISE WARNING 'pgq: queued job % of % was below the claim mark; it is given a low', v_job.id,
            _verify_mark.entrypoint;
        INSERT INTO pgq._mark_lows (entrypoint, neg_priority, run_at, id)
        VALUES (_verify_mark.entrypoint, v_job.neg_priority, v_job.run_at, v_job.id);
    END IF;
    -- Not behind a producer that holds the row (it is lowering the mark): the next claim.
    UPDATE pgq._marks AS m SET verified_at = clock_timestamp()
    WHERE m.ctid = (
        SELECT k.ctid FROM pgq._marks AS k WHERE k.entrypoint = _verify_mark.entrypoint FOR NO KEY UPDATE SKIP LOCKED
    );
END
$$;

COMMENT ON FUNCTION pgq._verify_mark(text) IS
'Internal: find a queued job below the claim mark of an entrypoint (a defect), report and repair it.';

-- ==== sql/functions/cancel.sql ====
-- pgq.cancel: queued and waiting jobs are canceled at once (they leave the hot table; the
-- outcome 'canceled' is logged); dead jobs are discarded (outcome 'dead'). For a running
-- job, cancellation is requested: its worker is notified at once, learns which jobs from
-- the heartbeat it then sends, and stops the handler; the job then ends canceled (if the
-- handler still finishes, it ends succeeded). Unknown or finished ids
-- are ignored. Jobs waiting for a canceled job (depends_on) are canceled too.
-- The jobs are locked in id order first, and then acted on as they are once locked: a
-- cancel never deadlocks with a completion (which locks a job, then its dependents), and
-- one that waited for a pgq.fail in flight cancels the job that fail re-queued.
-- Returns the number of jobs canceled or marked for cancellation (not counting the
-- dependents canceled with them). Raises PQ001.
CREATE OR REPLACE FUNCTION pgq.cancel(job_ids bigint[])
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty):
-- tests/py/test_empty_queue_plans.py says why; JIT off, which that cost would start.
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_canceled integer;
    v_requested integer;
    v_parents bigint[];
    v_holders uuid[];
BEGIN
    PERFORM pgq._check_ids('job_ids', job_ids);
    PERFORM 1 FROM pgq._jobs AS j WHERE j.id = ANY (job_ids) ORDER BY j.id FOR UPDATE;
    WITH canceled AS (
        DELETE FROM pgq._jobs AS j
        WHERE j.id = ANY (job_ids) AND j.status IN ('queued', 'waiting', 'dead')
        RETURNING j.*
    ),
    logged AS (
        INSERT INTO pgq._outcomes (
            job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, error,
            payload, headers, depends_on, concurrency_key, enqueued_by
        )
        SELECT c.id, c.entrypoint, CASE WHEN c.status = 'dead' THEN 'dead' ELSE 'canceled' END,
               c.priority, c.attempt, c.deliveries, c.enqueued_at,
               CASE WHEN c.status = 'dead' THEN c.last_error ELSE 'canceled by pgq.cancel' END,
               c.payload, c.headers, c.depends_on, c.concurrency_key, c.enqueued_by
        FROM canceled AS c
    )
    SELECT count(*), array_agg(c.id) INTO v_canceled, v_parents
    FROM canceled AS c;
    IF v_parents IS NOT NULL THEN
        PERFORM pgq._cancel_dependents(v_parents, 'a dependency was canceled');
    END IF;

    -- The holders are told at once (NOTIFY pgq, payload 'cancel:<worker id>'): their next
    -- heartbeat, which they send when told, returns the ids to stop.
    WITH requested AS (
        UPDATE pgq._jobs AS j
        SET cancel_requested = TRUE
        -- Running jobs are those with a worker (_jobs_held_check); tested that way, the
        -- planner keeps to the primary key instead of walking the running index (see
        -- pgq.complete).
        WHERE j.id = ANY (job_ids) AND j.worker_id IS NOT NULL AND NOT j.cancel_requested
        RETURNING j.worker_id
    )
    SELECT count(*), array_agg(DISTINCT r.worker_id) INTO v_requested, v_holders FROM requested AS r;
    PERFORM pg_notify('pgq', 'cancel:' || h.id) FROM unnest(v_holders) AS h (id);
    RETURN v_canceled + v_requested;
END
$$;

COMMENT ON FUNCTION pgq.cancel(bigint[]) IS
'Cancel jobs: queued, waiting and dead at once, running ones at their next heartbeat; returns how many.';

-- ==== sql/functions/claim.sql ====
-- pgq.claim: take up to batch_size due jobs of the given entrypoints for a worker.
-- Order: highest priority first, then earliest run_at, then id. Never a job another worker
-- holds (FOR UPDATE SKIP LOCKED); paused entrypoints and waiting jobs are skipped.
-- Limits are decided under a lock on the entrypoint's settings row, so concurrent claims
-- cannot exceed them: with a concurrency limit an entrypoint gets at most (limit - running)
-- jobs; with a rate, at most the whole tokens of its bucket, which refills at `rate` per
-- second up to max(1, rate/10) tokens (so no 1-second window sees more than about
-- 1.1 * rate starts). Entrypoints without limits take no lock beyond the claimed rows, so
-- a limit (or a first keyed job) committed while such a claim runs may be exceeded by that
-- claim's jobs, once: the claims after it count them. A claim that finds an entrypoint
-- limited only after its check of the limits takes none of its jobs.
-- Keys: an entrypoint that has jobs with a concurrency key (pgq.enqueue's concurrency_key)
-- is claimed under the same lock, by a path of its own. Priority still comes first; within
-- a priority the claim rotates among keys: each key's oldest due job comes before any key's
-- second one, and keys take turns in key order from where the last claim ended (the
-- entrypoint's key_cursor), so a key with 100000 queued jobs does not delay one with 10.
-- Jobs without a key in such an entrypoint take part as one key of their own. With
-- key_concurrency, a key gets at most (limit - its running jobs); 1 runs a key's jobs one at
-- a time, in claim order (per-key FIFO; a failed job waits for its retry, and the key's next
-- job may run meanwhile). The work grows with the number of keys that have queued jobs.
-- Entrypoints without keyed jobs take none of this.
-- The scan of an entrypoint's queued jobs starts at its low-water mark, not at its front:
-- a long transaction keeps the index entries of every job claimed since its snapshot, and
-- the mark skips them. Claims move the mark along and check it (docs/held-snapshot.md).
-- Two call shapes, one implementation. A call shape keeps its result shape across releases
-- (a worker of an older release builds its jobs from these rows while an upgrade runs):
-- new columns come only through a new form. This file holds both:
--   pgq.claim(worker_id, entrypoints, batch_size, protocol => 2): this function, the row
--     of claim protocol 2 (0.2.0 on), which adds concurrency_key;
--   pgq.claim(worker_id, entrypoints[, batch_size]): the row of 0.1.0 (protocol 1), the
--     same claim with only its columns (below).
-- A release that adds a column adds a form for it and keeps these two as they are.
-- Parameters: worker_id (from pgq.register_worker); entrypoints (a subset of those the
--   worker registered); batch_size (1 to 10000; default 1 in the 0.1.0 form); protocol
--   (2: the row shape this form returns).
-- Returns the claimed jobs in claim order (empty when nothing is due); max_attempts is the
-- effective value and timeout the entrypoint's. Each has deliveries + 1: a job
-- with deliveries > 1 was delivered before (a crash, a lost lease, a release).
-- Raises PQ001 for invalid arguments (a protocol other than 2 among them), PQ002 unknown
-- worker, PQ003 worker no longer alive, PQ007 for a concurrency-limited entrypoint claimed
-- in REPEATABLE READ or SERIALIZABLE.
CREATE OR REPLACE FUNCTION pgq.claim(worker_id uuid, entrypoints text[], batch_size integer, protocol integer)
RETURNS TABLE (
    id bigint,
    entrypoint text,
    payload jsonb,
    headers jsonb,
    priority integer,
    attempt integer,
    deliveries integer,
    enqueued_at timestamptz,
    run_at timestamptz,
    max_attempts integer,
    timeout interval,
    concurrency_key text
)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty):
-- tests/py/test_empty_queue_plans.py says why; JIT off, which that cost would start.
SET enable_seqscan = off
SET jit = off
-- Its statements are written to plan well without knowing the arguments: planning them
-- on every call would cost a tenth of the claim.
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_registered text[];
    v_role name;
    v_state text;
    v_limited text[] := '{}';
    v_allowed integer[] := '{}';
    v_queue record;
    v_running integer;
    v_allow integer;
    v_rated text[] := '{}';
    v_tokens double precision[] := '{}';
    v_stamps timestamptz[] := '{}';
    v_now timestamptz;
    v_bucket double precision;
    v_keyed text[] := '{}';
    v_keyed_ids bigint[] := '{}';
    v_ids bigint[];
    v_claimed bigint;
    v_verify text[];
    v_raise text[];
BEGIN
    -- One read of the worker's row decides the checks of a well-formed call (an idle
    -- worker polls often); anything else takes the checks below, which raise.
    SELECT w.registered_by, w.state, w.entrypoints INTO v_role, v_state, v_registered
    FROM pgq._workers AS w
    WHERE w.id = claim.worker_id;
    -- Entrypoints the worker registered were checked by pgq.register_worker (<@ is
    -- false for a NULL element). IS NOT TRUE: a NULL argument takes the checks.
    IF (
        FOUND AND v_state = 'alive' AND (v_role IS NULL OR v_role = session_user)
        AND batch_size BETWEEN 1 AND 10000
        AND cardinality(entrypoints) BETWEEN 1 AND 1000 AND array_ndims(entrypoints) = 1
        AND entrypoints <@ v_registered AND protocol = 2
    ) IS NOT TRUE THEN
        IF protocol IS DISTINCT FROM 2 THEN
            PERFORM pgq._invalid('protocol', format('%s is not a claim protocol', coalesce(protocol::text, 'NULL')),
                'protocol => 2 returns the rows of 0.2.0 on; call pgq.claim without protocol for those of 0.1.0.');
        END IF;
        PERFORM pgq._check_worker_role(worker_id);
        IF batch_size IS NULL OR batch_size < 1 OR batch_size > 10000 THEN
            PERFORM pgq._invalid('batch_size', format('%s is out of range', coalesce(batch_size::text, 'NULL')),
                'Claim 1 to 10000 jobs at a time.');
        END IF;
        PERFORM pgq._check_entrypoints('entrypoints', entrypoints);
        v_registered := pgq._check_worker(worker_id);
        IF NOT entrypoints <@ v_registered THEN
            PERFORM pgq._invalid('entrypoints', 'includes entrypoints the worker did not register',
                format('This worker registered %s.', v_registered));
        END IF;
    END IF;

    -- Limits: lock the settings rows in a fixed order (no deadlocks), then count running
    -- jobs in a fresh snapshot taken after the lock was granted.
    FOR v_queue IN
        SELECT q.entrypoint, q.concurrency, q.rate, q.rate_tokens, q.rate_refilled_at, q.keyed, q.key_concurrency,
               q.key_cursor
        FROM pgq._queues AS q
        WHERE q.entrypoint = ANY (entrypoints) AND (q.concurrency IS NOT NULL OR q.rate IS NOT NULL OR q.keyed)
          AND NOT q.paused
        ORDER BY q.entrypoint
        FOR NO KEY UPDATE
    LOOP
        v_allow := claim.batch_size;
        IF v_queue.concurrency IS NOT NULL OR v_queue.key_concurrency IS NOT NULL THEN
            -- The count must see claims that committed while this one waited for the lock:
            -- only READ COMMITTED takes a fresh snapshot per statement.
            IF current_setting('transaction_isolation') <> 'read committed' THEN
                RAISE EXCEPTION 'pgq: claim of % needs READ COMMITTED, not %', v_queue.entrypoint,
                    current_setting('transaction_isolation')
                    USING ERRCODE = 'PQ007',
                    DETAIL = 'Its concurrency limit is counted under a lock; an older snapshot would miss running jobs.',
                    HINT = 'Call pgq.claim outside explicit REPEATABLE READ or SERIALIZABLE transactions.';
            END IF;
        END IF;
        IF v_queue.concurrency IS NOT NULL THEN
            SELECT count(*) INTO v_running
            FROM pgq._jobs AS j
            WHERE j.entrypoint = v_queue.entrypoint AND j.status = 'running';
            v_allow := least(v_allow, greatest(v_queue.concurrency - v_running, 0));
        END IF;
        IF v_queue.rate IS NOT NULL THEN
            -- The wall clock once the lock is ours, not now(): this claim may have waited.
            v_now := clock_timestamp();
            v_bucket := greatest(1, v_queue.rate / 10);
            v_bucket := least(
                v_bucket,
                coalesce(v_queue.rate_tokens, v_bucket)
                + v_queue.rate * extract(EPOCH FROM v_now - coalesce(v_queue.rate_refilled_at, v_now))
            );
            v_allow := least(v_allow, greatest(floor(v_bucket), 0)::integer);
            v_rated := v_rated || v_queue.entrypoint;
            v_tokens := v_tokens || v_bucket;
            v_stamps := v_stamps || v_now;
        END IF;
        IF v_queue.keyed AND v_allow > 0 THEN
            v_ids := pgq._claim_keyed(v_queue.entrypoint, v_allow, v_queue.key_concurrency, v_queue.key_cursor);
            IF cardinality(v_ids) > 0 THEN
                -- The key the claim ended on: the next claim starts after it.
                UPDATE pgq._queues AS q
                SET key_cursor = (SELECT coalesce(j.concurrency_key, '') FROM pgq._jobs AS j
                                  WHERE j.id = v_ids[cardinality(v_ids)])
                WHERE q.entrypoint = v_queue.entrypoint;
                v_keyed_ids := v_keyed_ids || v_ids;
            END IF;
        END IF;
        IF v_queue.keyed THEN
            -- The general path below takes nothing of it.
            v_keyed := v_keyed || v_queue.entrypoint;
        END IF;
        v_limited := v_limited || v_queue.entrypoint;
        v_allowed := v_allowed || v_allow;
    END LOOP;

    -- Three statements, each cached as one generic plan (PL/pgSQL would otherwise plan
    -- each call, a tenth of the claim's cost), so that each kind of claim initializes only
    -- the plan it needs (starting a plan costs in proportion to its nodes, on every call):
    -- entrypoints without limits, keys or rates (most claims, and every idle poll); limits
    -- without keyed jobs claimed (the same plan as before keys existed); keyed jobs chosen
    -- by pgq._claim_keyed. Each must be good as a generic plan: the batch is updated by an
    -- array (a join with the candidates turns into a hash join over the whole table when
    -- the planner guesses the batch large). The first statement's array holds the ctids of
    -- the rows it locked (a TID scan; the others walk the primary key with ids), which
    -- saves a descent of the primary key per job, about 5% of the claim's server CPU: a
    -- locked row cannot move, and a row that another transaction changed between this
    -- statement's snapshot and the lock is not visible at its new ctid, so it is not
    -- updated nor returned; it stays locked until this claim commits, then queued for the
    -- next one. pgq._entrypoints_to_claim (inlined) says where each entrypoint's scan starts,
    -- and which entrypoints have limits now: one that this call did not lock above (it
    -- was paused, or had no limit or keyed job yet) gets nothing, so that a resume, a
    -- configure or a first keyed job committed since cannot let it past its limits.
    IF cardinality(v_limited) = 0 THEN
        RETURN QUERY
        WITH allowance AS (
            SELECT s.* FROM pgq._entrypoints_to_claim(entrypoints) AS s
        ),
        candidates AS (
            SELECT c.ctid
            FROM allowance AS a
            CROSS JOIN LATERAL (
                SELECT j.ctid, j.id, j.priority, j.run_at
                FROM pgq._jobs AS j
                WHERE j.entrypoint = a.ep AND j.status = 'queued' AND j.run_at <= now()
                  AND ROW(-j.priority::bigint, j.run_at, j.id) >= ROW(a.from_np, a.from_run, a.from_id)
                ORDER BY -j.priority::bigint, j.run_at, j.id
                LIMIT claim.batch_size
                FOR UPDATE SKIP LOCKED
            ) AS c
            WHERE NOT a.limited
            ORDER BY c.priority DESC, c.run_at, c.id
            LIMIT claim.batch_size
        ),
        claimed AS (
            UPDATE pgq._jobs AS j
            SET status = 'running', worker_id = claim.worker_id, deliveries = j.deliveries + 1, started_at = now()
            WHERE j.ctid = ANY (ARRAY(SELECT c.ctid FROM candidates AS c))
            RETURNING j.id, j.entrypoint, j.payload, j.headers, j.priority, j.attempt, j.deliveries,
                      j.enqueued_at, j.run_at, j.max_attempts, j.concurrency_key
        )
        SELECT k.id, k.entrypoint, k.payload, k.headers, k.priority, k.attempt, k.deliveries, k.enqueued_at,
               k.run_at, coalesce(k.max_attempts, a.max_attempts), a.timeout, k.concurrency_key
        FROM claimed AS k
        JOIN allowance AS a ON a.ep = k.entrypoint
        ORDER BY k.priority DESC, k.run_at, k.id;
    ELSIF cardinality(v_keyed_ids) = 0 THEN
        RETURN QUERY
        WITH allowance AS (
            SELECT
                s.*,
                CASE WHEN s.ep = ANY (v_keyed) OR (s.limited AND l.ep IS NULL) THEN 0
                     ELSE least(claim.batch_size, coalesce(l.allowed, claim.batch_size)) END AS n
            FROM pgq._entrypoints_to_claim(entrypoints) AS s
            LEFT JOIN unnest(v_limited, v_allowed) AS l (ep, allowed) ON l.ep = s.ep
        ),
        candidates AS (
            SELECT c.id
            FROM allowance AS a
            CROSS JOIN LATERAL (
                SELECT j.id, j.priority, j.run_at
                FROM pgq._jobs AS j
                WHERE j.entrypoint = a.ep AND j.status = 'queued' AND j.run_at <= now()
                  AND ROW(-j.priority::bigint, j.run_at, j.id) >= ROW(a.from_np, a.from_run, a.from_id)
                ORDER BY -j.priority::bigint, j.run_at, j.id
                LIMIT a.n
                FOR UPDATE SKIP LOCKED
            ) AS c
            ORDER BY c.priority DESC, c.run_at, c.id
            LIMIT claim.batch_size
        ),
        claimed AS (
            UPDATE pgq._jobs AS j
            SET status = 'running',
                worker_id = claim.worker_id,
                deliveries = j.deliveries + 1,
                -- A rate-limited job starts when its token was taken (the clock once the
                -- entrypoint's lock was ours), not when this transaction began: a claim
                -- that waited for the lock must not date its jobs before the last claim's.
                started_at = CASE WHEN cardinality(v_rated) = 0 THEN now() ELSE coalesce(
                    (SELECT t.stamp FROM unnest(v_rated, v_stamps) AS t (ep, stamp) WHERE t.ep = j.entrypoint),
                    now()) END
            WHERE j.id = ANY (ARRAY(SELECT c.id FROM candidates AS c))
            RETURNING j.id, j.entrypoint, j.payload, j.headers, j.priority, j.attempt, j.deliveries,
                      j.enqueued_at, j.run_at, j.max_attempts, j.concurrency_key
        ),
        -- Rate limits: spend one token per job claimed (a bucket nothing was taken from keeps
        -- refilling from its last spend).
        spent AS (
            UPDATE pgq._queues AS q
            SET rate_tokens = t.tokens - n.claimed, rate_refilled_at = t.stamp
            FROM unnest(v_rated, v_tokens, v_stamps) AS t (ep, tokens, stamp)
            JOIN (SELECT k.entrypoint, count(*) AS claimed FROM claimed AS k GROUP BY k.entrypoint) AS n
                ON n.entrypoint = t.ep
            WHERE q.entrypoint = t.ep
        )
        SELECT k.id, k.entrypoint, k.payload, k.headers, k.priority, k.attempt, k.deliveries, k.enqueued_at,
               k.run_at, coalesce(k.max_attempts, a.max_attempts), a.timeout, k.concurrency_key
        FROM claimed AS k
        JOIN allowance AS a ON a.ep = k.entrypoint
        ORDER BY k.priority DESC, k.run_at, k.id;
    ELSE
        RETURN QUERY
        WITH allowance AS (
            SELECT
                s.*,
                CASE WHEN s.ep = ANY (v_keyed) OR (s.limited AND l.ep IS NULL) THEN 0
                     ELSE least(claim.batch_size, coalesce(l.allowed, claim.batch_size)) END AS n
            FROM pgq._entrypoints_to_claim(entrypoints) AS s
            LEFT JOIN unnest(v_limited, v_allowed) AS l (ep, allowed) ON l.ep = s.ep
        ),
        candidates AS (
            SELECT c.id, c.priority, c.run_at
            FROM allowance AS a
            CROSS JOIN LATERAL (
                SELECT j.id, j.priority, j.run_at
                FROM pgq._jobs AS j
                WHERE j.entrypoint = a.ep AND j.status = 'queued' AND j.run_at <= now()
                  AND ROW(-j.priority::bigint, j.run_at, j.id) >= ROW(a.from_np, a.from_run, a.from_id)
                ORDER BY -j.priority::bigint, j.run_at, j.id
                LIMIT a.n
                FOR UPDATE SKIP LOCKED
            ) AS c
            UNION ALL
            -- Chosen and locked by pgq._claim_keyed.
            SELECT k.id, k.priority, k.run_at
            FROM pgq._jobs AS k
            WHERE k.id = ANY (v_keyed_ids)
            ORDER BY 2 DESC, 3, 1
            LIMIT claim.batch_size
        ),
        claimed AS (
            UPDATE pgq._jobs AS j
            SET status = 'running',
                worker_id = claim.worker_id,
                deliveries = j.deliveries + 1,
                -- A rate-limited job starts when its token was taken (the clock once the
                -- entrypoint's lock was ours), not when this transaction began: a claim
                -- that waited for the lock must not date its jobs before the last claim's.
                started_at = CASE WHEN cardinality(v_rated) = 0 THEN now() ELSE coalesce(
                    (SELECT t.stamp FROM unnest(v_rated, v_stamps) AS t (ep, stamp) WHERE t.ep = j.entrypoint),
                    now()) END
            WHERE j.id = ANY (ARRAY(SELECT c.id FROM candidates AS c))
            RETURNING j.id, j.entrypoint, j.payload, j.headers, j.priority, j.attempt, j.deliveries,
                      j.enqueued_at, j.run_at, j.max_attempts, j.concurrency_key
        ),
        -- Rate limits: spend one token per job claimed (a bucket nothing was taken from keeps
        -- refilling from its last spend).
        spent AS (
            UPDATE pgq._queues AS q
            SET rate_tokens = t.tokens - n.claimed, rate_refilled_at = t.stamp
            FROM unnest(v_rated, v_tokens, v_stamps) AS t (ep, tokens, stamp)
            JOIN (SELECT k.entrypoint, count(*) AS claimed FROM claimed AS k GROUP BY k.entrypoint) AS n
                ON n.entrypoint = t.ep
            WHERE q.entrypoint = t.ep
        )
        SELECT k.id, k.entrypoint, k.payload, k.headers, k.priority, k.attempt, k.deliveries, k.enqueued_at,
               k.run_at, coalesce(k.max_attempts, a.max_attempts), a.timeout, k.concurrency_key
        FROM claimed AS k
        JOIN allowance AS a ON a.ep = k.entrypoint
        ORDER BY k.priority DESC, k.run_at, k.id;
    END IF;

    GET DIAGNOSTICS v_claimed = ROW_COUNT;
    -- A claim that took jobs locks its worker's row until it commits, then checks again
    -- that the worker is alive: its unregistration waits for this claim and then sees (and
    -- gives back) what it claimed; a sweep leaves the worker alive until a sweep after this
    -- claim; either may have ended the worker first, and then this claim fails (PQ003) and
    -- takes nothing. A worker that is not alive can then hold no job that its release did
    -- not see (pgq._release_gone). A claim that took nothing writes nothing (no lock), so an
    -- idle worker's polls cost no WAL flush.
    IF v_claimed > 0 THEN
        SELECT w.state INTO v_state FROM pgq._workers AS w WHERE w.id = claim.worker_id FOR SHARE;
        IF v_state IS DISTINCT FROM 'alive' THEN
            PERFORM pgq._check_worker(worker_id);
        END IF;
    END IF;

    -- The claim marks: after a claim that took jobs, move them past what was claimed
    -- (pgq._raise_mark, at most every 0.2 s per entrypoint; the mark lock it takes is held
    -- until this transaction ends); and every 30 s, whether it took jobs or not, check
    -- that no queued job was left below them (pgq._verify_mark, lock-free).
    IF current_setting('transaction_isolation') = 'read committed' THEN
        -- One statement decides both, so that a claim with nothing due pays for one.
        SELECT
            array_agg(e.ep) FILTER (
                WHERE m.verified_at < clock_timestamp() - interval '30 seconds' AND NOT coalesce(q.keyed, FALSE)
            ),
            array_agg(e.ep) FILTER (
                WHERE v_claimed > 0 AND e.ep <> ALL (v_keyed) AND NOT coalesce(q.paused, FALSE)
                  AND (m.raised_at IS NULL OR m.raised_at < clock_timestamp() - interval '0.2 seconds')
            )
        INTO v_verify, v_raise
        FROM (SELECT DISTINCT u.ep FROM unnest(entrypoints) AS u (ep)) AS e
        LEFT JOIN pgq._marks AS m ON m.entrypoint = e.ep
        LEFT JOIN pgq._queues AS q ON q.entrypoint = e.ep;
        IF v_verify IS NOT NULL THEN
            PERFORM pgq._verify_mark(u.ep) FROM unnest(v_verify) AS u (ep);
        END IF;
        IF v_raise IS NOT NULL THEN
            PERFORM pgq._raise_mark(u.ep) FROM unnest(v_raise) AS u (ep) ORDER BY u.ep;
        END IF;
    END IF;
END
$$;

COMMENT ON FUNCTION pgq.claim(uuid, text[], integer, integer) IS
'Claim up to batch_size due jobs for a registered worker, highest priority first, then oldest; protocol 2 rows (with concurrency_key).';

-- The 0.1.0 form: the same claim, the row of 0.1.0 (its workers build their jobs from every
-- column, so it never gains one). One statement around the one implementation above
-- ($1, $2, $3: worker_id, entrypoints, batch_size).
CREATE OR REPLACE FUNCTION pgq.claim(worker_id uuid, entrypoints text[], batch_size integer DEFAULT 1)
RETURNS TABLE (
    id bigint,
    entrypoint text,
    payload jsonb,
    headers jsonb,
    priority integer,
    attempt integer,
    deliveries integer,
    enqueued_at timestamptz,
    run_at timestamptz,
    max_attempts integer,
    timeout interval
)
LANGUAGE sql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT
        c.id,
        c.entrypoint,
        c.payload,
        c.headers,
        c.priority,
        c.attempt,
        c.deliveries,
        c.enqueued_at,
        c.run_at,
        c.max_attempts,
        c.timeout
    FROM pgq.claim($1, $2, $3, 2) AS c;
END;

COMMENT ON FUNCTION pgq.claim(uuid, text[], integer) IS
'Claim up to batch_size due jobs for a registered worker, highest priority first, then oldest; the rows of 0.1.0.';

-- ==== sql/functions/complete.sql ====
-- pgq.complete: batch completion, fenced. Acts only on jobs that worker_id holds now (a
-- worker presumed dead whose jobs were re-delivered completes nothing), and, when
-- deliveries is given, only on the delivery the worker ran: a job that was re-queued under
-- a live worker (its timeout) and claimed again is settled by the new run alone, never by
-- the late call of the first. Completed jobs leave the hot table and their outcome
-- ('succeeded', with enqueued/started/finished times and the dedupe key, which an enqueue's
-- dedupe_window looks for) is appended to the outcome log.
-- Jobs waiting for them (depends_on) are queued when all their dependencies have
-- succeeded. Completing a job of a concurrency-limited entrypoint frees a slot: workers
-- are woken (NOTIFY pgq) to claim again.
-- Parameters: worker_id; job_ids (at most 10000); results (optional, one jsonb per job id,
--   stored in the outcome log); deliveries (optional, one per job id: the `deliveries`
--   value its claim returned).
-- Returns the ids it completed; ids not returned were not held by this worker (or this
-- delivery). Raises PQ001 for invalid arguments.
CREATE OR REPLACE FUNCTION pgq.complete(
    worker_id uuid,
    job_ids bigint[],
    results jsonb[] DEFAULT NULL,
    deliveries integer[] DEFAULT NULL
)
RETURNS SETOF bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty):
-- tests/py/test_empty_queue_plans.py says why; JIT off, which that cost would start.
SET enable_seqscan = off
SET jit = off
-- Its statements plan well without knowing the arguments (the jobs by primary key): a
-- custom plan for every call cost most of a small completion's time (~300 us). The setting
-- holds for pgq._release_dependents too, whose statements read the waiting jobs' GIN index
-- either way.
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_done bigint[];
    v_role name;
    v_entrypoints text[];
    -- The wall clock: a transactional handler completes at the end of a long transaction.
    v_now timestamptz := clock_timestamp();
BEGIN
    -- The checks of a well-formed call as expressions and one read of the worker's row;
    -- anything else takes the checking functions, which raise (a call of each costs tens
    -- of microseconds, on every completion).
    SELECT w.registered_by INTO v_role FROM pgq._workers AS w WHERE w.id = complete.worker_id;
    IF (
        worker_id IS NOT NULL AND (v_role IS NULL OR v_role = session_user)
        AND coalesce(array_ndims(job_ids), 1) = 1 AND cardinality(job_ids) <= 10000
        AND array_position(job_ids, NULL) IS NULL
    ) IS NOT TRUE THEN
        PERFORM pgq._check_worker_role(worker_id);
        IF worker_id IS NULL THEN
            PERFORM pgq._invalid('worker_id', 'must not be NULL', 'Pass the id that pgq.register_worker returned.');
        END IF;
        PERFORM pgq._check_ids('job_ids', job_ids);
    END IF;
    IF results IS NOT NULL AND (array_ndims(results) > 1 OR cardinality(results) <> cardinality(job_ids)) THEN
        PERFORM pgq._invalid('results', 'must have one element per job id',
            'Pass NULL, or a one-dimensional array as long as job_ids.');
    END IF;
    IF deliveries IS NOT NULL AND (
        array_ndims(deliveries) > 1 OR cardinality(deliveries) <> cardinality(job_ids)
        OR array_position(deliveries, NULL) IS NOT NULL
    ) THEN
        PERFORM pgq._invalid('deliveries', 'must have one non-NULL element per job id',
            'Pass NULL, or the deliveries values the claim returned, in the order of job_ids.');
    END IF;
    IF results IS NOT NULL OR deliveries IS NOT NULL THEN
        -- Whatever their lower bounds, pair the arrays by position.
        job_ids := ARRAY(SELECT unnest(job_ids));
        IF results IS NOT NULL THEN
            results := ARRAY(SELECT unnest(results));
        END IF;
        IF deliveries IS NOT NULL THEN
            deliveries := ARRAY(SELECT unnest(deliveries));
        END IF;
    END IF;
    WITH done AS (
        DELETE FROM pgq._jobs AS j
        -- Only running jobs have a worker (_jobs_held_check), so no test of status: with one,
        -- the planner may walk all of the running index (statistics taken while nothing ran
        -- call it tiny), which a held snapshot fills with dead entries. IS NOT DISTINCT FROM
        -- (worker_id is not NULL here) keeps it on the primary key too.
        WHERE j.id = ANY (job_ids) AND j.worker_id IS NOT DISTINCT FROM complete.worker_id
          -- By (id, delivery) pairs: one batch may name two deliveries of the same job (the
          -- first was re-queued by its timeout, then claimed again), and only one is current.
          AND (complete.deliveries IS NULL
               OR (j.id, j.deliveries) IN (SELECT p.id, p.d FROM unnest(job_ids, complete.deliveries) AS p (id, d)))
        RETURNING j.id, j.entrypoint, j.priority, j.attempt, j.deliveries, j.enqueued_at, j.started_at,
                  j.payload, j.headers, j.depends_on, j.dedupe_key, j.concurrency_key, j.enqueued_by
    ),
    logged AS (
        INSERT INTO pgq._outcomes (
            job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, started_at,
            finished_at, worker_id, result, payload, headers, depends_on, dedupe_key, concurrency_key,
            enqueued_by
        )
        SELECT d.id, d.entrypoint, 'succeeded', d.priority, d.attempt, d.deliveries, d.enqueued_at,
               d.started_at, v_now, complete.worker_id,
               r.result, d.payload, d.headers, d.depends_on, d.dedupe_key, d.concurrency_key, d.enqueued_by
        FROM done AS d
        LEFT JOIN (
            SELECT DISTINCT ON (p.id, p.d) p.id, p.d, p.result
            FROM unnest(job_ids, complete.deliveries, results) AS p (id, d, result)
            WHERE results IS NOT NULL
        ) AS r ON r.id = d.id AND (complete.deliveries IS NULL OR r.d = d.deliveries)
    )
    SELECT coalesce(array_agg(d.id), '{}'), array_agg(DISTINCT d.entrypoint)
    INTO v_done, v_entrypoints
    FROM done AS d;
    IF v_done = '{}' THEN
        RETURN;
    END IF;
    -- Whether any job waits at all (one descent of _jobs_waiting_any_idx; every waiting job
    -- has no worker), and only then whether one waits for these (the GIN index, once per id).
    -- Newest first: under a held snapshot the entries of jobs that waited and were released
    -- since stay, and the newest waiting job, if any, is the likeliest still to wait.
    IF (
        SELECT w.id FROM pgq._jobs AS w WHERE w.status = 'waiting' AND w.worker_id IS NULL ORDER BY w.id DESC LIMIT 1
    ) IS NOT NULL
       AND EXISTS (SELECT 1 FROM pgq._jobs AS w WHERE w.status = 'waiting' AND w.depends_on && v_done) THEN
        PERFORM pgq._release_dependents(v_done);
    END IF;
    PERFORM pg_notify('pgq', q.entrypoint)
    FROM pgq._queues AS q
    WHERE q.entrypoint = ANY (v_entrypoints) AND (q.concurrency IS NOT NULL OR q.key_concurrency IS NOT NULL);
    RETURN QUERY SELECT unnest(v_done);
END
$$;

COMMENT ON FUNCTION pgq.complete(uuid, bigint[], jsonb[], integer[]) IS
'Complete jobs the worker holds (fenced, per delivery when deliveries is given); returns the ids completed.';

-- ==== sql/functions/configure.sql ====
-- pgq.configure: per-entrypoint settings; every argument after entrypoint defaults to NULL,
-- which leaves that setting as it is. Call with named notation:
--   SELECT pgq.configure('email', max_attempts => 10, lease => '2 minutes');
-- max_attempts (1-1000, default 5): runs before a job is dead.
-- backoff_base, backoff_max (default 1 s, 1 h): retry delay base * 2^(attempt-1), capped.
-- lease (1 s to 1 day, default 30 s): how long a claimed job stays held without a heartbeat
--   before it is re-delivered.
-- timeout (default 1 h): the longest a handler may run; the worker stops it, the reaper
--   fails it after timeout + lease.
-- concurrency (1-1000000): the most running jobs across all workers; 0 removes the limit
--   (no limit by default).
-- rate (0.001-1000000): jobs started per second across all workers; 0 removes the limit
--   (no limit by default). See pgq.claim for the bucket.
-- retention (default 7 days): how long outcomes stay in the log.
-- max_deliveries (0-1000, default 10): a job whose worker is lost (crashed, killed, cut off
--   past its lease) this many times goes dead instead of being delivered again, so a job
--   that kills its worker cannot do so forever; 0 removes the cap.
-- key_concurrency (1-1000000): the most running jobs of one concurrency key across all
--   workers; 1 runs each key's jobs one at a time, in order (per-key FIFO); 0 removes the
--   limit (no limit by default).
-- max_snoozes (0-1000000, default 100): how often one job may snooze (pgq.snooze); a
--   snooze past it fails the job instead.
-- Returns nothing. Raises PQ001 for invalid arguments; nothing changes then.
CREATE OR REPLACE FUNCTION pgq.configure(
    entrypoint text,
    max_attempts integer DEFAULT NULL,
    backoff_base interval DEFAULT NULL,
    backoff_max interval DEFAULT NULL,
    lease interval DEFAULT NULL,
    timeout interval DEFAULT NULL,
    concurrency integer DEFAULT NULL,
    rate numeric DEFAULT NULL,
    retention interval DEFAULT NULL,
    max_deliveries integer DEFAULT NULL,
    key_concurrency integer DEFAULT NULL,
    max_snoozes integer DEFAULT NULL
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_base interval;
    v_max interval;
BEGIN
    PERFORM pgq._check_entrypoint('entrypoint', entrypoint);
    IF max_attempts IS NOT NULL AND (max_attempts < 1 OR max_attempts > 1000) THEN
        PERFORM pgq._invalid('max_attempts', format('%s is out of range', max_attempts), 'Use 1 to 1000.');
    END IF;
    PERFORM pgq._check_interval('backoff_base', backoff_base, interval '0');
    PERFORM pgq._check_interval('backoff_max', backoff_max, interval '0');
    IF lease IS NOT NULL AND (lease < interval '1 second' OR lease > interval '1 day') THEN
        PERFORM pgq._invalid('lease', format('%s is out of range', lease), 'Use 1 second to 1 day.');
    END IF;
    PERFORM pgq._check_interval('timeout', timeout, interval '1 second');
    IF concurrency IS NOT NULL AND (concurrency < 0 OR concurrency > 1000000) THEN
        PERFORM pgq._invalid('concurrency', format('%s is out of range', concurrency),
            'Use 1 to 1000000, or 0 for no limit; to stop an entrypoint use pgq.pause().');
    END IF;
    IF rate IS NOT NULL AND rate <> 0 AND NOT rate BETWEEN 0.001 AND 1000000 THEN
        PERFORM pgq._invalid('rate', format('%s is out of range', rate),
            'Use 0.001 to 1000000 jobs per second, or 0 for no limit.');
    END IF;
    PERFORM pgq._check_interval('retention', retention, interval '1 minute');
    IF max_deliveries IS NOT NULL AND (max_deliveries < 0 OR max_deliveries > 1000) THEN
        PERFORM pgq._invalid('max_deliveries', format('%s is out of range', max_deliveries),
            'Use 1 to 1000 lost deliveries before a job is dead, or 0 for no cap.');
    END IF;
    IF key_concurrency IS NOT NULL AND (key_concurrency < 0 OR key_concurrency > 1000000) THEN
        PERFORM pgq._invalid('key_concurrency', format('%s is out of range', key_concurrency),
            'Use 1 to 1000000 running jobs per key (1: one at a time, in order), or 0 for no limit.');
    END IF;
    IF max_snoozes IS NOT NULL AND (max_snoozes < 0 OR max_snoozes > 1000000) THEN
        PERFORM pgq._invalid('max_snoozes', format('%s is out of range', max_snoozes),
            'Use 0 to 1000000 snoozes per job (0: a snooze fails the job).');
    END IF;

    SELECT coalesce(configure.backoff_base, q.backoff_base, (pgq._defaults()).backoff_base),
           coalesce(configure.backoff_max, q.backoff_max, (pgq._defaults()).backoff_max)
    INTO v_base, v_max
    FROM (SELECT 1) AS one
    LEFT JOIN pgq._queues AS q ON q.entrypoint = configure.entrypoint;
    IF v_max < v_base THEN
        PERFORM pgq._invalid('backoff_max', format('%s is below backoff_base %s', v_max, v_base),
            'backoff_max caps the delay, so it must be at least backoff_base.');
    END IF;

    INSERT INTO pgq._queues AS q (
        entrypoint, max_attempts, backoff_base, backoff_max, lease, timeout, concurrency, rate, retention,
        max_deliveries, key_concurrency, max_snoozes
    )
    VALUES (
        configure.entrypoint, configure.max_attempts, configure.backoff_base, configure.backoff_max,
        configure.lease, configure.timeout, nullif(configure.concurrency, 0),
        nullif(configure.rate, 0), configure.retention, configure.max_deliveries,
        nullif(configure.key_concurrency, 0), configure.max_snoozes
    )
    ON CONFLICT ON CONSTRAINT _queues_pkey DO UPDATE
    SET max_attempts = coalesce(excluded.max_attempts, q.max_attempts),
        backoff_base = coalesce(excluded.backoff_base, q.backoff_base),
        backoff_max = coalesce(excluded.backoff_max, q.backoff_max),
        lease = coalesce(excluded.lease, q.lease),
        timeout = coalesce(excluded.timeout, q.timeout),
        concurrency = CASE WHEN configure.concurrency = 0 THEN NULL
                           ELSE coalesce(excluded.concurrency, q.concurrency) END,
        rate = CASE WHEN configure.rate = 0 THEN NULL ELSE coalesce(excluded.rate, q.rate) END,
        -- A new rate starts with a full bucket.
        rate_tokens = CASE WHEN configure.rate IS NULL THEN q.rate_tokens END,
        rate_refilled_at = CASE WHEN configure.rate IS NULL THEN q.rate_refilled_at END,
        retention = coalesce(excluded.retention, q.retention),
        max_deliveries = coalesce(excluded.max_deliveries, q.max_deliveries),
        key_concurrency = CASE WHEN configure.key_concurrency = 0 THEN NULL
                               ELSE coalesce(excluded.key_concurrency, q.key_concurrency) END,
        max_snoozes = coalesce(excluded.max_snoozes, q.max_snoozes),
        updated_at = now();
END
$$;

COMMENT ON FUNCTION pgq.configure(
    text, integer, interval, interval, interval, interval, integer, numeric, interval, integer, integer, integer
) IS
'Set per-entrypoint settings (named arguments; NULL leaves a setting as it is).';

-- ==== sql/functions/enqueue.sql ====
-- pgq.enqueue: add one job; joins the caller's transaction. It is pgq.enqueue_job returning
-- the id alone; call pgq.enqueue_job to learn whether the call created the job.
-- Parameters: entrypoint (required); payload; priority (higher runs first, default 0);
--   run_at (not before, default now); dedupe_key (a live job with the same entrypoint and
--   key is not duplicated: its id is returned); headers (a JSON object); max_attempts
--   (default: the entrypoint's setting); depends_on (ids of jobs that must succeed first:
--   the job is 'waiting' until they all have; if one ends dead or canceled, it is canceled);
--   concurrency_key (1-1000 bytes, e.g. 'customer:42': the entrypoint's claims rotate among
--   keys, and its key_concurrency limits the running jobs of one key; see pgq.claim);
--   dedupe_scope ('live', the default, or 'queued': until the job starts), dedupe_window
--   (also a success with the key within this interval counts) and dedupe_mode ('keep', the
--   default, or 'replace': a job not started yet takes the new payload, priority, run_at,
--   headers and max_attempts): see pgq.enqueue_job.
-- Returns the job id (of the new job, or of the job that stands for it). Raises PQ001 for
-- invalid arguments, PQ004 for an oversized payload, PQ007 (see pgq.enqueue_job).
-- Idle workers are woken by a NOTIFY on channel 'pgq' (payload: the entrypoint) at commit.
CREATE OR REPLACE FUNCTION pgq.enqueue(
    entrypoint text,
    payload jsonb DEFAULT NULL,
    priority integer DEFAULT 0,
    run_at timestamptz DEFAULT NULL,
    dedupe_key text DEFAULT NULL,
    headers jsonb DEFAULT NULL,
    max_attempts integer DEFAULT NULL,
    depends_on bigint[] DEFAULT NULL,
    concurrency_key text DEFAULT NULL,
    dedupe_scope text DEFAULT NULL,
    dedupe_window interval DEFAULT NULL,
    dedupe_mode text DEFAULT NULL
)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id bigint;
    v_run_at timestamptz;
BEGIN
    -- The common call (no key, dependency or dedupe option) with arguments that pass every
    -- check of pgq._check_job inserts here, as pgq.enqueue_job would: the nested call and
    -- its checking functions cost about a quarter of an enqueue's server CPU. Anything else,
    -- an invalid argument included (it then raises exactly as before), goes through
    -- pgq.enqueue_job. This condition must stay the negation of _check_job's errors.
    IF (
        dedupe_key IS NULL AND depends_on IS NULL AND concurrency_key IS NULL
        AND dedupe_scope IS NULL AND dedupe_window IS NULL AND dedupe_mode IS NULL
        AND length(entrypoint) BETWEEN 1 AND 200 AND entrypoint = btrim(entrypoint)
        AND entrypoint !~ '[[:cntrl:]]'
        AND coalesce(pg_column_size(payload) <= 1048576, TRUE)
        AND coalesce(isfinite(run_at) OR run_at <= now(), TRUE)
        AND coalesce(jsonb_typeof(headers) = 'object' AND pg_column_size(headers) <= 65536, TRUE)
        AND coalesce(max_attempts BETWEEN 1 AND 1000, TRUE)
    ) THEN
        v_run_at := greatest(coalesce(run_at, now()), now());
        INSERT INTO pgq._jobs AS j (entrypoint, payload, priority, run_at, headers, max_attempts)
        VALUES (enqueue.entrypoint, enqueue.payload, coalesce(enqueue.priority, 0), v_run_at, enqueue.headers,
                enqueue.max_attempts)
        RETURNING j.id INTO v_id;
        IF v_run_at <= now() THEN
            PERFORM pg_notify('pgq', enqueue.entrypoint);
        END IF;
        RETURN v_id;
    END IF;
    RETURN (
        SELECT e.id
        FROM pgq.enqueue_job(
            entrypoint => enqueue.entrypoint,
            payload => enqueue.payload,
            priority => enqueue.priority,
            run_at => enqueue.run_at,
            dedupe_key => enqueue.dedupe_key,
            headers => enqueue.headers,
            max_attempts => enqueue.max_attempts,
            depends_on => enqueue.depends_on,
            concurrency_key => enqueue.concurrency_key,
            dedupe_scope => enqueue.dedupe_scope,
            dedupe_window => enqueue.dedupe_window,
            dedupe_mode => enqueue.dedupe_mode
        ) AS e
    );
END
$$;

COMMENT ON FUNCTION pgq.enqueue(
    text, jsonb, integer, timestamptz, text, jsonb, integer, bigint[], text, text, interval, text
) IS
'Enqueue one job in the current transaction; returns its id (or the id of the job with the same dedupe_key that stands for it).';

-- ==== sql/functions/enqueue_batch.sql ====
-- pgq.enqueue_batch: many jobs of one entrypoint in one statement.
-- Parameters: entrypoint; payloads (one job per element, at most 100000; a NULL element
--   is a job with a NULL payload); priority; run_at; concurrency_keys (optional: one key
--   per payload, NULL elements for jobs without a key; see pgq.enqueue); dedupe_keys
--   (optional: one dedupe key per payload, NULL elements for jobs without one) with
--   dedupe_scope, dedupe_window and dedupe_mode (see pgq.enqueue_job): each job goes in as
--   pgq.enqueue_job would put it, in the order of payloads, so two payloads with one key
--   make one job (with dedupe_mode 'replace', the later payload wins). That path runs job
--   by job; without dedupe_keys the batch is one statement.
-- Returns the job ids in the order of payloads (with dedupe_keys, the id of the job that
-- stands for a payload where one did). One NOTIFY per call, not per job.
-- Raises PQ001 for invalid arguments, PQ004 for an oversized payload.
CREATE OR REPLACE FUNCTION pgq.enqueue_batch(
    entrypoint text,
    payloads jsonb[],
    priority integer DEFAULT 0,
    run_at timestamptz DEFAULT NULL,
    concurrency_keys text[] DEFAULT NULL,
    dedupe_keys text[] DEFAULT NULL,
    dedupe_scope text DEFAULT NULL,
    dedupe_window interval DEFAULT NULL,
    dedupe_mode text DEFAULT NULL
)
RETURNS SETOF bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_run_at timestamptz := greatest(coalesce(run_at, now()), now());
    v_too_big integer;
    v_bad integer;
    v_job record;
BEGIN
    PERFORM pgq._check_job(entrypoint, NULL, run_at, NULL, NULL, NULL);
    IF payloads IS NULL THEN
        PERFORM pgq._invalid('payloads', 'must not be NULL', 'Pass an array of jsonb payloads.');
    ELSIF array_ndims(payloads) > 1 THEN
        PERFORM pgq._invalid('payloads', format('has %s dimensions', array_ndims(payloads)),
            'Pass a one-dimensional array of jsonb payloads.');
    ELSIF cardinality(payloads) > 100000 THEN
        PERFORM pgq._invalid('payloads', format('has %s elements', cardinality(payloads)),
            'At most 100000 jobs per call; split the batch.');
    END IF;
    IF concurrency_keys IS NOT NULL THEN
        IF array_ndims(concurrency_keys) > 1 OR cardinality(concurrency_keys) <> cardinality(payloads) THEN
            PERFORM pgq._invalid('concurrency_keys', 'must have one element per payload',
                'Pass NULL, or a one-dimensional array as long as payloads (NULL elements: no key).');
        END IF;
        PERFORM pgq._check_keys('concurrency_keys', concurrency_keys);
        IF EXISTS (SELECT 1 FROM unnest(concurrency_keys) AS k (key) WHERE k.key IS NOT NULL) THEN
            PERFORM pgq._mark_keyed(entrypoint);
        END IF;
    END IF;
    PERFORM pgq._check_dedupe(dedupe_keys IS NOT NULL, dedupe_scope, dedupe_mode, dedupe_window, 'dedupe_keys');
    IF dedupe_keys IS NOT NULL THEN
        IF array_ndims(dedupe_keys) > 1 OR cardinality(dedupe_keys) <> cardinality(payloads) THEN
            PERFORM pgq._invalid('dedupe_keys', 'must have one element per payload',
                'Pass NULL, or a one-dimensional array as long as payloads (NULL elements: no key).');
        END IF;
        SELECT k.ord INTO v_bad
        FROM unnest(dedupe_keys) WITH ORDINALITY AS k (key, ord)
        WHERE k.key = '' OR octet_length(k.key) > 1000
        LIMIT 1;
        IF v_bad IS NOT NULL THEN
            PERFORM pgq._invalid(format('dedupe_keys[%s]', v_bad), 'must be 1 to 1000 bytes long',
                'Pass NULL for a job without a dedupe key.');
        END IF;
    END IF;
    SELECT p.ord INTO v_too_big
    FROM unnest(payloads) WITH ORDINALITY AS p (payload, ord)
    WHERE pg_column_size(p.payload) > 1048576
    LIMIT 1;
    IF v_too_big IS NOT NULL THEN
        RAISE EXCEPTION 'pgq: payloads[%] is over the 1 MiB limit', v_too_big
            USING ERRCODE = 'PQ004', HINT = 'Store large data in a table and put its key in the payload.';
    END IF;
    IF dedupe_keys IS NOT NULL THEN
        -- Job by job, in order: a payload may find the job an earlier one made.
        FOR v_job IN
            SELECT p.payload, dedupe_keys[array_lower(dedupe_keys, 1) + p.ord - 1] AS dedupe_key,
                   concurrency_keys[array_lower(concurrency_keys, 1) + p.ord - 1] AS concurrency_key
            FROM unnest(payloads) WITH ORDINALITY AS p (payload, ord)
            ORDER BY p.ord
        LOOP
            RETURN NEXT (
                SELECT e.id
                FROM pgq.enqueue_job(
                    entrypoint => enqueue_batch.entrypoint,
                    payload => v_job.payload,
                    priority => enqueue_batch.priority,
                    run_at => enqueue_batch.run_at,
                    dedupe_key => v_job.dedupe_key,
                    concurrency_key => v_job.concurrency_key,
                    dedupe_scope => CASE WHEN v_job.dedupe_key IS NOT NULL THEN dedupe_scope END,
                    dedupe_window => CASE WHEN v_job.dedupe_key IS NOT NULL THEN dedupe_window END,
                    dedupe_mode => CASE WHEN v_job.dedupe_key IS NOT NULL THEN dedupe_mode END
                ) AS e
            );
        END LOOP;
        RETURN;
    END IF;
    -- Identity values follow the insertion order, which follows ord.
    RETURN QUERY
    WITH inserted AS (
        INSERT INTO pgq._jobs AS j (entrypoint, payload, priority, run_at, concurrency_key)
        SELECT enqueue_batch.entrypoint, p.payload, coalesce(enqueue_batch.priority, 0), v_run_at,
               concurrency_keys[array_lower(concurrency_keys, 1) + p.ord - 1]
        FROM unnest(payloads) WITH ORDINALITY AS p (payload, ord)
        ORDER BY p.ord
        RETURNING j.id
    )
    SELECT i.id FROM inserted AS i ORDER BY i.id;
    IF cardinality(payloads) > 0 AND v_run_at <= now() THEN
        PERFORM pg_notify('pgq', enqueue_batch.entrypoint);
    END IF;
END
$$;

COMMENT ON FUNCTION pgq.enqueue_batch(
    text, jsonb[], integer, timestamptz, text[], text[], text, interval, text
) IS
'Enqueue one job per payload in one statement; returns the ids in payload order.';

-- ==== sql/functions/enqueue_job.sql ====
-- pgq.enqueue_job: add one job, and tell whether this call created it. pgq.enqueue is this
-- function returning the id alone; a plain call (no key, dependency or dedupe option) it
-- runs itself, with a copy of this function's INSERT and NOTIFY: change them together.
-- Joins the caller's transaction.
-- Parameters: those of pgq.enqueue (entrypoint, payload, priority, run_at, dedupe_key,
--   headers, max_attempts, depends_on, concurrency_key), then how the dedupe_key counts:
--   dedupe_scope: which jobs with the same entrypoint and dedupe_key stand for this one:
--     'live' (the default): queued, waiting and running jobs (a dead job does not);
--     'queued': jobs not started yet (queued, waiting). A running job does not block: it
--       gives its key up (it runs on, and its pgq.job shows no dedupe_key) and a new job
--       is created.
--   dedupe_window: also a job with the key that succeeded within this interval (counted
--     back from now; needs the 'live' scope). The outcome log keeps successes for the
--     entrypoint's retention: a longer window sees only what is kept. Canceled and dead
--     jobs never block.
--   dedupe_mode: 'keep' (the default): the job that stands for this one is left as it is;
--     'replace': a standing job not started yet (queued or waiting) takes this call's
--     payload, priority, run_at, headers, max_attempts and concurrency_key (its
--     dependencies stay); a running or finished one is kept.
-- Returns one row: id (the new job, or the one that stands for it), created (this call
--   made a new job), replaced (this call rewrote the standing job; created is then false).
-- Race-proof: the unique index on live keys decides between concurrent calls; a replaced
--   job is not claimed before the replacing transaction commits. Raises PQ001 for invalid
--   arguments, PQ004 for an oversized payload, PQ007 for a dedupe_window in a REPEATABLE
--   READ or SERIALIZABLE transaction (the window is checked with a fresh snapshot).
CREATE OR REPLACE FUNCTION pgq.enqueue_job(
    entrypoint text,
    payload jsonb DEFAULT NULL,
    priority integer DEFAULT 0,
    run_at timestamptz DEFAULT NULL,
    dedupe_key text DEFAULT NULL,
    headers jsonb DEFAULT NULL,
    max_attempts integer DEFAULT NULL,
    depends_on bigint[] DEFAULT NULL,
    concurrency_key text DEFAULT NULL,
    dedupe_scope text DEFAULT NULL,
    dedupe_window interval DEFAULT NULL,
    dedupe_mode text DEFAULT NULL,
    OUT id bigint,
    OUT created boolean,
    OUT replaced boolean
)
RETURNS record
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty):
-- tests/py/test_empty_queue_plans.py says why; JIT off, which that cost would start.
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_id bigint;
    v_run_at timestamptz := greatest(coalesce(run_at, now()), now());
    v_waits_for bigint[];
    v_failed text;
    v_scope text := coalesce(dedupe_scope, 'live');
    v_holder bigint;
    v_status text;
BEGIN
    PERFORM pgq._check_job(entrypoint, payload, run_at, dedupe_key, headers, max_attempts);
    PERFORM pgq._check_dedupe(dedupe_key IS NOT NULL, dedupe_scope, dedupe_mode, dedupe_window);
    IF concurrency_key IS NOT NULL THEN
        PERFORM pgq._check_keys('concurrency_key', ARRAY[concurrency_key], TRUE);
    END IF;
    IF dedupe_window IS NOT NULL AND current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'pgq: an enqueue with dedupe_window needs READ COMMITTED, not %',
            current_setting('transaction_isolation')
            USING ERRCODE = 'PQ007',
            DETAIL = 'The window is checked after the key is taken, with a fresh snapshot; an older one '
                || 'would miss a job that succeeded meanwhile.',
            HINT = 'Enqueue with a window outside explicit REPEATABLE READ or SERIALIZABLE transactions.';
    END IF;
    created := FALSE;
    replaced := FALSE;
    IF depends_on IS NOT NULL THEN
        SELECT d.waits_for, d.failed INTO v_waits_for, v_failed FROM pgq._dependencies(depends_on) AS d;
        IF v_failed IS NOT NULL THEN
            -- A job with the dedupe key stands for this one.
            SELECT j.id INTO v_id
            FROM pgq._jobs AS j
            WHERE j.entrypoint = enqueue_job.entrypoint AND j.dedupe_key = enqueue_job.dedupe_key
              AND j.status <> 'dead' AND (v_scope = 'live' OR j.status <> 'running');
            IF v_id IS NULL AND dedupe_window IS NOT NULL THEN
                v_id := pgq._recent_success(enqueue_job.entrypoint, enqueue_job.dedupe_key, dedupe_window);
            END IF;
            IF v_id IS NOT NULL THEN
                id := v_id;
                RETURN;
            END IF;
            -- Nothing to wait for: the job is born canceled, and says why.
            v_id := nextval(pg_get_serial_sequence('pgq._jobs', 'id'));
            INSERT INTO pgq._outcomes (
                job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, error,
                payload, headers, depends_on, concurrency_key, enqueued_by
            )
            VALUES (v_id, enqueue_job.entrypoint, 'canceled', coalesce(enqueue_job.priority, 0), 0, 0, now(),
                    v_failed, enqueue_job.payload, enqueue_job.headers, enqueue_job.depends_on,
                    enqueue_job.concurrency_key, session_user);
            id := v_id;
            created := TRUE;
            RETURN;
        END IF;
    END IF;
    IF dedupe_window IS NOT NULL THEN
        -- The common case of a window, a recent success and no live job, without touching
        -- the hot table. (A live job stands first: it may be replaced.)
        v_id := pgq._recent_success(enqueue_job.entrypoint, enqueue_job.dedupe_key, dedupe_window);
        IF v_id IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM pgq._jobs AS j
            WHERE j.entrypoint = enqueue_job.entrypoint AND j.dedupe_key = enqueue_job.dedupe_key
              AND j.status <> 'dead'
        ) THEN
            id := v_id;
            RETURN;
        END IF;
    END IF;
    LOOP
        INSERT INTO pgq._jobs AS j (
            entrypoint, payload, priority, run_at, dedupe_key, headers, max_attempts, status, depends_on,
            concurrency_key
        )
        VALUES (enqueue_job.entrypoint, enqueue_job.payload, coalesce(enqueue_job.priority, 0), v_run_at,
                enqueue_job.dedupe_key, enqueue_job.headers, enqueue_job.max_attempts,
                CASE WHEN v_waits_for IS NULL THEN 'queued' ELSE 'waiting' END, v_waits_for,
                enqueue_job.concurrency_key)
        ON CONFLICT (entrypoint, dedupe_key) WHERE dedupe_key IS NOT NULL AND status <> 'dead'
        DO NOTHING
        RETURNING j.id INTO v_id;
        IF v_id IS NOT NULL THEN
            IF dedupe_window IS NOT NULL THEN
                -- The key is ours now (a concurrent enqueue waits for this transaction). A job
                -- that held it may have succeeded while this call waited: a
                -- fresh read (pgq._recent_success) sees its outcome.
                v_holder := pgq._recent_success(enqueue_job.entrypoint, enqueue_job.dedupe_key, dedupe_window);
                IF v_holder IS NOT NULL THEN
                    DELETE FROM pgq._jobs AS j WHERE j.id = v_id;
                    id := v_holder;
                    RETURN;
                END IF;
            END IF;
            IF enqueue_job.concurrency_key IS NOT NULL THEN
                PERFORM pgq._mark_keyed(enqueue_job.entrypoint);
            END IF;
            EXIT;
        END IF;
        -- A live job holds the key. It can finish (or start) between the two statements:
        -- then loop.
        SELECT j.id, j.status INTO v_holder, v_status
        FROM pgq._jobs AS j
        WHERE j.entrypoint = enqueue_job.entrypoint
          AND j.dedupe_key = enqueue_job.dedupe_key
          AND j.status <> 'dead';
        IF NOT FOUND THEN
            CONTINUE;
        END IF;
        IF v_status = 'running' THEN
            IF v_scope = 'live' THEN
                id := v_holder;
                RETURN;
            END IF;
            -- Scope 'queued': the running job gives its key up (it runs on). Its row lock,
            -- held to commit, makes a concurrent call wait here and then find the new job.
            UPDATE pgq._jobs AS j SET dedupe_key = NULL
            WHERE j.id = v_holder AND j.status = 'running' AND j.dedupe_key = enqueue_job.dedupe_key;
            CONTINUE;
        END IF;
        IF dedupe_mode IS DISTINCT FROM 'replace' THEN
            id := v_holder;
            RETURN;
        END IF;
        -- A claim may take the job first: then the row no longer matches, and the loop
        -- looks again.
        UPDATE pgq._jobs AS j
        SET payload = enqueue_job.payload,
            priority = coalesce(enqueue_job.priority, 0),
            run_at = v_run_at,
            headers = enqueue_job.headers,
            max_attempts = enqueue_job.max_attempts,
            concurrency_key = enqueue_job.concurrency_key
        WHERE j.id = v_holder AND j.status IN ('queued', 'waiting')
          AND j.dedupe_key = enqueue_job.dedupe_key
        RETURNING j.status INTO v_status;
        IF FOUND THEN
            IF enqueue_job.concurrency_key IS NOT NULL THEN
                PERFORM pgq._mark_keyed(enqueue_job.entrypoint);
            END IF;
            IF v_run_at <= now() AND v_status = 'queued' THEN
                PERFORM pg_notify('pgq', enqueue_job.entrypoint);
            END IF;
            id := v_holder;
            replaced := TRUE;
            RETURN;
        END IF;
    END LOOP;
    IF v_run_at <= now() AND v_waits_for IS NULL THEN
        PERFORM pg_notify('pgq', enqueue_job.entrypoint);
    END IF;
    id := v_id;
    created := TRUE;
END
$$;

COMMENT ON FUNCTION pgq.enqueue_job(
    text, jsonb, integer, timestamptz, text, jsonb, integer, bigint[], text, text, interval, text
) IS
'Enqueue one job in the current transaction; returns (id, created, replaced): the new job, or the job that stands for it.';

-- ==== sql/functions/enqueue_trigger.sql ====
-- pgq.enqueue_trigger(): trigger function. Enqueues the changed row as the payload:
--   CREATE TRIGGER t AFTER INSERT OR UPDATE OR DELETE ON orders
--       FOR EACH ROW EXECUTE FUNCTION pgq.enqueue_trigger('process_order');
-- Argument 1 (required): the entrypoint. Argument 2 (optional): the priority.
-- Argument 3 (optional): the column of the row whose value is the job's concurrency key
--   (e.g. 'customer_id'; a NULL value: no key); see pgq.enqueue.
-- Argument 4 (optional): the column whose value is the job's dedupe key (a NULL value: no
--   key). Arguments 5, 6, 7 (optional): dedupe_scope, dedupe_mode, dedupe_window (e.g.
--   '5 minutes'), used for rows with a dedupe key; see pgq.enqueue_job. An empty argument
--   (from 3 on) means none, e.g. pgq.enqueue_trigger('index_doc', '0', '', 'id', 'queued',
--   'replace'): at most one job per row waits, carrying the row's latest version.
-- Payload: NEW (OLD on DELETE) as JSON; headers: {"table", "schema", "op"}.
-- The job commits or rolls back with the row change. The trigger runs as the role that
-- changed the row (SECURITY INVOKER: turning the row into JSON may call casts that the
-- table's owner defined), so roles that write to the table need pgq_producer.
CREATE OR REPLACE FUNCTION pgq.enqueue_trigger()
RETURNS trigger
LANGUAGE plpgsql
VOLATILE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_row jsonb;
    v_key text;
    v_dedupe_key text;
    v_window interval;
BEGIN
    -- Raised here, not through pgq._invalid: this function runs as the writer, who may not
    -- execute pgq's internal helpers.
    IF TG_LEVEL <> 'ROW' OR TG_NARGS < 1 THEN
        RAISE EXCEPTION 'pgq: invalid argument trigger arguments: needs FOR EACH ROW and an entrypoint'
            USING ERRCODE = 'PQ001',
            HINT = 'CREATE TRIGGER ... FOR EACH ROW EXECUTE FUNCTION pgq.enqueue_trigger(''entrypoint'').';
    END IF;
    IF TG_NARGS > 1 AND TG_ARGV[1] !~ '^-?[0-9]{1,9}$' THEN
        RAISE EXCEPTION 'pgq: invalid argument trigger argument 2 (priority): % is not an integer', TG_ARGV[1]
            USING ERRCODE = 'PQ001',
            HINT = 'Pass the priority as an integer, e.g. pgq.enqueue_trigger(''entrypoint'', ''10'').';
    END IF;
    IF TG_OP = 'DELETE' THEN
        v_row := to_jsonb(OLD);
    ELSE
        v_row := to_jsonb(NEW);
    END IF;
    IF TG_NARGS > 2 AND TG_ARGV[2] <> '' THEN
        IF NOT v_row ? TG_ARGV[2] THEN
            RAISE EXCEPTION 'pgq: invalid argument trigger argument 3 (concurrency key column): % has no column %',
                TG_TABLE_NAME, TG_ARGV[2]
                USING ERRCODE = 'PQ001',
                HINT = 'Name the column whose value is the concurrency key, e.g. ''customer_id''.';
        END IF;
        v_key := v_row ->> TG_ARGV[2];
    END IF;
    IF TG_NARGS > 3 AND TG_ARGV[3] <> '' THEN
        IF NOT v_row ? TG_ARGV[3] THEN
            RAISE EXCEPTION 'pgq: invalid argument trigger argument 4 (dedupe key column): % has no column %',
                TG_TABLE_NAME, TG_ARGV[3]
                USING ERRCODE = 'PQ001',
                HINT = 'Name the column whose value is the dedupe key, e.g. ''id''.';
        END IF;
        v_dedupe_key := v_row ->> TG_ARGV[3];
    END IF;
    IF TG_NARGS > 6 AND TG_ARGV[6] <> '' THEN
        BEGIN
            v_window := TG_ARGV[6]::interval;
        EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow OR interval_field_overflow THEN
            RAISE EXCEPTION 'pgq: invalid argument trigger argument 7 (dedupe window): % is not an interval',
                TG_ARGV[6]
                USING ERRCODE = 'PQ001',
                HINT = 'Pass an interval, e.g. ''5 minutes''.';
        END;
    END IF;
    PERFORM pgq.enqueue(
        entrypoint => TG_ARGV[0],
        payload => v_row,
        priority => coalesce(TG_ARGV[1]::integer, 0),
        headers => jsonb_build_object('table', TG_TABLE_NAME, 'schema', TG_TABLE_SCHEMA, 'op', TG_OP),
        concurrency_key => v_key,
        dedupe_key => v_dedupe_key,
        -- Rows without a dedupe key are plain jobs.
        dedupe_scope => CASE WHEN v_dedupe_key IS NOT NULL THEN nullif(TG_ARGV[4], '') END,
        dedupe_mode => CASE WHEN v_dedupe_key IS NOT NULL THEN nullif(TG_ARGV[5], '') END,
        dedupe_window => CASE WHEN v_dedupe_key IS NOT NULL THEN v_window END
    );
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END
$$;

COMMENT ON FUNCTION pgq.enqueue_trigger() IS
'Row trigger: enqueues NEW (OLD on DELETE) to the entrypoint named by the first trigger argument.';

-- ==== sql/functions/fail.sql ====
-- pgq.fail: a handler failed. Fenced: acts only when worker_id still holds the job and,
-- when delivery is given, only on that delivery (a late call from a run that was already
-- re-queued and claimed again changes nothing).
-- Retries with exponential backoff and jitter while attempts remain, else the job is dead
-- (see pgq._fail for the policy); a job whose cancellation was requested is canceled.
-- Parameters: worker_id; job_id; error (the message or traceback, kept up to 64 KiB);
--   retry_in (optional: retry after exactly this delay instead of the backoff);
--   delivery (optional: the `deliveries` value the claim returned).
-- Returns 'queued', 'dead', 'canceled', or NULL when the worker no longer holds the job.
-- Raises PQ001 for invalid arguments.
CREATE OR REPLACE FUNCTION pgq.fail(
    worker_id uuid,
    job_id bigint,
    error text,
    retry_in interval DEFAULT NULL,
    delivery integer DEFAULT NULL
)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty):
-- tests/py/test_empty_queue_plans.py says why; JIT off, which that cost would start.
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pgq._check_worker_role(worker_id);
    IF worker_id IS NULL THEN
        PERFORM pgq._invalid('worker_id', 'must not be NULL', 'Pass the id that pgq.register_worker returned.');
    END IF;
    IF job_id IS NULL THEN
        PERFORM pgq._invalid('job_id', 'must not be NULL', 'Pass the id of the job that failed.');
    END IF;
    IF error IS NULL THEN
        PERFORM pgq._invalid('error', 'must not be NULL', 'Pass the error message or traceback.');
    END IF;
    PERFORM pgq._check_interval('retry_in', retry_in, interval '0');
    -- By the primary key alone: a test of status or an `=` on worker_id would let the planner
    -- walk the running index, full of dead entries under a held snapshot (see pgq.complete).
    -- Held by this worker means running (_jobs_held_check: a non-NULL worker_id means status = 'running').
    PERFORM 1
    FROM pgq._jobs AS j
    WHERE j.id = fail.job_id AND j.worker_id IS NOT DISTINCT FROM fail.worker_id
      AND (fail.delivery IS NULL OR j.deliveries = fail.delivery)
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN pgq._fail(job_id, error, retry_in);
END
$$;

COMMENT ON FUNCTION pgq.fail(uuid, bigint, text, interval, integer) IS
'Fail a job the worker holds (fenced, per delivery when given): ''queued'' (retry later), ''dead'', ''canceled'', or NULL if not held.';

-- ==== sql/functions/heartbeat.sql ====
-- pgq.heartbeat: the worker is alive. One UPDATE of the worker row extends the lease of
-- every job it holds (a job's lease runs from the worker's last heartbeat) and records the
-- lease in force, by which the worker paces its next beats.
-- running (optional): the ids of the jobs the worker runs or is settling. Jobs the database
-- says it holds but that are not in the list (a claim whose reply was lost, completions
-- lost in a failover) are released at once, or canceled when that was requested. The
-- worker must send it only while no claim of its own is in flight (a job it is about to
-- learn of would be released); jobs claimed after this call was sent are never released
-- by it (a beat the worker gave up on may still run once a lock it waits for is free).
-- Without it, nothing is released (0.1 workers).
-- Then the light sweep (pgq._reap without the walk of every running job, due schedules),
-- each part in a subtransaction: with any worker running, jobs of crashed workers start
-- coming back within lease + heartbeat interval whatever the pg_cron period (200 per
-- heartbeat of each live worker, the rest at the next beats or pg_cron's reap), and a
-- failing sweep cannot fail the heartbeat. The
-- sweep is bounded per call (pgq._reap: 200 jobs, a quarter of any statement_timeout), and
-- one that a timeout cancels anyway is caught (pgq._sweep): the heartbeat still succeeds.
-- Pruning is never done here (see pgq.sweep).
-- Returns the ids of the worker's jobs whose cancellation was requested (pgq.cancel).
-- Raises PQ001 (NULL id, bad running list), PQ002 (unknown worker), PQ003 (worker stopped
-- or reaped: it must stop its handlers' side effects where it can and register again).
CREATE OR REPLACE FUNCTION pgq.heartbeat(worker_id uuid, running bigint[] DEFAULT NULL)
RETURNS SETOF bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty):
-- tests/py/test_empty_queue_plans.py says why; JIT off, which that cost would start.
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pgq._check_worker_role(worker_id);
    IF running IS NOT NULL THEN
        PERFORM pgq._check_ids('running', running);
    END IF;
    UPDATE pgq._workers AS w
    SET heartbeat_at = now(),
        lease = (
            SELECT min(coalesce(q.lease, d.lease))
            FROM unnest(w.entrypoints) AS e (ep)
            CROSS JOIN pgq._default_settings AS d
            LEFT JOIN pgq._queues AS q ON q.entrypoint = e.ep
        )
    WHERE w.id = heartbeat.worker_id AND w.state = 'alive';
    IF NOT FOUND THEN
        PERFORM pgq._check_worker(worker_id);
    END IF;
    IF running IS NOT NULL THEN
        -- Only jobs claimed before this call was sent: a late run of a beat the worker gave up
        -- on must not release what it claimed since.
        PERFORM pgq._release(ARRAY[worker_id], running, claimed_before => statement_timestamp());
    END IF;
    PERFORM pgq._sweep(FALSE);
    RETURN QUERY
    SELECT j.id
    FROM pgq._jobs AS j
    -- Through _jobs_cancel_idx. A job with a worker is running (_jobs_held_check): a test of
    -- status would let the planner walk the running index instead, which a held snapshot
    -- fills with dead entries.
    WHERE j.worker_id = heartbeat.worker_id AND j.cancel_requested;
END
$$;

COMMENT ON FUNCTION pgq.heartbeat(uuid, bigint[]) IS
'Extend the leases of all jobs a worker holds (releasing held jobs not in running, when given); returns the ids of its jobs to cancel.';

-- ==== sql/functions/job.sql ====
-- pgq.job(job_id): one job's whole story, live or finished (while its outcome is kept), as
-- one jsonb document:
--   id, entrypoint, status (as pgq.job_status), finished (true for succeeded, canceled and
--   dead), payload, headers, priority, run_at (live jobs), attempt, max_attempts (live
--   jobs), deliveries, dedupe_key (live and succeeded jobs), concurrency_key, snoozes (live
--   jobs), worker_id (running jobs, or the worker of the last run), cancel_requested,
--   enqueued_at, started_at, finished_at, result (of a succeeded job), error (the last
--   error, or why it was canceled),
--   attempts: every failed attempt, oldest first: {attempt, deliveries, started_at,
--     finished_at, worker_id, error (in full)},
--   depends_on: the jobs it waits or waited for: [{id, status}],
--   dependents: the jobs waiting for it now: [{id, status}].
-- Returns NULL for an unknown id (or one pruned from the outcome log), and for a job the
-- caller may not read (pgq._may_read: its producer, the worker holding it, pgq_admin);
-- dependencies and dependents it may not read show no status / are left out.
-- Raises PQ001 for a NULL id.
CREATE OR REPLACE FUNCTION pgq.job(job_id bigint)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty):
-- tests/py/test_empty_queue_plans.py says why; JIT off, which that cost would start.
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_job pgq._jobs;
    v_out pgq._outcomes;
    v_doc jsonb;
    v_attempts jsonb;
    v_last_failure timestamptz;
    v_depends_on bigint[];
BEGIN
    IF job_id IS NULL THEN
        PERFORM pgq._invalid('job_id', 'must not be NULL', 'Pass a job id returned by pgq.enqueue.');
    END IF;

    SELECT
        coalesce(jsonb_agg(jsonb_build_object(
            'attempt', o.attempt, 'deliveries', o.deliveries, 'started_at', o.started_at,
            'finished_at', o.finished_at, 'worker_id', o.worker_id, 'error', o.error
        ) ORDER BY o.finished_at, o.attempt), '[]'::jsonb),
        max(o.finished_at)
    INTO v_attempts, v_last_failure
    FROM pgq._outcomes AS o
    WHERE o.job_id = job.job_id AND o.outcome = 'failed';

    SELECT j.* INTO v_job FROM pgq._jobs AS j WHERE j.id = job.job_id;
    IF FOUND THEN
        IF NOT pgq._may_read(v_job.enqueued_by, v_job.worker_id) THEN
            RETURN NULL;
        END IF;
        v_depends_on := v_job.depends_on;
        v_doc := jsonb_build_object(
            'id', v_job.id,
            'entrypoint', v_job.entrypoint,
            'status', v_job.status,
            'finished', v_job.status = 'dead',
            'payload', v_job.payload,
            'headers', v_job.headers,
            'priority', v_job.priority,
            'run_at', v_job.run_at,
            'attempt', v_job.attempt,
            'max_attempts', (
                SELECT coalesce(v_job.max_attempts, q.max_attempts, (pgq._defaults()).max_attempts)
                FROM (SELECT 1) AS one
                LEFT JOIN pgq._queues AS q ON q.entrypoint = v_job.entrypoint
            ),
            'deliveries', v_job.deliveries,
            'dedupe_key', v_job.dedupe_key,
            'concurrency_key', v_job.concurrency_key,
            'snoozes', v_job.snoozes,
            'worker_id', v_job.worker_id,
            'cancel_requested', v_job.cancel_requested,
            'enqueued_at', v_job.enqueued_at,
            'started_at', v_job.started_at,
            'finished_at', CASE WHEN v_job.status = 'dead' THEN v_last_failure END,
            'result', NULL,
            'error', v_job.last_error
        );
    ELSE
        SELECT o.* INTO v_out FROM pgq._final_outcome(job.job_id) AS o;
        IF NOT FOUND OR NOT pgq._may_read(v_out.enqueued_by, NULL) THEN
            RETURN NULL;
        END IF;
        v_depends_on := v_out.depends_on;
        v_doc := jsonb_build_object(
            'id', v_out.job_id,
            'entrypoint', v_out.entrypoint,
            'status', v_out.outcome,
            'finished', TRUE,
            'payload', v_out.payload,
            'headers', v_out.headers,
            'priority', v_out.priority,
            'run_at', NULL,
            'attempt', v_out.attempt,
            'max_attempts', NULL,
            'deliveries', v_out.deliveries,
            'dedupe_key', v_out.dedupe_key,
            'concurrency_key', v_out.concurrency_key,
            'worker_id', v_out.worker_id,
            'cancel_requested', FALSE,
            'enqueued_at', v_out.enqueued_at,
            'started_at', v_out.started_at,
            'finished_at', v_out.finished_at,
            'result', v_out.result,
            'error', v_out.error
        );
    END IF;

    RETURN v_doc || jsonb_build_object(
        'attempts', v_attempts,
        'depends_on', (
            SELECT coalesce(jsonb_agg(jsonb_build_object('id', d.id, 'status', pgq.job_status(d.id))
                ORDER BY d.id), '[]'::jsonb)
            FROM unnest(v_depends_on) AS d (id)
        ),
        'dependents', (
            SELECT coalesce(jsonb_agg(jsonb_build_object('id', w.id, 'status', w.status) ORDER BY w.id), '[]'::jsonb)
            FROM pgq._jobs AS w
            WHERE w.status = 'waiting' AND w.depends_on @> ARRAY[job.job_id]
              AND pgq._may_read(w.enqueued_by, w.worker_id)
        )
    );
END
$$;

COMMENT ON FUNCTION pgq.job(bigint) IS
'One job''s whole story as jsonb: status, payload, attempts with their errors, result, timings, dependencies; NULL if unknown or not the caller''s to read (its producer, its worker, admins).';

-- ==== sql/functions/job_status.sql ====
-- pgq.job_status: 'queued', 'waiting', 'running', 'dead' for a live job; 'succeeded' or
-- 'canceled' for a finished one; NULL for an unknown id (or one pruned from the log), and
-- for a job the caller may not read (pgq._may_read: its producer, the worker holding it,
-- pgq_admin), so that counting ids tells a producer nothing of others' jobs.
-- Raises PQ001 for a NULL id.
CREATE OR REPLACE FUNCTION pgq.job_status(job_id bigint)
RETURNS text
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty):
-- tests/py/test_empty_queue_plans.py says why; JIT off, which that cost would start.
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_status text;
    v_visible boolean;
BEGIN
    IF job_id IS NULL THEN
        PERFORM pgq._invalid('job_id', 'must not be NULL', 'Pass a job id returned by pgq.enqueue.');
    END IF;
    SELECT j.status, pgq._may_read(j.enqueued_by, j.worker_id) INTO v_status, v_visible
    FROM pgq._jobs AS j WHERE j.id = job_status.job_id;
    IF FOUND THEN
        RETURN CASE WHEN v_visible THEN v_status END;
    END IF;
    SELECT o.outcome, pgq._may_read(o.enqueued_by, NULL) INTO v_status, v_visible
    FROM pgq._final_outcome(job_status.job_id) AS o;
    RETURN CASE WHEN v_visible THEN v_status END;
END
$$;

COMMENT ON FUNCTION pgq.job_status(bigint) IS
'Status of a job, live or finished: queued, waiting, running, dead, succeeded, canceled; NULL if unknown or not the caller''s to read (its producer, its worker, admins).';

-- ==== sql/functions/pause.sql ====
-- pgq.pause: claims skip the entrypoint until pgq.resume; running jobs finish; enqueue
-- still accepts jobs. Returns nothing. Raises PQ001 for an invalid entrypoint.
CREATE OR REPLACE FUNCTION pgq.pause(entrypoint text)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pgq._check_entrypoint('entrypoint', entrypoint);
    INSERT INTO pgq._queues AS q (entrypoint, paused)
    VALUES (pause.entrypoint, TRUE)
    ON CONFLICT ON CONSTRAINT _queues_pkey DO UPDATE SET paused = TRUE, updated_at = now();
END
$$;

COMMENT ON FUNCTION pgq.pause(text) IS 'Stop claims of an entrypoint until pgq.resume.';

-- ==== sql/functions/prune.sql ====
-- pgq.prune: outcome-log retention. Each outcome is kept for its entrypoint's retention
-- (pgq.configure, default 7 days). Whole daily partitions older than the longest retention
-- are dropped (cheap at any volume); rows of entrypoints with a shorter retention are
-- deleted in batches of 10000 (at most 50 batches a call, so one call stays short; the
-- next call continues). Also creates the coming days' partitions.
-- Creating and dropping a partition needs an exclusive lock on the log, which any open
-- transaction that read the log holds off; completions would queue behind the waiting
-- DDL, so it waits at most 100 ms and otherwise leaves that partition to the next call.
-- The DDL comes last, after the deletes, so that the lock is held only until commit.
-- pg_cron runs it hourly; without pg_cron the workers' sweep runs it when the last prune
-- is over two hours old. Concurrent calls: one prunes, the others return 0.
-- Returns the number of outcomes removed.
CREATE OR REPLACE FUNCTION pgq.prune()
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- It reads whole partitions of the outcome log: sequential scans are right here, also when
-- pgq.sweep (which turns them off for pgq._jobs) calls it.
SET enable_seqscan = on
AS $$
DECLARE
    v_default interval := (pgq._defaults()).retention;
    v_longest interval;
    v_shortest interval;
    v_partition record;
    v_expired text[] := '{}';
    v_name text;
    v_removed bigint := 0;
    v_rows bigint;
    v_batches integer := 0;
    v_lock_timeout text := current_setting('lock_timeout');
BEGIN
    -- Key: 'pgq', then 2 for pruning.
    IF NOT pg_try_advisory_xact_lock(7366513, 2) THEN
        RETURN 0;
    END IF;
    INSERT INTO pgq._maintenance AS m (task, last_run) VALUES ('prune', now())
    ON CONFLICT ON CONSTRAINT _maintenance_pkey DO UPDATE SET last_run = excluded.last_run;

    SELECT greatest(max(q.retention), v_default), least(min(q.retention), v_default)
    INTO v_longest, v_shortest
    FROM pgq._queues AS q;

    -- Deletes first, DDL last: the exclusive lock that creating or dropping a partition
    -- takes on the log lasts until commit, and every completion waits for it.
    FOR v_partition IN
        SELECT
            c.relname,
            to_date(substr(c.relname, 11), 'YYYYMMDD')::timestamp AT TIME ZONE 'UTC' AS day_start
        FROM pg_catalog.pg_inherits AS i
        JOIN pg_catalog.pg_class AS c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'pgq._outcomes'::regclass AND c.relname ~ '^_outcomes_[0-9]{8}$'
        ORDER BY c.relname
    LOOP
        IF v_partition.day_start + interval '1 day' <= now() - v_longest THEN
            v_expired := v_expired || v_partition.relname;
        ELSIF v_partition.day_start < now() - v_shortest THEN
            -- Some entrypoints' rows in this day may have expired already.
            LOOP
                EXIT WHEN v_batches >= 50;
                EXECUTE format(
                    'DELETE FROM pgq.%1$I AS o WHERE o.ctid = ANY (ARRAY('
                    '  SELECT e.ctid FROM pgq.%1$I AS e'
                    '  LEFT JOIN pgq._queues AS q ON q.entrypoint = e.entrypoint'
                    '  WHERE e.finished_at < now() - coalesce(q.retention, $1) LIMIT 10000))',
                    v_partition.relname
                ) USING v_default;
                GET DIAGNOSTICS v_rows = ROW_COUNT;
                v_removed := v_removed + v_rows;
                v_batches := v_batches + 1;
                EXIT WHEN v_rows < 10000;
            END LOOP;
        END IF;
    END LOOP;

    -- Rows that fell into the default partition (no daily partition existed yet).
    WHILE v_batches < 50 LOOP
        DELETE FROM pgq._outcomes_default AS o WHERE o.ctid = ANY (ARRAY(
            SELECT e.ctid FROM pgq._outcomes_default AS e
            LEFT JOIN pgq._queues AS q ON q.entrypoint = e.entrypoint
            WHERE e.finished_at < now() - coalesce(q.retention, v_default)
            LIMIT 10000
        ));
        GET DIAGNOSTICS v_rows = ROW_COUNT;
        v_removed := v_removed + v_rows;
        v_batches := v_batches + 1;
        EXIT WHEN v_rows < 10000;
    END LOOP;

    -- The DDL: each waits at most 100 ms for its lock, else it is left to a later prune.
    PERFORM set_config('lock_timeout', '100ms', TRUE);
    FOREACH v_name IN ARRAY v_expired LOOP
        -- Counted before the lock: nothing is added to a partition this old.
        EXECUTE format('SELECT count(*) FROM pgq.%I', v_name) INTO v_rows;
        BEGIN
            EXECUTE format('LOCK TABLE pgq._outcomes, pgq.%I IN ACCESS EXCLUSIVE MODE', v_name);
            EXECUTE format('DROP TABLE pgq.%I', v_name);
            v_removed := v_removed + v_rows;
        EXCEPTION WHEN lock_not_available THEN
            RAISE NOTICE 'pgq.prune: % is in use; it will be dropped by a later prune', v_name;
        END;
    END LOOP;
    BEGIN
        PERFORM pgq._ensure_partitions();
    EXCEPTION WHEN lock_not_available THEN
        RAISE NOTICE 'pgq.prune: the outcome log is in use; partitions will be created by a later prune';
    END;
    PERFORM set_config('lock_timeout', v_lock_timeout, TRUE);
    RETURN v_removed;
END
$$;

COMMENT ON FUNCTION pgq.prune() IS
'Outcome-log retention: drop expired daily partitions, delete rows past a shorter per-entrypoint retention; returns how many outcomes it removed.';

-- ==== sql/functions/reap.sql ====
-- pgq.reap: the sweep. Workers silent for longer than their lease (the shortest lease of
-- their entrypoints, or the one in force at their last heartbeat if that was longer) are
-- marked dead; jobs held by workers that are not alive go back to queued (deliveries is
-- kept, so the re-delivery is visible), or dead when they lost their worker
-- max_deliveries times (a poison pill); jobs running longer than
-- their entrypoint's timeout plus its lease as grace fail with a timeout error, even when
-- the worker still heartbeats. Rows of workers gone for over a day are deleted.
-- pg_cron runs it every minute; pgq.sweep runs the same reap, pgq.heartbeat and
-- pgq.register_worker a lighter, bounded form (pgq._reap). Only one sweep runs at a time
-- (a transaction-level advisory lock); a concurrent call returns 0. A worker whose row a
-- claim holds (until it commits) is left to the next sweep.
-- Every UPDATE re-checks the job's state, so a job completed meanwhile is never touched.
-- Records when it ran in pgq._maintenance (task 'reap', at most once a second), for
-- pgq.sweeps and pgq doctor: pg_cron (or an operator) calls it; workers' sweeps do not, so
-- the record says whether pg_cron's sweep runs.
-- Returns the number of jobs released or failed.
CREATE OR REPLACE FUNCTION pgq.reap()
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty):
-- tests/py/test_empty_queue_plans.py says why; JIT off, which that cost would start.
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
    v_reaped integer;
BEGIN
    v_reaped := pgq._reap(TRUE);
    -- Only a call that swept records it, and never waits for the record's row: pgq._reap
    -- swept when this transaction holds the sweep lock (taking it again here is a no-op),
    -- and a concurrent sweep that holds the row holds that lock (a waiting record would
    -- fail a call under lock_timeout). Read first: no write when the row is fresh.
    IF pg_try_advisory_xact_lock(7366513, 1) AND NOT EXISTS (
        SELECT 1 FROM pgq._maintenance AS m
        WHERE m.task = 'reap' AND m.last_run > pg_catalog.now() - interval '1 second'
    ) THEN
        INSERT INTO pgq._maintenance AS m (task, last_run) VALUES ('reap', pg_catalog.now())
        ON CONFLICT ON CONSTRAINT _maintenance_pkey DO UPDATE SET last_run = excluded.last_run;
    END IF;
    RETURN v_reaped;
END
$$;

COMMENT ON FUNCTION pgq.reap() IS
'Sweep: mark silent workers dead, re-queue their jobs, fail jobs past their timeout; returns the number of jobs acted on.';

-- ==== sql/functions/register_worker.sql ====
-- pgq.register_worker: a worker announces itself before it claims.
-- Parameters: name (free text shown in pgq.workers, e.g. host:pid); entrypoints (what it
--   will claim). Returns the worker id to pass to claim, heartbeat, complete and fail.
-- Also runs the heartbeats' light reap (pgq._reap: bounded per call, in a subtransaction),
-- so a worker restarted after a crash recovers the jobs of its predecessor without waiting
-- for pg_cron, and a registration succeeds whatever maintenance is due, under any
-- statement_timeout: a failing or cancelled reap is a WARNING, never the registration's
-- error (the rest is left to the heartbeats and sweeps). The worker id is bound to the login role
-- (session_user) that registers it: only that role and pgq_admin may act as the worker.
-- Raises PQ001 for invalid arguments.
CREATE OR REPLACE FUNCTION pgq.register_worker(name text, entrypoints text[])
RETURNS uuid
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty), as in
-- pgq.heartbeat, for the reap; JIT off.
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_id uuid;
BEGIN
    IF name IS NULL OR btrim(name) = '' OR length(name) > 200 THEN
        PERFORM pgq._invalid('name', 'must be 1 to 200 characters long',
            'Name the worker, e.g. host:pid.');
    END IF;
    PERFORM pgq._check_entrypoints('entrypoints', entrypoints);
    INSERT INTO pgq._workers AS w (name, entrypoints, registered_by)
    SELECT register_worker.name, array_agg(DISTINCT e.ep ORDER BY e.ep), session_user
    FROM unnest(register_worker.entrypoints) AS e (ep)
    RETURNING w.id INTO v_id;
    BEGIN
        PERFORM pgq._reap(FALSE);
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        RAISE WARNING 'pgq: reap failed: % (%)', sqlerrm, sqlstate;
    END;
    RETURN v_id;
END
$$;

COMMENT ON FUNCTION pgq.register_worker(text, text[]) IS
'Register a worker for some entrypoints; returns its id.';

-- ==== sql/functions/release.sql ====
-- pgq.release: a worker gives back the jobs it holds but does not know of. When the reply
-- of a claim is lost (the connection broke after the claim committed), the worker holds
-- jobs it will never run, and its heartbeats would keep them from everyone else; once
-- reconnected it calls this with the ids it does know of (running or being completed).
-- The others go back to queued at once (deliveries is kept, so the next run sees it), or
-- to canceled when cancellation was requested.
-- Parameters: worker_id; keep (ids the worker still holds on purpose; may be empty).
-- Returns the number of jobs released or canceled. Raises PQ001 for invalid arguments, PQ002/PQ003
-- for an unknown or gone worker.
CREATE OR REPLACE FUNCTION pgq.release(worker_id uuid, keep bigint[])
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty):
-- tests/py/test_empty_queue_plans.py says why; JIT off, which that cost would start.
SET enable_seqscan = off
SET jit = off
AS $$
BEGIN
    PERFORM pgq._check_worker_role(worker_id);
    PERFORM pgq._check_worker(worker_id);
    PERFORM pgq._check_ids('keep', keep);
    -- Only jobs claimed before this call was sent (see pgq._release).
    RETURN pgq._release(ARRAY[worker_id], keep, claimed_before => statement_timestamp());
END
$$;

COMMENT ON FUNCTION pgq.release(uuid, bigint[]) IS
'Re-queue the running jobs of a worker that are not in keep (after a claim whose reply was lost); returns how many.';

-- ==== sql/functions/resume.sql ====
-- pgq.resume: claims take the entrypoint's jobs again; idle workers are woken.
-- Returns nothing. Raises PQ001 for an invalid entrypoint.
CREATE OR REPLACE FUNCTION pgq.resume(entrypoint text)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pgq._check_entrypoint('entrypoint', entrypoint);
    UPDATE pgq._queues AS q
    SET paused = FALSE, updated_at = now()
    WHERE q.entrypoint = resume.entrypoint AND q.paused;
    IF FOUND THEN
        PERFORM pg_notify('pgq', resume.entrypoint);
    END IF;
END
$$;

COMMENT ON FUNCTION pgq.resume(text) IS 'Let claims take an entrypoint''s jobs again.';

-- ==== sql/functions/retry.sql ====
-- pgq.retry: dead jobs go back to queued now, with attempt, the count of lost deliveries
-- (see max_deliveries) and the count of snoozes (see max_snoozes) reset to 0. A dead job whose
-- dedupe_key is taken by a live job stays dead (retrying it would duplicate work); of
-- several dead jobs with one dedupe_key, only the newest is retried.
-- Other ids are ignored. Returns the number of jobs re-queued. Raises PQ001.
CREATE OR REPLACE FUNCTION pgq.retry(job_ids bigint[])
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty):
-- tests/py/test_empty_queue_plans.py says why; JIT off, which that cost would start.
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_count integer := 0;
    v_job record;
BEGIN
    PERFORM pgq._check_ids('job_ids', job_ids);
    FOR v_job IN
        -- One per dedupe_key; a job without a key is its own group (by id, never mixed up
        -- with a key that happens to spell an id).
        SELECT DISTINCT ON (d.entrypoint, d.dedupe_key, CASE WHEN d.dedupe_key IS NULL THEN d.id END)
            d.id, d.entrypoint
        FROM pgq._jobs AS d
        WHERE d.id = ANY (job_ids) AND d.status = 'dead'
        ORDER BY d.entrypoint, d.dedupe_key, CASE WHEN d.dedupe_key IS NULL THEN d.id END, d.id DESC
    LOOP
        -- A live job may take the dedupe_key at any moment, even one enqueued concurrently:
        -- the unique index decides, and the loser stays dead.
        BEGIN
            UPDATE pgq._jobs AS j
            SET status = 'queued', attempt = 0, lost = 0, snoozes = 0, run_at = now()
            WHERE j.id = v_job.id AND j.status = 'dead';
            IF FOUND THEN
                v_count := v_count + 1;
                PERFORM pg_notify('pgq', v_job.entrypoint);
            END IF;
        EXCEPTION WHEN unique_violation THEN
            NULL;
        END;
    END LOOP;
    RETURN v_count;
END
$$;

COMMENT ON FUNCTION pgq.retry(bigint[]) IS
'Re-queue dead jobs now with attempts reset; returns how many.';

-- ==== sql/functions/run_schedules.sql ====
-- pgq.run_schedules: enqueue every schedule due at `now` (default: the current time).
-- Exactly once per schedule and minute however many sessions call it at once: a due
-- schedule is locked (SKIP LOCKED) and moved to its next run in the same transaction, and
-- the job carries the dedupe key 'schedule:<name>:<fire time>'. After an outage, a
-- schedule that missed several runs fires once (for its earliest missed time), not once per
-- missed minute. The job's headers name the schedule and the fire time.
-- pg_cron runs it every minute; the workers' heartbeat sweep runs it too.
-- Returns the number of jobs enqueued.
CREATE OR REPLACE FUNCTION pgq.run_schedules(now timestamptz DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := coalesce(run_schedules.now, pg_catalog.now());
    v_schedule record;
    v_fire text;
    v_count integer := 0;
BEGIN
    IF v_now < '1970-01-01 00:00Z' OR v_now >= '10000-01-01 00:00Z' THEN
        PERFORM pgq._invalid('now', format('%s is out of range', v_now),
            'Pass a time between 1970 and 9999, or NULL for the current time.');
    END IF;
    FOR v_schedule IN
        SELECT s.name, s.cron, s.entrypoint, s.payload, s.next_run
        FROM pgq._schedules AS s
        WHERE s.next_run <= v_now
        ORDER BY s.next_run, s.name
        FOR UPDATE SKIP LOCKED
    LOOP
        v_fire := to_char(v_schedule.next_run AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI"Z"');
        PERFORM pgq.enqueue(
            entrypoint => v_schedule.entrypoint,
            payload => v_schedule.payload,
            dedupe_key => format('schedule:%s:%s', v_schedule.name, v_fire),
            headers => jsonb_build_object('schedule', v_schedule.name, 'fire_time', v_fire)
        );
        UPDATE pgq._schedules AS s
        SET last_run = v_schedule.next_run,
            next_run = pgq._cron_next(v_schedule.cron, greatest(v_now, v_schedule.next_run))
        WHERE s.name = v_schedule.name;
        v_count := v_count + 1;
    END LOOP;
    RETURN v_count;
END
$$;

COMMENT ON FUNCTION pgq.run_schedules(timestamptz) IS
'Enqueue the schedules due at now (default the current time), once per schedule and minute; returns how many.';

-- ==== sql/functions/schedule.sql ====
-- pgq.schedule: create or replace a periodic job. Every minute that matches `cron` (5
-- fields, UTC: minute hour day-of-month month day-of-week, with ranges, lists, steps and
-- names; or @hourly, @daily, @weekly, @monthly, @yearly), one job is enqueued to
-- `entrypoint` with `payload`, by pgq.run_schedules (pg_cron and the workers' sweep).
-- The schedule is a row in this database, so it works whatever database pg_cron lives in.
--   SELECT pgq.schedule('nightly-report', '30 2 * * *', 'send_report', '{"kind": "daily"}');
-- Replacing a schedule keeps its last run, and its next run too when the cron text is the
-- same (re-declaring schedules at every deploy skips no due run). Returns the next run.
-- Raises PQ001 for an invalid name or entrypoint, PQ006 for an invalid cron expression or
-- one that matches no date (such as '0 0 31 2 *').
CREATE OR REPLACE FUNCTION pgq.schedule(name text, cron text, entrypoint text, payload jsonb DEFAULT NULL)
RETURNS timestamptz
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_next timestamptz;
BEGIN
    IF name IS NULL OR btrim(name) = '' OR length(name) > 200 OR name ~ '[[:cntrl:]]' THEN
        PERFORM pgq._invalid('name', 'must be 1 to 200 printable characters',
            'Name the schedule, e.g. ''nightly-report''.');
    END IF;
    PERFORM pgq._cron_parse(cron);
    PERFORM pgq._check_job(entrypoint, payload, NULL, NULL, NULL, NULL);
    v_next := pgq._cron_next(cron, now());
    IF v_next IS NULL THEN
        RAISE EXCEPTION 'pgq: invalid cron expression: % matches no date', cron
            USING ERRCODE = 'PQ006', HINT = 'Check the day of month against the month, e.g. no 31 in February.';
    END IF;
    INSERT INTO pgq._schedules AS s (name, cron, entrypoint, payload, next_run)
    VALUES (schedule.name, btrim(schedule.cron), schedule.entrypoint, schedule.payload, v_next)
    ON CONFLICT ON CONSTRAINT _schedules_pkey DO UPDATE
    SET cron = excluded.cron,
        entrypoint = excluded.entrypoint,
        payload = excluded.payload,
        next_run = CASE WHEN s.cron = excluded.cron THEN s.next_run ELSE excluded.next_run END
    RETURNING s.next_run INTO v_next;
    RETURN v_next;
END
$$;

COMMENT ON FUNCTION pgq.schedule(text, text, text, jsonb) IS
'Create or replace a periodic job (5-field cron, UTC); returns its next run time.';

-- ==== sql/functions/settings.sql ====
-- pgq.settings: the effective settings of entrypoints, defaults filled in, whether or not
-- pgq.configure was ever called for them. Workers read the lease here to pace their
-- heartbeats and the timeout to stop handlers; from psql:
--   SELECT * FROM pgq.settings(ARRAY['email']);
-- Two call shapes, as pgq.claim has (a call shape keeps its result shape across releases;
-- new columns come through a new form):
--   pgq.settings(entrypoints, protocol => 2): this function, the row of 0.2.0 on
--     (max_deliveries, key_concurrency, max_snoozes added);
--   pgq.settings(entrypoints): the row of 0.1.0, the same settings (below).
-- Returns one row per distinct entrypoint. Raises PQ001 for invalid entrypoints or a
-- protocol other than 2.
CREATE OR REPLACE FUNCTION pgq.settings(entrypoints text[], protocol integer)
RETURNS TABLE (
    entrypoint text,
    paused boolean,
    max_attempts integer,
    backoff_base interval,
    backoff_max interval,
    lease interval,
    timeout interval,
    concurrency integer,
    rate numeric,
    retention interval,
    max_deliveries integer,
    key_concurrency integer,
    max_snoozes integer
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    IF protocol IS DISTINCT FROM 2 THEN
        PERFORM pgq._invalid('protocol', format('%s is not a settings protocol', coalesce(protocol::text, 'NULL')),
            'protocol => 2 returns the rows of 0.2.0 on; call pgq.settings without protocol for those of 0.1.0.');
    END IF;
    PERFORM pgq._check_entrypoints('entrypoints', entrypoints);
    RETURN QUERY
    SELECT
        e.ep,
        coalesce(q.paused, FALSE),
        coalesce(q.max_attempts, d.max_attempts),
        coalesce(q.backoff_base, d.backoff_base),
        coalesce(q.backoff_max, d.backoff_max),
        coalesce(q.lease, d.lease),
        coalesce(q.timeout, d.timeout),
        q.concurrency,
        q.rate,
        coalesce(q.retention, d.retention),
        coalesce(q.max_deliveries, d.max_deliveries),
        q.key_concurrency,
        coalesce(q.max_snoozes, d.max_snoozes)
    FROM (SELECT DISTINCT u.ep FROM unnest(settings.entrypoints) AS u (ep)) AS e
    CROSS JOIN pgq._defaults() AS d
    LEFT JOIN pgq._queues AS q ON q.entrypoint = e.ep
    ORDER BY e.ep;
END
$$;

COMMENT ON FUNCTION pgq.settings(text[], integer) IS
'Effective settings of entrypoints (defaults filled in): paused, max_attempts, backoff, lease, timeout, limits, retention, max_deliveries, key_concurrency, max_snoozes.';

-- The 0.1.0 form: the same settings, the columns of 0.1.0 ($1: entrypoints).
CREATE OR REPLACE FUNCTION pgq.settings(entrypoints text[])
RETURNS TABLE (
    entrypoint text,
    paused boolean,
    max_attempts integer,
    backoff_base interval,
    backoff_max interval,
    lease interval,
    timeout interval,
    concurrency integer,
    rate numeric,
    retention interval
)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT
        s.entrypoint,
        s.paused,
        s.max_attempts,
        s.backoff_base,
        s.backoff_max,
        s.lease,
        s.timeout,
        s.concurrency,
        s.rate,
        s.retention
    FROM pgq.settings($1, 2) AS s;
END;

COMMENT ON FUNCTION pgq.settings(text[]) IS
'Effective settings of entrypoints (defaults filled in): paused, max_attempts, backoff, lease, timeout, limits, retention; the rows of 0.1.0.';

-- ==== sql/functions/snooze.sql ====
-- pgq.snooze: a handler puts its job back without spending an attempt (the rate limit of an
-- API it calls, a resource not ready yet). Fenced like pgq.fail: acts only when worker_id
-- still holds the job and, when delivery is given, only on that delivery.
-- The job is queued again with run_at = now() + delay; attempt is unchanged, snoozes + 1;
-- the outcome log gets a 'snoozed' row (attempt, deliveries, started/finished, worker).
-- A job may snooze max_snoozes times (pgq.configure, default 100): past that, the snooze
-- fails the job instead (an attempt spent, retry or dead by the entrypoint's policy), so
-- that a job cannot snooze forever. A job whose cancellation was requested is canceled.
-- Parameters: worker_id; job_id; delay (0 to 10 years); delivery (optional: the
--   `deliveries` value the claim returned).
-- Returns 'snoozed'; 'queued', 'dead' or 'canceled' when it failed or canceled the job
-- instead (see pgq.fail); NULL when the worker no longer holds the job.
-- Raises PQ001 for invalid arguments.
CREATE OR REPLACE FUNCTION pgq.snooze(
    worker_id uuid,
    job_id bigint,
    delay interval,
    delivery integer DEFAULT NULL
)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty):
-- tests/py/test_empty_queue_plans.py says why; JIT off, which that cost would start.
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_job pgq._jobs;
    v_cap integer;
    v_limited boolean;
    v_now timestamptz := clock_timestamp();
BEGIN
    IF worker_id IS NULL THEN
        PERFORM pgq._invalid('worker_id', 'must not be NULL', 'Pass the id that pgq.register_worker returned.');
    END IF;
    IF job_id IS NULL THEN
        PERFORM pgq._invalid('job_id', 'must not be NULL', 'Pass the id of the job to snooze.');
    END IF;
    IF delay IS NULL THEN
        PERFORM pgq._invalid('delay', 'must not be NULL', 'Pass how long to wait, e.g. interval ''30 seconds''.');
    END IF;
    PERFORM pgq._check_worker_role(worker_id);
    PERFORM pgq._check_interval('delay', delay, interval '0');
    -- By the primary key alone (see pgq.fail); held by this worker means running
    -- (_jobs_held_check: a non-NULL worker_id means status = 'running').
    SELECT j.* INTO v_job
    FROM pgq._jobs AS j
    WHERE j.id = snooze.job_id AND j.worker_id IS NOT DISTINCT FROM snooze.worker_id
      AND (snooze.delivery IS NULL OR j.deliveries = snooze.delivery)
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT coalesce(q.max_snoozes, d.max_snoozes),
           q.concurrency IS NOT NULL OR q.key_concurrency IS NOT NULL
    INTO v_cap, v_limited
    FROM pgq._default_settings AS d
    LEFT JOIN pgq._queues AS q ON q.entrypoint = v_job.entrypoint;
    IF v_job.cancel_requested OR v_job.snoozes >= v_cap THEN
        RETURN pgq._fail(v_job.id,
            format('snoozed %s times (max_snoozes %s): a job may not snooze forever', v_job.snoozes + 1, v_cap),
            NULL);
    END IF;
    INSERT INTO pgq._outcomes (
        job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, started_at, finished_at,
        worker_id, error, concurrency_key
    )
    VALUES (v_job.id, v_job.entrypoint, 'snoozed', v_job.priority, v_job.attempt, v_job.deliveries,
            v_job.enqueued_at, v_job.started_at, v_now, v_job.worker_id, format('snoozed for %s', delay),
            v_job.concurrency_key);
    UPDATE pgq._jobs AS j
    SET status = 'queued',
        run_at = now() + snooze.delay,
        snoozes = j.snoozes + 1,
        worker_id = NULL,
        started_at = NULL
    WHERE j.id = v_job.id;
    IF v_limited OR delay = interval '0' THEN
        PERFORM pg_notify('pgq', v_job.entrypoint);
    END IF;
    RETURN 'snoozed';
END
$$;

COMMENT ON FUNCTION pgq.snooze(uuid, bigint, interval, integer) IS
'Put a held job back for delay without spending an attempt (fenced, per delivery when given): ''snoozed'', or NULL if not held.';

-- ==== sql/functions/stats.sql ====
-- pgq.stats: per-entrypoint throughput and latency over the last `since` (default 5
-- minutes), from the outcome log. succeeded: jobs completed; failed: failed attempts; dead:
-- those of the failed attempts that left their job dead; canceled: jobs canceled;
-- per_second: succeeded / since;
-- wait = started - enqueued and run = finished - started of the succeeded jobs, as the 50th,
-- 95th and 99th percentiles. The log's BRIN index on finished_at limits the scan to the
-- window, so it is cheap to call every second.
--   SELECT * FROM pgq.stats('1 hour');
-- Raises PQ001 for a NULL `since`, or one under 1 second or over 31 days.
CREATE OR REPLACE FUNCTION pgq.stats(since interval DEFAULT '5 minutes')
RETURNS TABLE (
    entrypoint text,
    succeeded bigint,
    failed bigint,
    dead bigint,
    canceled bigint,
    per_second numeric,
    wait_p50 interval,
    wait_p95 interval,
    wait_p99 interval,
    run_p50 interval,
    run_p95 interval,
    run_p99 interval
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    IF since IS NULL OR since < interval '1 second' OR since > interval '31 days' THEN
        PERFORM pgq._invalid('since', format('%s is out of range', coalesce(since::text, 'NULL')),
            'Use an interval from 1 second to 31 days, e.g. ''5 minutes''.');
    END IF;
    RETURN QUERY
    WITH w AS (
        SELECT
            o.entrypoint,
            o.outcome,
            o.fatal,
            extract(EPOCH FROM o.started_at - o.enqueued_at) AS wait_s,
            extract(EPOCH FROM o.finished_at - o.started_at) AS run_s
        FROM pgq._outcomes AS o
        WHERE o.finished_at >= now() - stats.since
    ),
    p AS (
        SELECT
            w.entrypoint,
            count(*) FILTER (WHERE w.outcome = 'succeeded') AS succeeded,
            count(*) FILTER (WHERE w.outcome = 'failed') AS failed,
            count(*) FILTER (WHERE w.fatal) AS dead,
            count(*) FILTER (WHERE w.outcome = 'canceled') AS canceled,
            percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY w.wait_s)
                FILTER (WHERE w.outcome = 'succeeded') AS wait_q,
            percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY w.run_s)
                FILTER (WHERE w.outcome = 'succeeded') AS run_q
        FROM w
        GROUP BY w.entrypoint
    )
    SELECT
        p.entrypoint,
        p.succeeded,
        p.failed,
        p.dead,
        p.canceled,
        p.succeeded / extract(EPOCH FROM stats.since),
        make_interval(secs => p.wait_q[1]),
        make_interval(secs => p.wait_q[2]),
        make_interval(secs => p.wait_q[3]),
        make_interval(secs => p.run_q[1]),
        make_interval(secs => p.run_q[2]),
        make_interval(secs => p.run_q[3])
    FROM p
    ORDER BY p.entrypoint;
END
$$;

COMMENT ON FUNCTION pgq.stats(interval) IS
'Per-entrypoint succeeded/failed/dead/canceled counts, jobs per second and wait/run latency percentiles over the last `since`.';

-- ==== sql/functions/sweep.sql ====
-- pgq.sweep: the maintenance a worker runs in its own transaction, beside (never inside)
-- its heartbeat, when pg_cron may be absent: pgq.reap, pgq.run_schedules, and pgq.prune
-- when the last prune is over two hours old. Each task runs in a subtransaction: one that
-- fails is reported as a WARNING and neither undoes the others nor fails the call.
-- Returns the number of jobs pgq.reap acted on.
CREATE OR REPLACE FUNCTION pgq.sweep()
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty):
-- tests/py/test_empty_queue_plans.py says why; JIT off, which that cost would start.
SET enable_seqscan = off
SET jit = off
AS $$
BEGIN
    RETURN pgq._sweep(TRUE);
END
$$;

COMMENT ON FUNCTION pgq.sweep() IS
'Maintenance for workers: reap, due schedules, an overdue prune, each in its own subtransaction; returns the jobs reaped.';

-- ==== sql/functions/unregister_worker.sql ====
-- pgq.unregister_worker: graceful exit. The worker's unfinished jobs go back to queued at
-- once (deliveries is kept, so the next run sees it was delivered before); jobs whose
-- cancellation was requested are canceled instead. The worker can no longer complete or
-- fail anything. Idempotent for a worker that already stopped or was reaped.
-- Returns the number of jobs released. Raises PQ001 (NULL id), PQ002 (unknown worker).
CREATE OR REPLACE FUNCTION pgq.unregister_worker(worker_id uuid)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty):
-- tests/py/test_empty_queue_plans.py says why; JIT off, which that cost would start.
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_found boolean;
BEGIN
    PERFORM pgq._check_worker_role(worker_id);
    IF worker_id IS NULL THEN
        PERFORM pgq._invalid('worker_id', 'must not be NULL', 'Pass the id that pgq.register_worker returned.');
    END IF;
    UPDATE pgq._workers AS w
    SET state = 'stopped', stopped_at = now()
    WHERE w.id = unregister_worker.worker_id AND w.state = 'alive';
    IF NOT FOUND THEN
        SELECT TRUE INTO v_found FROM pgq._workers AS w WHERE w.id = unregister_worker.worker_id;
        IF v_found IS NULL THEN
            RAISE EXCEPTION 'pgq: unknown worker_id %', worker_id
                USING ERRCODE = 'PQ002', HINT = 'Pass the id that pgq.register_worker returned.';
        END IF;
    END IF;
    RETURN pgq._release_gone(worker_id, FALSE);
END
$$;

COMMENT ON FUNCTION pgq.unregister_worker(uuid) IS
'Graceful worker exit: its unfinished jobs are re-queued at once; returns how many.';

-- ==== sql/functions/unschedule.sql ====
-- pgq.unschedule: remove a periodic job. Jobs it already enqueued are not touched.
-- Returns true when the schedule existed. Raises PQ001 for a NULL name.
CREATE OR REPLACE FUNCTION pgq.unschedule(name text)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    IF name IS NULL THEN
        PERFORM pgq._invalid('name', 'must not be NULL', 'Pass the name given to pgq.schedule.');
    END IF;
    DELETE FROM pgq._schedules AS s WHERE s.name = unschedule.name;
    RETURN FOUND;
END
$$;

COMMENT ON FUNCTION pgq.unschedule(text) IS 'Remove a periodic job; returns whether it existed.';

-- ==== sql/functions/version.sql ====
-- pgq.version(): the release of pgq-sql whose code is installed in this database, e.g.
-- '0.2.0'. `pgq install` / `pgq upgrade` write it from the Python package's version
-- (pgq.__version__), so the two cannot disagree; `pgq doctor` compares them.
-- Takes no arguments, raises nothing.
CREATE OR REPLACE FUNCTION pgq.version()
RETURNS text
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $$
    SELECT '0.2.0'::text
$$;

COMMENT ON FUNCTION pgq.version() IS
'The pgq-sql release installed in this database, e.g. ''0.2.0''.';

-- ==== sql/functions/watch.sql ====
-- pgq.watch(job_id): ask to be told when a job finishes. After `LISTEN pgq_finished`, a
-- notification with the job's id as payload arrives when the job succeeds, is canceled or
-- discarded, or goes dead. Returns the job's status now (as pgq.job_status: a finished
-- status means no notification will come), NULL for an unknown id or one the caller may
-- not read (pgq._may_read; such a job is not marked watched). Call it after LISTEN,
-- so that no end falls between the two. Jobs nobody watches cost nothing extra.
-- Raises PQ001 for a NULL id.
CREATE OR REPLACE FUNCTION pgq.watch(job_id bigint)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty):
-- tests/py/test_empty_queue_plans.py says why; JIT off, which that cost would start.
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
    IF job_id IS NULL THEN
        PERFORM pgq._invalid('job_id', 'must not be NULL', 'Pass a job id returned by pgq.enqueue.');
    END IF;
    UPDATE pgq._jobs AS j SET watched = TRUE
    WHERE j.id = watch.job_id AND NOT j.watched AND pgq._may_read(j.enqueued_by, j.worker_id);
    RETURN pgq.job_status(watch.job_id);
END
$$;

COMMENT ON FUNCTION pgq.watch(bigint) IS
'Notify channel pgq_finished (payload: the id) when this job finishes; returns its status now.';

-- ==== sql/views/jobs.sql ====
-- pgq.jobs: the live jobs (queued, waiting, running, dead), for psql and `pgq jobs`:
--   SELECT id, status, attempt, last_error FROM pgq.jobs WHERE entrypoint = 'email';
-- Finished jobs are in pgq.outcomes. depends_on: the jobs a waiting job waits for.
CREATE OR REPLACE VIEW pgq.jobs AS
SELECT
    j.id,
    j.entrypoint,
    j.status,
    j.priority,
    j.run_at,
    j.attempt,
    j.deliveries,
    coalesce(j.max_attempts, q.max_attempts, d.max_attempts) AS max_attempts,
    j.enqueued_at,
    j.started_at,
    j.worker_id,
    j.cancel_requested,
    j.dedupe_key,
    j.last_error,
    j.payload,
    j.headers,
    j.depends_on,
    j.concurrency_key,
    j.snoozes
FROM pgq._jobs AS j
LEFT JOIN pgq._queues AS q ON j.entrypoint = q.entrypoint
-- Inlined: constants (pgq._defaults() would run once per job listed).
CROSS JOIN pgq._default_settings AS d;

COMMENT ON VIEW pgq.jobs IS 'Live jobs: queued, waiting, running and dead.';

-- ==== sql/views/outcomes.sql ====
-- pgq.outcomes: the append-only outcome log. outcome: succeeded, canceled, dead (a dead job
-- that was discarded) are terminal, one per job; failed is one row per failed attempt.
CREATE OR REPLACE VIEW pgq.outcomes AS
SELECT
    o.job_id,
    o.entrypoint,
    o.outcome,
    o.priority,
    o.attempt,
    o.deliveries,
    o.enqueued_at,
    o.started_at,
    o.finished_at,
    o.worker_id,
    o.error,
    o.result,
    o.concurrency_key
FROM pgq._outcomes AS o;

COMMENT ON VIEW pgq.outcomes IS 'Outcome log: one terminal row per finished job, one failed row per failed attempt.';

-- ==== sql/views/queues.sql ====
-- pgq.queues: one row per entrypoint that has live jobs or settings. For psql:
--   SELECT * FROM pgq.queues;
-- queued: due now; scheduled: queued with run_at in the future; oldest_queued_age: how
-- long the oldest due job has waited; the settings columns show the effective values.
-- The counts come from pgq._queue_counts through the partial indexes, without a scan of
-- the job table: up to pgq.queues_exact_limit jobs per state (default 10000, shared among
-- the entrypoints with jobs in that state, at least 100 each) are counted exactly; a larger
-- count is an estimate and the row's `approximate` is TRUE.
CREATE OR REPLACE VIEW pgq.queues AS
SELECT
    coalesce(c.entrypoint, q.entrypoint) AS entrypoint,
    coalesce(c.queued, 0) AS queued,
    coalesce(c.scheduled, 0) AS scheduled,
    coalesce(c.waiting, 0) AS waiting,
    coalesce(c.running, 0) AS running,
    coalesce(c.dead, 0) AS dead,
    c.oldest_queued_age,
    coalesce(q.paused, FALSE) AS paused,
    q.concurrency,
    q.rate,
    coalesce(q.max_attempts, d.max_attempts) AS max_attempts,
    coalesce(q.lease, d.lease) AS lease,
    coalesce(q.timeout, d.timeout) AS timeout,
    coalesce(q.backoff_base, d.backoff_base) AS backoff_base,
    coalesce(q.backoff_max, d.backoff_max) AS backoff_max,
    coalesce(q.retention, d.retention) AS retention,
    coalesce(q.max_deliveries, d.max_deliveries) AS max_deliveries,
    q.key_concurrency,
    coalesce(q.max_snoozes, d.max_snoozes) AS max_snoozes,
    coalesce(c.approximate, FALSE) AS approximate
FROM pgq._queue_counts() AS c
FULL JOIN pgq._queues AS q ON c.entrypoint = q.entrypoint
CROSS JOIN pgq._default_settings AS d
ORDER BY coalesce(c.entrypoint, q.entrypoint);

COMMENT ON VIEW pgq.queues IS
'One row per entrypoint: job counts by state (exact up to pgq.queues_exact_limit, estimated above it: approximate), pause state and effective settings.';

-- ==== sql/views/schedules.sql ====
-- pgq.schedules: periodic jobs (pgq.schedule), with the time each last fired and will next.
CREATE OR REPLACE VIEW pgq.schedules AS
SELECT
    s.name,
    s.cron,
    s.entrypoint,
    s.payload,
    s.last_run,
    s.next_run,
    s.created_at
FROM pgq._schedules AS s
ORDER BY s.name;

COMMENT ON VIEW pgq.schedules IS 'Periodic jobs: cron (UTC), entrypoint, payload, last and next run.';

-- ==== sql/views/sweeps.sql ====
-- pgq.sweeps: when each periodic sweep last ran, and how late it is. reap: the last
-- pgq.reap() (pg_cron every minute); prune: the last pgq.prune()
-- (pg_cron hourly, or a worker's pgq.sweep when pg_cron is absent); run_schedules: the
-- last time a schedule fired, and it is late when a schedule has been due for longer than
-- a minute. late: how far past `every` the sweep is (NULL: on time, or it never ran).
CREATE OR REPLACE VIEW pgq.sweeps AS
SELECT
    t.sweep,
    t.every,
    t.last_run,
    now() - t.last_run AS age,
    CASE WHEN t.due < now() - t.every THEN now() - t.every - t.due END AS late
FROM (
    SELECT
        'reap'::text AS sweep,
        interval '1 minute' AS every,
        max(m.last_run) AS last_run,
        max(m.last_run) AS due
    FROM pgq._maintenance AS m
    WHERE m.task = 'reap'
    UNION ALL
    SELECT
        'run_schedules' AS sweep,
        interval '1 minute' AS every,
        max(s.last_run) AS last_run,
        min(s.next_run) AS due
    FROM pgq._schedules AS s
    UNION ALL
    SELECT
        'prune' AS sweep,
        interval '1 hour' AS every,
        max(m.last_run) AS last_run,
        max(m.last_run) AS due
    FROM pgq._maintenance AS m
    WHERE m.task = 'prune'
) AS t;

COMMENT ON VIEW pgq.sweeps IS 'When each sweep (reap, run_schedules, prune) last ran, and how late it is.';

-- ==== sql/views/workers.sql ====
-- pgq.workers: registered workers, most recent first. state: alive, dead (reaped after
-- missing heartbeats), stopped (unregistered). Rows of workers gone for a day are pruned.
CREATE OR REPLACE VIEW pgq.workers AS
SELECT
    w.id,
    w.name,
    w.entrypoints,
    w.state,
    w.registered_at,
    w.heartbeat_at,
    now() - w.heartbeat_at AS heartbeat_age,
    w.stopped_at,
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.worker_id = w.id AND j.status = 'running') AS jobs_held
FROM pgq._workers AS w
ORDER BY w.state = 'alive' DESC, w.registered_at DESC;

COMMENT ON VIEW pgq.workers IS 'Registered workers: alive, dead or stopped, last heartbeat, jobs held.';

-- ==== sql/setup.sql ====
-- Run after the functions on every install and upgrade: state the functions maintain.
-- (the daily outcome partitions: created by the first sweep, see pgq.scripts)
-- Forget the claim marks (pgq._raise_mark): whatever happened to the jobs while the
-- triggers below were missing or disabled (an upgrade, a restore), claims walk from the
-- front until their next raise.
DELETE FROM pgq._marks;

-- The triggers of the job table, created once each: re-creating one would lock the table
-- against every worker (and CREATE OR REPLACE TRIGGER needs PostgreSQL 14).
DO $$
BEGIN
    -- New waiting jobs are checked again when their producer commits (pgq._check_waiting).
    IF NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_trigger AS t
        WHERE t.tgrelid = 'pgq._jobs'::regclass AND t.tgname = '_jobs_check_waiting'
    ) THEN
        CREATE CONSTRAINT TRIGGER _jobs_check_waiting AFTER INSERT ON pgq._jobs
        DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW WHEN (new.status = 'waiting')
        EXECUTE FUNCTION pgq._check_waiting();
    END IF;
    -- A watched job's end is notified (pgq.watch, pgq._notify_finished).
    IF NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_trigger AS t
        WHERE t.tgrelid = 'pgq._jobs'::regclass AND t.tgname = '_jobs_finished_trg'
    ) THEN
        CREATE TRIGGER _jobs_finished_trg AFTER DELETE ON pgq._jobs
        FOR EACH ROW WHEN (old.watched)
        EXECUTE FUNCTION pgq._notify_finished();
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_trigger AS t
        WHERE t.tgrelid = 'pgq._jobs'::regclass AND t.tgname = '_jobs_dead_trg'
    ) THEN
        CREATE TRIGGER _jobs_dead_trg AFTER UPDATE OF status ON pgq._jobs
        FOR EACH ROW WHEN (new.watched AND new.status = 'dead' AND old.status <> 'dead')
        EXECUTE FUNCTION pgq._notify_finished();
    END IF;
    -- Jobs that become queued keep the claim marks below them (pgq._lower_mark).
    IF NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_trigger AS t
        WHERE t.tgrelid = 'pgq._jobs'::regclass AND t.tgname = '_jobs_marks_insert_trg'
    ) THEN
        CREATE TRIGGER _jobs_marks_insert_trg AFTER INSERT ON pgq._jobs
        REFERENCING NEW TABLE AS new_jobs
        FOR EACH STATEMENT
        EXECUTE FUNCTION pgq._marks_inserted();
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
        EXECUTE FUNCTION pgq._marks_updated();
        ALTER TABLE pgq._jobs ENABLE ALWAYS TRIGGER _jobs_marks_update_trg;
    END IF;
END
$$;
-- Their comments are written on every install and upgrade: that marks the triggers as
-- defined by this code for sql/reconcile.sql (which drops the triggers the code no longer
-- defines) without the table lock that re-creating them would take.
COMMENT ON TRIGGER _jobs_check_waiting ON pgq._jobs IS
'Checks a new waiting job''s dependencies again at its producer''s commit (pgq._check_waiting).';
COMMENT ON TRIGGER _jobs_finished_trg ON pgq._jobs IS
'Tells the watchers of a job that it finished (pgq._notify_finished).';
COMMENT ON TRIGGER _jobs_dead_trg ON pgq._jobs IS
'Tells the watchers of a job that it died (pgq._notify_finished).';
COMMENT ON TRIGGER _jobs_marks_insert_trg ON pgq._jobs IS
'Keeps the claim marks below newly inserted queued jobs (pgq._marks_inserted).';
COMMENT ON TRIGGER _jobs_marks_update_trg ON pgq._jobs IS
'Keeps the claim mark below a job that became queued or moved earlier (pgq._marks_updated).';

-- ==== sql/reconcile.sql ====
-- Run on every install and upgrade after the functions, views and setup, in the same
-- transaction. It makes schema pgq exactly what the code defines:
-- 1. Functions, views and triggers in schema pgq that this transaction did not (re)create
--    are left over from an earlier version (e.g. an old overload that makes calls
--    ambiguous): they are dropped. Objects outside schema pgq are never touched; if one
--    depends on a stale object, the DROP fails and the whole install rolls back.
-- 2. Schema pgq and everything in it is handed to the NOLOGIN role pgq_owner.
-- "Created by this transaction" is read from the catalog row's xmin: CREATE OR REPLACE
-- rewrites the row even when the definition is unchanged. A trigger that the code keeps
-- without re-creating it (that would lock its table) is marked by re-writing its comment.
DO $$
DECLARE
    v_xid xid := pg_catalog.pg_current_xact_id()::xid;
    v_stmt text;
BEGIN
    FOR v_stmt IN
        SELECT format('DROP TRIGGER %I ON pgq.%I', t.tgname, c.relname)
        FROM pg_catalog.pg_trigger AS t
        INNER JOIN pg_catalog.pg_class AS c ON t.tgrelid = c.oid
        WHERE c.relnamespace = 'pgq'::regnamespace AND NOT t.tgisinternal AND NOT t.xmin = v_xid
          AND NOT EXISTS (
              SELECT 1 FROM pg_catalog.pg_description AS d
              WHERE d.classoid = 'pg_trigger'::regclass AND d.objoid = t.oid AND d.xmin = v_xid
          )
    LOOP
        EXECUTE v_stmt;
    END LOOP;
    FOR v_stmt IN
        SELECT format('DROP VIEW pgq.%I', c.relname)
        FROM pg_catalog.pg_class AS c
        INNER JOIN pg_catalog.pg_rewrite AS r ON r.ev_class = c.oid AND r.rulename = '_RETURN'
        WHERE c.relnamespace = 'pgq'::regnamespace AND c.relkind IN ('v', 'm') AND NOT r.xmin = v_xid
    LOOP
        EXECUTE v_stmt;
    END LOOP;
    FOR v_stmt IN
        SELECT format(
            'DROP %s pgq.%I(%s)',
            CASE p.prokind WHEN 'a' THEN 'AGGREGATE' WHEN 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END,
            p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid)
        )
        FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = 'pgq'::regnamespace AND NOT p.xmin = v_xid
    LOOP
        EXECUTE v_stmt;
    END LOOP;

    FOR v_stmt IN
        SELECT s.stmt FROM (
            SELECT 1 AS ord, 'ALTER SCHEMA pgq OWNER TO pgq_owner' AS stmt
            FROM pg_catalog.pg_namespace AS n
            WHERE n.nspname = 'pgq' AND n.nspowner <> 'pgq_owner'::regrole
            UNION ALL
            -- Identity sequences and indexes follow their table.
            SELECT 2, format('ALTER TABLE pgq.%I OWNER TO pgq_owner', c.relname)
            FROM pg_catalog.pg_class AS c
            WHERE c.relnamespace = 'pgq'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
              AND c.relowner <> 'pgq_owner'::regrole
            UNION ALL
            SELECT 3, format('ALTER SEQUENCE pgq.%I OWNER TO pgq_owner', c.relname)
            FROM pg_catalog.pg_class AS c
            WHERE c.relnamespace = 'pgq'::regnamespace AND c.relkind = 'S'
              AND c.relowner <> 'pgq_owner'::regrole
              AND NOT EXISTS (
                  SELECT 1 FROM pg_catalog.pg_depend AS d
                  WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i')
              )
            UNION ALL
            SELECT 4, format(
                'ALTER %s pgq.%I(%s) OWNER TO pgq_owner',
                CASE p.prokind WHEN 'a' THEN 'AGGREGATE' WHEN 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END,
                p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid)
            )
            FROM pg_catalog.pg_proc AS p
            WHERE p.pronamespace = 'pgq'::regnamespace AND p.proowner <> 'pgq_owner'::regrole
        ) AS s
        ORDER BY s.ord
    LOOP
        EXECUTE v_stmt;
    END LOOP;
END
$$;

-- ==== sql/grants.sql ====
-- Privileges, re-applied on every install and upgrade (after sql/reconcile.sql made
-- pgq_owner the owner of everything). Nothing is granted to PUBLIC; internal tables and
-- helpers are reachable only through the SECURITY DEFINER functions.
-- First every privilege on schema pgq and its objects is taken from every role but the
-- owner (grants made by hand or by an earlier version, or PUBLIC's EXECUTE after a
-- restore without the roles); then exactly the grants below are made.
DO $$
DECLARE
    v_stmt text;
BEGIN
    FOR v_stmt IN
        SELECT DISTINCT format(
            'REVOKE ALL ON %s FROM %s', a.target,
            CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(a.grantee::regrole::text) END
        )
        FROM (
            SELECT 'SCHEMA pgq' AS target, (pg_catalog.aclexplode(n.nspacl)).grantee, n.nspowner AS owner
            FROM pg_catalog.pg_namespace AS n WHERE n.nspname = 'pgq'
            UNION ALL
            SELECT CASE c.relkind WHEN 'S' THEN 'SEQUENCE ' ELSE 'TABLE ' END || format('pgq.%I', c.relname),
                   (pg_catalog.aclexplode(c.relacl)).grantee, c.relowner
            FROM pg_catalog.pg_class AS c
            WHERE c.relnamespace = 'pgq'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
            UNION ALL
            SELECT format(
                       '%s pgq.%I(%s)',
                       CASE p.prokind WHEN 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END,
                       p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid)
                   ),
                   (pg_catalog.aclexplode(p.proacl)).grantee, p.proowner
            FROM pg_catalog.pg_proc AS p
            WHERE p.pronamespace = 'pgq'::regnamespace AND p.prokind IN ('f', 'p')
        ) AS a
        WHERE a.grantee <> a.owner
    LOOP
        EXECUTE v_stmt;
    END LOOP;
END
$$;

REVOKE ALL ON SCHEMA pgq FROM public;
REVOKE ALL ON ALL TABLES IN SCHEMA pgq FROM public;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA pgq FROM public;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA pgq FROM public;

GRANT USAGE ON SCHEMA pgq TO pgq_producer, pgq_worker, pgq_admin;

-- Producers enqueue and follow their jobs.
GRANT EXECUTE ON FUNCTION
pgq.enqueue(text, jsonb, integer, timestamptz, text, jsonb, integer, bigint[], text, text, interval, text),
pgq.enqueue_job(text, jsonb, integer, timestamptz, text, jsonb, integer, bigint[], text, text, interval, text),
pgq.enqueue_batch(text, jsonb[], integer, timestamptz, text[], text[], text, interval, text),
pgq.enqueue_trigger(),
pgq.job_status(bigint)
TO pgq_producer, pgq_admin;

-- Everyone may follow a job: its story, and a notification when it finishes.
GRANT EXECUTE ON FUNCTION pgq.job(bigint), pgq.watch(bigint) TO pgq_producer, pgq_worker, pgq_admin;

-- Workers claim and settle jobs.
GRANT EXECUTE ON FUNCTION
pgq.register_worker(text, text[]),
pgq.unregister_worker(uuid),
pgq.claim(uuid, text[], integer),
pgq.claim(uuid, text[], integer, integer),
pgq.heartbeat(uuid, bigint[]),
pgq.complete(uuid, bigint[], jsonb[], integer[]),
pgq.release(uuid, bigint[]),
pgq.fail(uuid, bigint, text, interval, integer),
pgq.snooze(uuid, bigint, interval, integer),
pgq.reap(),
pgq.sweep(),
pgq.settings(text[]),
pgq.settings(text[], integer),
pgq.job_status(bigint)
TO pgq_worker, pgq_admin;

-- Administration.
GRANT EXECUTE ON FUNCTION
pgq.cancel(bigint[]),
pgq.retry(bigint[]),
pgq.pause(text),
pgq.resume(text),
pgq.configure(
    text, integer, interval, interval, interval, interval, integer, numeric, interval, integer, integer, integer
),
pgq.schedule(text, text, text, jsonb),
pgq.unschedule(text),
pgq.run_schedules(timestamptz),
pgq.prune()
TO pgq_admin;

-- Monitoring: `pgq status` works for workers and admins.
GRANT EXECUTE ON FUNCTION pgq.stats(interval) TO pgq_worker, pgq_admin;
GRANT EXECUTE ON FUNCTION pgq.version() TO pgq_producer, pgq_worker, pgq_admin;

-- pgq.queues counts through pgq._queue_counts (SECURITY DEFINER: it reads pgq._jobs and its
-- statistics), checked against the querying role too: the readers of pgq.queues run it.
GRANT EXECUTE ON FUNCTION pgq._queue_counts(integer) TO pgq_worker, pgq_admin;

GRANT SELECT ON pgq.queues, pgq.workers, pgq.jobs, pgq.outcomes, pgq.schedules TO pgq_admin;
GRANT SELECT ON pgq.sweeps TO pgq_worker, pgq_admin;
GRANT SELECT ON pgq.queues, pgq.workers TO pgq_worker;


-- ==== what pg_dump keeps ====
DO $dump$
DECLARE
    v_rel record;
BEGIN
    FOR v_rel IN
        SELECT c.oid, c.relname
        FROM pg_catalog.pg_class AS c
        INNER JOIN pg_catalog.pg_depend AS d
            ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
        WHERE c.relnamespace = 'pgq'::regnamespace AND c.relkind IN ('r', 'p', 'S')
    LOOP
        PERFORM pg_catalog.pg_extension_config_dump(
            v_rel.oid::regclass,
            CASE WHEN v_rel.relname IN ('_migrations', '_install') THEN 'WHERE false' ELSE '' END
        );
    END LOOP;
END
$dump$;

