-- The API contract: which public functions exist, their signatures (argument names, types and
-- defaults: named notation is part of the API), return types, SECURITY DEFINER with a pinned
-- search_path, comments, the views, and the privileges of pgq_producer, pgq_worker, pgq_admin
-- and PUBLIC (sql/grants.sql). Changing any of this is an API change: update this file with it.
BEGIN;
SELECT plan(330);

-- Public functions (the internal `_` helpers are not API; they are added to the expected
-- list as found, so that only the public names are pinned).
SELECT functions_are(
    'pgq',
    ARRAY[
        'batch', 'batch_results', 'cancel', 'claim', 'claim_v3', 'complete', 'configure', 'confirm_cancel', 'dependency_results', 'enqueue',
        'enqueue_batch', 'enqueue_job', 'enqueue_trigger', 'explain', 'forget_steps',
        'fail', 'heartbeat', 'isolate', 'job', 'job_status', 'pause', 'progress', 'prune', 'reap', 'record_step',
        'register_worker', 'release', 'rerun', 'resume',
        'retry', 'run_now', 'run_schedules', 'schedule', 'settings', 'snooze', 'stats', 'step_result', 'sweep',
        'trigger_schedule', 'unisolate', 'unregister_worker', 'unschedule', 'version', 'watch'
    ]::name[]
    || (
        SELECT array_agg(p.proname) FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = 'pgq'::regnamespace AND p.proname LIKE '\_%'
    ),
    'schema pgq has exactly the public functions of the API'
);

-- Arguments: names, types and defaults.
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.cancel(bigint[])')),
    'job_ids bigint[]',
    'pgq.cancel arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.claim(uuid, text[], integer)')),
    'worker_id uuid, entrypoints text[], batch_size integer DEFAULT 1',
    'pgq.claim arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.claim(uuid, text[], integer, integer)')),
    'worker_id uuid, entrypoints text[], batch_size integer, protocol integer',
    'pgq.claim, protocol form: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.claim_v3(uuid, text[], integer)')),
    'worker_id uuid, entrypoints text[], batch_size integer DEFAULT 1',
    'pgq.claim_v3 arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.complete(uuid, bigint[], jsonb[], integer[])')),
    'worker_id uuid, job_ids bigint[], results jsonb[] DEFAULT NULL::jsonb[], '
    || 'deliveries integer[] DEFAULT NULL::integer[]',
    'pgq.complete arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.configure(text, integer, interval, interval, interval, interval, integer, numeric, interval, integer, integer, integer, boolean)')),
    'entrypoint text, max_attempts integer DEFAULT NULL::integer, '
    || 'backoff_base interval DEFAULT NULL::interval, '
    || 'backoff_max interval DEFAULT NULL::interval, lease interval DEFAULT NULL::interval, '
    || 'timeout interval DEFAULT NULL::interval, concurrency integer DEFAULT NULL::integer, '
    || 'rate numeric DEFAULT NULL::numeric, retention interval DEFAULT NULL::interval, '
    || 'max_deliveries integer DEFAULT NULL::integer, key_concurrency integer DEFAULT NULL::integer, '
    || 'max_snoozes integer DEFAULT NULL::integer, create_new boolean DEFAULT NULL::boolean',
    'pgq.configure arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(
        pg_catalog.to_regprocedure('pgq.enqueue(text, jsonb, integer, timestamp with time zone, text, jsonb, integer, bigint[], text, text, interval, text)')
    ),
    'entrypoint text, payload jsonb DEFAULT NULL::jsonb, priority integer DEFAULT 0, '
    || 'run_at timestamp with time zone DEFAULT NULL::timestamp with time zone, '
    || 'dedupe_key text DEFAULT NULL::text, headers jsonb DEFAULT NULL::jsonb, '
    || 'max_attempts integer DEFAULT NULL::integer, depends_on bigint[] DEFAULT NULL::bigint[], '
    || 'concurrency_key text DEFAULT NULL::text, dedupe_scope text DEFAULT NULL::text, '
    || 'dedupe_window interval DEFAULT NULL::interval, dedupe_mode text DEFAULT NULL::text',
    'pgq.enqueue arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(
        pg_catalog.to_regprocedure('pgq.enqueue_job(text, jsonb, integer, timestamp with time zone, text, jsonb, integer, bigint[], text, text, interval, text)')
    ),
    'entrypoint text, payload jsonb DEFAULT NULL::jsonb, priority integer DEFAULT 0, '
    || 'run_at timestamp with time zone DEFAULT NULL::timestamp with time zone, '
    || 'dedupe_key text DEFAULT NULL::text, headers jsonb DEFAULT NULL::jsonb, '
    || 'max_attempts integer DEFAULT NULL::integer, depends_on bigint[] DEFAULT NULL::bigint[], '
    || 'concurrency_key text DEFAULT NULL::text, dedupe_scope text DEFAULT NULL::text, '
    || 'dedupe_window interval DEFAULT NULL::interval, dedupe_mode text DEFAULT NULL::text, '
    || 'OUT id bigint, OUT created boolean, OUT replaced boolean',
    'pgq.enqueue_job arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(
        pg_catalog.to_regprocedure('pgq.enqueue_batch(text, jsonb[], integer, timestamp with time zone, text[], text[], text, interval, text, jsonb, integer, bigint[], bigint)')
    ),
    'entrypoint text, payloads jsonb[], priority integer DEFAULT 0, '
    || 'run_at timestamp with time zone DEFAULT NULL::timestamp with time zone, '
    || 'concurrency_keys text[] DEFAULT NULL::text[], dedupe_keys text[] DEFAULT NULL::text[], '
    || 'dedupe_scope text DEFAULT NULL::text, dedupe_window interval DEFAULT NULL::interval, '
    || 'dedupe_mode text DEFAULT NULL::text, headers jsonb DEFAULT NULL::jsonb, '
    || 'max_attempts integer DEFAULT NULL::integer, depends_on bigint[] DEFAULT NULL::bigint[], '
    || 'batch bigint DEFAULT NULL::bigint',
    'pgq.enqueue_batch arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.batch(jsonb, jsonb, jsonb)')),
    'on_finish jsonb DEFAULT NULL::jsonb, on_success jsonb DEFAULT NULL::jsonb, on_death jsonb DEFAULT NULL::jsonb',
    'pgq.batch arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.batch_results(bigint)')),
    'batch bigint',
    'pgq.batch_results arguments: names, types and defaults'
);
SELECT function_returns('pgq', 'batch', ARRAY['jsonb', 'jsonb', 'jsonb'], 'bigint', 'pgq.batch returns bigint');
SELECT function_returns(
    'pgq', 'batch_results', ARRAY['bigint'], 'setof record', 'pgq.batch_results returns a set of rows'
);
SELECT is_definer('pgq', 'batch', ARRAY['jsonb', 'jsonb', 'jsonb'], 'pgq.batch is SECURITY DEFINER');
SELECT is_definer('pgq', 'batch_results', ARRAY['bigint'], 'pgq.batch_results is SECURITY DEFINER');
SELECT function_privs_are('pgq', 'batch', ARRAY['jsonb', 'jsonb', 'jsonb'], 'pgq_producer', ARRAY['EXECUTE'], 'pgq_producer can execute pgq.batch');
SELECT function_privs_are('pgq', 'batch', ARRAY['jsonb', 'jsonb', 'jsonb'], 'pgq_worker', ARRAY[]::name[], 'pgq_worker cannot execute pgq.batch');
SELECT function_privs_are('pgq', 'batch', ARRAY['jsonb', 'jsonb', 'jsonb'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.batch');
SELECT function_privs_are('pgq', 'batch', ARRAY['jsonb', 'jsonb', 'jsonb'], 'public', ARRAY[]::name[], 'public cannot execute pgq.batch');
SELECT function_privs_are('pgq', 'batch_results', ARRAY['bigint'], 'pgq_producer', ARRAY['EXECUTE'], 'pgq_producer can execute pgq.batch_results');
SELECT function_privs_are('pgq', 'batch_results', ARRAY['bigint'], 'pgq_worker', ARRAY['EXECUTE'], 'pgq_worker can execute pgq.batch_results');
SELECT function_privs_are('pgq', 'batch_results', ARRAY['bigint'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.batch_results');
SELECT function_privs_are('pgq', 'batch_results', ARRAY['bigint'], 'public', ARRAY[]::name[], 'public cannot execute pgq.batch_results');
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.enqueue_trigger()')),
    '',
    'pgq.enqueue_trigger arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.fail(uuid, bigint, text, interval, integer)')),
    'worker_id uuid, job_id bigint, error text, retry_in interval DEFAULT NULL::interval, '
    || 'delivery integer DEFAULT NULL::integer',
    'pgq.fail arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.snooze(uuid, bigint, interval, integer)')),
    'worker_id uuid, job_id bigint, delay interval, delivery integer DEFAULT NULL::integer',
    'pgq.snooze arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.confirm_cancel(uuid, bigint, integer)')),
    'worker_id uuid, job_id bigint, delivery integer DEFAULT NULL::integer',
    'pgq.confirm_cancel arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.heartbeat(uuid, bigint[])')),
    'worker_id uuid, running bigint[] DEFAULT NULL::bigint[]',
    'pgq.heartbeat arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.job_status(bigint)')),
    'job_id bigint',
    'pgq.job_status arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.job(bigint)')),
    'job_id bigint',
    'pgq.job arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.watch(bigint)')),
    'job_id bigint',
    'pgq.watch arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.isolate(text)')),
    'entrypoint text',
    'pgq.isolate arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.unisolate(text)')),
    'entrypoint text',
    'pgq.unisolate arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.pause(text, boolean)')),
    'entrypoint text, create_new boolean DEFAULT NULL::boolean',
    'pgq.pause arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.prune()')),
    '',
    'pgq.prune arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.reap()')),
    '',
    'pgq.reap arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.release(uuid, bigint[])')),
    'worker_id uuid, keep bigint[]',
    'pgq.release arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.register_worker(text, text[])')),
    'name text, entrypoints text[]',
    'pgq.register_worker arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.resume(text)')),
    'entrypoint text',
    'pgq.resume arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.retry(bigint[])')),
    'job_ids bigint[]',
    'pgq.retry arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.run_now(bigint[])')),
    'job_ids bigint[]',
    'pgq.run_now arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.trigger_schedule(text)')),
    'name text',
    'pgq.trigger_schedule arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.rerun(bigint[])')),
    'job_ids bigint[]',
    'pgq.rerun arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.run_schedules(timestamp with time zone)')),
    'now timestamp with time zone DEFAULT NULL::timestamp with time zone',
    'pgq.run_schedules arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.schedule(text, text, text, jsonb)')),
    'name text, cron text, entrypoint text, payload jsonb DEFAULT NULL::jsonb',
    'pgq.schedule arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.settings(text[])')),
    'entrypoints text[]',
    'pgq.settings arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.settings(text[], integer)')),
    'entrypoints text[], protocol integer',
    'pgq.settings, protocol form: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.stats(interval)')),
    'since interval DEFAULT ''00:05:00''::interval',
    'pgq.stats arguments: names, types and defaults'
);
SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.unregister_worker(uuid)')),
    'worker_id uuid',
    'pgq.unregister_worker arguments: names, types and defaults'
);

SELECT is(
    pg_catalog.pg_get_function_arguments(pg_catalog.to_regprocedure('pgq.unschedule(text)')),
    'name text',
    'pgq.unschedule arguments: names, types and defaults'
);
-- Return types.
SELECT function_returns('pgq', 'cancel', ARRAY['bigint[]'], 'integer', 'pgq.cancel returns integer');
SELECT function_returns('pgq', 'claim', ARRAY['uuid', 'text[]', 'integer'], 'setof record', 'pgq.claim returns setof record');
SELECT function_returns(
    'pgq', 'claim', ARRAY['uuid', 'text[]', 'integer', 'integer'], 'setof record',
    'pgq.claim (protocol form) returns setof record'
);
SELECT function_returns(
    'pgq', 'claim_v3', ARRAY['uuid', 'text[]', 'integer'], 'setof record', 'pgq.claim_v3 returns setof record'
);
SELECT function_returns('pgq', 'complete', ARRAY['uuid', 'bigint[]', 'jsonb[]', 'integer[]'], 'setof bigint', 'pgq.complete returns setof bigint');
SELECT function_returns('pgq', 'configure', ARRAY['text', 'integer', 'interval', 'interval', 'interval', 'interval', 'integer', 'numeric', 'interval', 'integer', 'integer', 'integer', 'boolean'], 'void', 'pgq.configure returns void');
SELECT function_returns('pgq', 'enqueue', ARRAY['text', 'jsonb', 'integer', 'timestamp with time zone', 'text', 'jsonb', 'integer', 'bigint[]', 'text', 'text', 'interval', 'text'], 'bigint', 'pgq.enqueue returns bigint');
SELECT function_returns('pgq', 'enqueue_batch', ARRAY['text', 'jsonb[]', 'integer', 'timestamp with time zone', 'text[]', 'text[]', 'text', 'interval', 'text', 'jsonb', 'integer', 'bigint[]', 'bigint'], 'setof bigint', 'pgq.enqueue_batch returns setof bigint');
SELECT function_returns('pgq', 'enqueue_job', ARRAY['text', 'jsonb', 'integer', 'timestamp with time zone', 'text', 'jsonb', 'integer', 'bigint[]', 'text', 'text', 'interval', 'text'], 'record', 'pgq.enqueue_job returns record (one row: id, created, replaced)');
SELECT function_returns('pgq', 'enqueue_trigger', ARRAY[]::name[], 'trigger', 'pgq.enqueue_trigger returns trigger');
SELECT function_returns('pgq', 'fail', ARRAY['uuid', 'bigint', 'text', 'interval', 'integer'], 'text', 'pgq.fail returns text');
SELECT function_returns('pgq', 'snooze', ARRAY['uuid', 'bigint', 'interval', 'integer'], 'text', 'pgq.snooze returns text');
SELECT function_returns('pgq', 'confirm_cancel', ARRAY['uuid', 'bigint', 'integer'], 'text', 'pgq.confirm_cancel returns text');
SELECT function_returns('pgq', 'heartbeat', ARRAY['uuid', 'bigint[]'], 'setof bigint', 'pgq.heartbeat returns setof bigint');
SELECT function_returns('pgq', 'job_status', ARRAY['bigint'], 'text', 'pgq.job_status returns text');
SELECT function_returns('pgq', 'job', ARRAY['bigint'], 'jsonb', 'pgq.job returns jsonb');
SELECT function_returns('pgq', 'watch', ARRAY['bigint'], 'text', 'pgq.watch returns text');
SELECT function_returns('pgq', 'pause', ARRAY['text', 'boolean'], 'void', 'pgq.pause returns void');
SELECT function_returns('pgq', 'prune', ARRAY[]::name[], 'bigint', 'pgq.prune returns bigint');
SELECT function_returns('pgq', 'reap', ARRAY[]::name[], 'integer', 'pgq.reap returns integer');
SELECT function_returns('pgq', 'sweep', ARRAY[]::name[], 'integer', 'pgq.sweep returns integer');
SELECT function_returns('pgq', 'release', ARRAY['uuid', 'bigint[]'], 'integer', 'pgq.release returns integer');
SELECT function_returns('pgq', 'register_worker', ARRAY['text', 'text[]'], 'uuid', 'pgq.register_worker returns uuid');
SELECT function_returns('pgq', 'resume', ARRAY['text'], 'void', 'pgq.resume returns void');
SELECT function_returns('pgq', 'isolate', ARRAY['text'], 'bigint', 'pgq.isolate returns bigint');
SELECT function_returns('pgq', 'unisolate', ARRAY['text'], 'bigint', 'pgq.unisolate returns bigint');
SELECT function_returns('pgq', 'retry', ARRAY['bigint[]'], 'integer', 'pgq.retry returns integer');
SELECT function_returns('pgq', 'rerun', ARRAY['bigint[]'], 'setof record', 'pgq.rerun returns a set of rows');
SELECT function_returns('pgq', 'run_schedules', ARRAY['timestamp with time zone'], 'integer', 'pgq.run_schedules returns integer');
SELECT function_returns('pgq', 'schedule', ARRAY['text', 'text', 'text', 'jsonb'], 'timestamp with time zone', 'pgq.schedule returns timestamp with time zone');
SELECT function_returns('pgq', 'settings', ARRAY['text[]'], 'setof record', 'pgq.settings returns setof record');
SELECT function_returns(
    'pgq', 'settings', ARRAY['text[]', 'integer'], 'setof record', 'pgq.settings (protocol form) returns setof record'
);
SELECT function_returns('pgq', 'stats', ARRAY['interval'], 'setof record', 'pgq.stats returns setof record');
SELECT function_returns('pgq', 'unregister_worker', ARRAY['uuid'], 'integer', 'pgq.unregister_worker returns integer');
SELECT function_returns('pgq', 'unschedule', ARRAY['text'], 'boolean', 'pgq.unschedule returns boolean');
SELECT function_returns('pgq', 'run_now', ARRAY['bigint[]'], 'integer', 'pgq.run_now returns integer');
SELECT function_returns('pgq', 'trigger_schedule', ARRAY['text'], 'bigint', 'pgq.trigger_schedule returns bigint');

-- Fixed columns of the claim result (DESIGN: at least these).
SELECT is_empty(
    $$
        VALUES ('id', 'bigint'), ('entrypoint', 'text'), ('payload', 'jsonb'), ('headers', 'jsonb'),
               ('priority', 'integer'), ('attempt', 'integer'), ('deliveries', 'integer'),
               ('enqueued_at', 'timestamp with time zone')
        EXCEPT
        SELECT a.name, a.type::regtype::text
        FROM pg_catalog.pg_proc AS p
        CROSS JOIN LATERAL unnest(p.proargnames, p.proallargtypes, p.proargmodes) AS a (name, type, mode)
        WHERE p.oid = pg_catalog.to_regprocedure('pgq.claim(uuid, text[], integer)') AND a.mode = 't'
    $$,
    'pgq.claim returns at least id, entrypoint, payload, headers, priority, attempt, deliveries, enqueued_at'
);

-- A call shape keeps its result shape: the 0.1.0 form returns exactly the columns of 0.1.0
-- (its workers build a job from every one), protocol 2 exactly those of 0.2.0.
SELECT is(
    (
        SELECT array_agg(a.name || ' ' || a.type::regtype::text ORDER BY a.n)
        FROM pg_catalog.pg_proc AS p
        CROSS JOIN
            LATERAL unnest(p.proargnames, p.proallargtypes, p.proargmodes) WITH ORDINALITY AS a (name, type, mode, n)
        WHERE p.oid = pg_catalog.to_regprocedure('pgq.claim(uuid, text[], integer)') AND a.mode = 't'
    ),
    ARRAY[
        'id bigint', 'entrypoint text', 'payload jsonb', 'headers jsonb', 'priority integer', 'attempt integer',
        'deliveries integer', 'enqueued_at timestamp with time zone', 'run_at timestamp with time zone',
        'max_attempts integer', 'timeout interval'
    ],
    'pgq.claim(worker_id, entrypoints, batch_size) returns exactly the columns of 0.1.0'
);
SELECT is(
    (
        SELECT array_agg(a.name || ' ' || a.type::regtype::text ORDER BY a.n)
        FROM pg_catalog.pg_proc AS p
        CROSS JOIN
            LATERAL unnest(p.proargnames, p.proallargtypes, p.proargmodes) WITH ORDINALITY AS a (name, type, mode, n)
        WHERE p.oid = pg_catalog.to_regprocedure('pgq.claim(uuid, text[], integer, integer)') AND a.mode = 't'
    ),
    ARRAY[
        'id bigint', 'entrypoint text', 'payload jsonb', 'headers jsonb', 'priority integer', 'attempt integer',
        'deliveries integer', 'enqueued_at timestamp with time zone', 'run_at timestamp with time zone',
        'max_attempts integer', 'timeout interval', 'concurrency_key text'
    ],
    'pgq.claim(..., protocol => 2) returns exactly the columns of protocol 2'
);
SELECT is(
    (
        SELECT array_agg(a.name || ' ' || a.type::regtype::text ORDER BY a.n)
        FROM pg_catalog.pg_proc AS p
        CROSS JOIN
            LATERAL unnest(p.proargnames, p.proallargtypes, p.proargmodes) WITH ORDINALITY AS a (name, type, mode, n)
        WHERE p.oid = pg_catalog.to_regprocedure('pgq.claim_v3(uuid, text[], integer)') AND a.mode = 't'
    ),
    ARRAY[
        'id bigint', 'entrypoint text', 'payload jsonb', 'headers jsonb', 'priority integer', 'attempt integer',
        'deliveries integer', 'enqueued_at timestamp with time zone', 'run_at timestamp with time zone',
        'max_attempts integer', 'timeout interval', 'concurrency_key text', 'reason text'
    ],
    'pgq.claim_v3 returns exactly the columns of 0.3.0'
);
SELECT is(
    (
        SELECT array_agg(a.name || ' ' || a.type::regtype::text ORDER BY a.n)
        FROM pg_catalog.pg_proc AS p
        CROSS JOIN
            LATERAL unnest(p.proargnames, p.proallargtypes, p.proargmodes) WITH ORDINALITY AS a (name, type, mode, n)
        WHERE p.oid = pg_catalog.to_regprocedure('pgq.settings(text[])') AND a.mode = 't'
    ),
    ARRAY[
        'entrypoint text', 'paused boolean', 'max_attempts integer', 'backoff_base interval', 'backoff_max interval',
        'lease interval', 'timeout interval', 'concurrency integer', 'rate numeric', 'retention interval'
    ],
    'pgq.settings(entrypoints) returns exactly the columns of 0.1.0'
);

-- Fixed columns of the stats result (DESIGN: at least these).
SELECT is_empty(
    $$
        VALUES ('entrypoint', 'text'), ('succeeded', 'bigint'), ('failed', 'bigint'), ('dead', 'bigint'),
               ('per_second', 'numeric'), ('wait_p50', 'interval'), ('wait_p95', 'interval'),
               ('wait_p99', 'interval'), ('run_p50', 'interval'), ('run_p95', 'interval'), ('run_p99', 'interval')
        EXCEPT
        SELECT a.name, a.type::regtype::text
        FROM pg_catalog.pg_proc AS p
        CROSS JOIN LATERAL unnest(p.proargnames, p.proallargtypes, p.proargmodes) AS a (name, type, mode)
        WHERE p.oid = pg_catalog.to_regprocedure('pgq.stats(interval)') AND a.mode = 't'
    $$,
    'pgq.stats returns at least entrypoint, succeeded, failed, dead, per_second and the wait/run percentiles'
);

-- SECURITY DEFINER, with a pinned search_path.
SELECT is_definer('pgq', 'cancel', ARRAY['bigint[]'], 'pgq.cancel is SECURITY DEFINER');
SELECT is_definer('pgq', 'claim', ARRAY['uuid', 'text[]', 'integer'], 'pgq.claim is SECURITY DEFINER');
SELECT is_definer(
    'pgq', 'claim', ARRAY['uuid', 'text[]', 'integer', 'integer'], 'pgq.claim (protocol form) is SECURITY DEFINER'
);
SELECT is_definer('pgq', 'claim_v3', ARRAY['uuid', 'text[]', 'integer'], 'pgq.claim_v3 is SECURITY DEFINER');
SELECT is_definer('pgq', 'complete', ARRAY['uuid', 'bigint[]', 'jsonb[]', 'integer[]'], 'pgq.complete is SECURITY DEFINER');
SELECT is_definer('pgq', 'configure', ARRAY['text', 'integer', 'interval', 'interval', 'interval', 'interval', 'integer', 'numeric', 'interval', 'integer', 'integer', 'integer', 'boolean'], 'pgq.configure is SECURITY DEFINER');
SELECT is_definer('pgq', 'enqueue', ARRAY['text', 'jsonb', 'integer', 'timestamp with time zone', 'text', 'jsonb', 'integer', 'bigint[]', 'text', 'text', 'interval', 'text'], 'pgq.enqueue is SECURITY DEFINER');
SELECT is_definer('pgq', 'enqueue_batch', ARRAY['text', 'jsonb[]', 'integer', 'timestamp with time zone', 'text[]', 'text[]', 'text', 'interval', 'text', 'jsonb', 'integer', 'bigint[]', 'bigint'], 'pgq.enqueue_batch is SECURITY DEFINER');
SELECT is_definer('pgq', 'enqueue_job', ARRAY['text', 'jsonb', 'integer', 'timestamp with time zone', 'text', 'jsonb', 'integer', 'bigint[]', 'text', 'text', 'interval', 'text'], 'pgq.enqueue_job is SECURITY DEFINER');
SELECT isnt_definer('pgq', 'enqueue_trigger', ARRAY[]::name[], 'pgq.enqueue_trigger runs as the writer (SECURITY INVOKER)');
SELECT is_definer('pgq', 'fail', ARRAY['uuid', 'bigint', 'text', 'interval', 'integer'], 'pgq.fail is SECURITY DEFINER');
SELECT is_definer('pgq', 'snooze', ARRAY['uuid', 'bigint', 'interval', 'integer'], 'pgq.snooze is SECURITY DEFINER');
SELECT is_definer('pgq', 'confirm_cancel', ARRAY['uuid', 'bigint', 'integer'], 'pgq.confirm_cancel is SECURITY DEFINER');
SELECT is_definer('pgq', 'heartbeat', ARRAY['uuid', 'bigint[]'], 'pgq.heartbeat is SECURITY DEFINER');
SELECT is_definer('pgq', 'job_status', ARRAY['bigint'], 'pgq.job_status is SECURITY DEFINER');
SELECT is_definer('pgq', 'job', ARRAY['bigint'], 'pgq.job is SECURITY DEFINER');
SELECT is_definer('pgq', 'watch', ARRAY['bigint'], 'pgq.watch is SECURITY DEFINER');
SELECT is_definer('pgq', 'pause', ARRAY['text', 'boolean'], 'pgq.pause is SECURITY DEFINER');
SELECT is_definer('pgq', 'prune', ARRAY[]::name[], 'pgq.prune is SECURITY DEFINER');
SELECT is_definer('pgq', 'reap', ARRAY[]::name[], 'pgq.reap is SECURITY DEFINER');
SELECT is_definer('pgq', 'sweep', ARRAY[]::name[], 'pgq.sweep is SECURITY DEFINER');
SELECT is_definer('pgq', 'release', ARRAY['uuid', 'bigint[]'], 'pgq.release is SECURITY DEFINER');
SELECT is_definer('pgq', 'register_worker', ARRAY['text', 'text[]'], 'pgq.register_worker is SECURITY DEFINER');
SELECT is_definer('pgq', 'resume', ARRAY['text'], 'pgq.resume is SECURITY DEFINER');
SELECT is_definer('pgq', 'isolate', ARRAY['text'], 'pgq.isolate is SECURITY DEFINER');
SELECT is_definer('pgq', 'unisolate', ARRAY['text'], 'pgq.unisolate is SECURITY DEFINER');
SELECT is_definer('pgq', 'retry', ARRAY['bigint[]'], 'pgq.retry is SECURITY DEFINER');
SELECT is_definer('pgq', 'rerun', ARRAY['bigint[]'], 'pgq.rerun is SECURITY DEFINER');
SELECT is_definer('pgq', 'run_schedules', ARRAY['timestamp with time zone'], 'pgq.run_schedules is SECURITY DEFINER');
SELECT is_definer('pgq', 'schedule', ARRAY['text', 'text', 'text', 'jsonb'], 'pgq.schedule is SECURITY DEFINER');
SELECT is_definer('pgq', 'settings', ARRAY['text[]'], 'pgq.settings is SECURITY DEFINER');
SELECT is_definer(
    'pgq', 'settings', ARRAY['text[]', 'integer'], 'pgq.settings (protocol form) is SECURITY DEFINER'
);
SELECT is_definer('pgq', 'stats', ARRAY['interval'], 'pgq.stats is SECURITY DEFINER');
SELECT is_definer('pgq', 'unregister_worker', ARRAY['uuid'], 'pgq.unregister_worker is SECURITY DEFINER');
SELECT is_definer('pgq', 'unschedule', ARRAY['text'], 'pgq.unschedule is SECURITY DEFINER');
SELECT is_definer('pgq', 'run_now', ARRAY['bigint[]'], 'pgq.run_now is SECURITY DEFINER');
SELECT is_definer('pgq', 'trigger_schedule', ARRAY['text'], 'pgq.trigger_schedule is SECURITY DEFINER');
SELECT is_empty(
    $$
        SELECT p.oid::regprocedure
        FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = 'pgq'::regnamespace AND p.prosecdef
          AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), FALSE)
    $$,
    'every SECURITY DEFINER function in pgq has search_path=pg_catalog, pg_temp'
);
SELECT is_empty(
    $$
        SELECT p.oid::regprocedure
        FROM pg_catalog.pg_proc AS p
        INNER JOIN pg_catalog.pg_language AS l ON p.prolang = l.oid
        WHERE p.pronamespace = 'pgq'::regnamespace AND l.lanname = 'plpgsql'
          AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), FALSE)
    $$,
    'every plpgsql function in pgq has search_path=pg_catalog, pg_temp'
);
SELECT is_empty(
    $$
        SELECT p.oid::regprocedure
        FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = 'pgq'::regnamespace AND p.proname LIKE '\_%' AND p.prosecdef
          -- Deferred triggers fire at COMMIT as the committing role: they need the owner's.
          AND p.oid NOT IN ('pgq._trg_check_waiting()'::regprocedure, 'pgq._trg_batch_settle()'::regprocedure)
          -- pgq.queues's counts: its readers may not read pgq._jobs or its statistics.
          AND p.oid <> 'pgq._queue_counts(integer)'::regprocedure
    $$,
    'no internal function but the commit-time triggers and the counts of pgq.queues is SECURITY DEFINER'
);
SELECT is_empty(
    $$
        SELECT p.oid::regprocedure
        FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = 'pgq'::regnamespace AND p.proname NOT LIKE '\_%'
          AND pg_catalog.obj_description(p.oid, 'pg_proc') IS NULL
    $$,
    'every public function has a COMMENT (so psql \df+ pgq.* documents the API)'
);

-- Views.
SELECT has_view('pgq', 'queues', 'view pgq.queues exists');
SELECT has_view('pgq', 'workers', 'view pgq.workers exists');
SELECT has_view('pgq', 'jobs', 'view pgq.jobs exists');
SELECT has_view('pgq', 'outcomes', 'view pgq.outcomes exists');
SELECT has_view('pgq', 'schedules', 'view pgq.schedules exists');
SELECT has_view('pgq', 'outcome_totals', 'view pgq.outcome_totals exists');
SELECT is_empty(
    $$
        VALUES ('name', 'text'), ('cron', 'text'), ('entrypoint', 'text'), ('payload', 'jsonb'),
               ('last_run', 'timestamp with time zone'), ('next_run', 'timestamp with time zone')
        EXCEPT
        SELECT a.attname::text, a.atttypid::regtype::text
        FROM pg_catalog.pg_attribute AS a
        WHERE a.attrelid = 'pgq.schedules'::regclass AND a.attnum > 0 AND NOT a.attisdropped
    $$,
    'pgq.schedules has at least name, cron, entrypoint, payload, last_run, next_run'
);
SELECT is_empty(
    $$
        SELECT c.relname
        FROM pg_catalog.pg_class AS c
        WHERE c.relnamespace = 'pgq'::regnamespace AND c.relkind = 'v'
          AND pg_catalog.obj_description(c.oid, 'pg_class') IS NULL
    $$,
    'every view has a COMMENT'
);

-- Roles and schema privileges.
SELECT has_role('pgq_producer', 'role pgq_producer exists');
SELECT has_role('pgq_worker', 'role pgq_worker exists');
SELECT has_role('pgq_admin', 'role pgq_admin exists');
SELECT schema_privs_are('pgq', 'pgq_producer', ARRAY['USAGE'], 'pgq_producer has USAGE on schema pgq');
SELECT schema_privs_are('pgq', 'pgq_worker', ARRAY['USAGE'], 'pgq_worker has USAGE on schema pgq');
SELECT schema_privs_are('pgq', 'pgq_admin', ARRAY['USAGE'], 'pgq_admin has USAGE on schema pgq');
SELECT schema_privs_are('pgq', 'public', ARRAY[]::name[], 'public has no privilege on schema pgq');

-- Function privileges: EXECUTE as granted in sql/grants.sql, nothing to PUBLIC.
SELECT function_privs_are('pgq', 'cancel', ARRAY['bigint[]'], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.cancel');
SELECT function_privs_are('pgq', 'cancel', ARRAY['bigint[]'], 'pgq_worker', ARRAY[]::name[], 'pgq_worker cannot execute pgq.cancel');
SELECT function_privs_are('pgq', 'cancel', ARRAY['bigint[]'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.cancel');
SELECT function_privs_are('pgq', 'cancel', ARRAY['bigint[]'], 'public', ARRAY[]::name[], 'public cannot execute pgq.cancel');
SELECT function_privs_are('pgq', 'claim', ARRAY['uuid', 'text[]', 'integer'], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.claim');
SELECT function_privs_are('pgq', 'claim', ARRAY['uuid', 'text[]', 'integer'], 'pgq_worker', ARRAY['EXECUTE'], 'pgq_worker can execute pgq.claim');
SELECT function_privs_are('pgq', 'claim', ARRAY['uuid', 'text[]', 'integer'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.claim');
SELECT function_privs_are('pgq', 'claim', ARRAY['uuid', 'text[]', 'integer'], 'public', ARRAY[]::name[], 'public cannot execute pgq.claim');
SELECT function_privs_are(
    'pgq', 'claim', ARRAY['uuid', 'text[]', 'integer', 'integer'], 'pgq_producer', ARRAY[]::name[],
    'pgq_producer cannot execute pgq.claim (protocol form)'
);
SELECT function_privs_are(
    'pgq', 'claim', ARRAY['uuid', 'text[]', 'integer', 'integer'], 'pgq_worker', ARRAY['EXECUTE'],
    'pgq_worker can execute pgq.claim (protocol form)'
);
SELECT function_privs_are(
    'pgq', 'claim', ARRAY['uuid', 'text[]', 'integer', 'integer'], 'pgq_admin', ARRAY['EXECUTE'],
    'pgq_admin can execute pgq.claim (protocol form)'
);
SELECT function_privs_are(
    'pgq', 'claim', ARRAY['uuid', 'text[]', 'integer', 'integer'], 'public', ARRAY[]::name[],
    'public cannot execute pgq.claim (protocol form)'
);
SELECT function_privs_are(
    'pgq', 'claim_v3', ARRAY['uuid', 'text[]', 'integer'], 'pgq_producer', ARRAY[]::name[],
    'pgq_producer cannot execute pgq.claim_v3'
);
SELECT function_privs_are(
    'pgq', 'claim_v3', ARRAY['uuid', 'text[]', 'integer'], 'pgq_worker', ARRAY['EXECUTE'],
    'pgq_worker can execute pgq.claim_v3'
);
SELECT function_privs_are(
    'pgq', 'claim_v3', ARRAY['uuid', 'text[]', 'integer'], 'pgq_admin', ARRAY['EXECUTE'],
    'pgq_admin can execute pgq.claim_v3'
);
SELECT function_privs_are(
    'pgq', 'claim_v3', ARRAY['uuid', 'text[]', 'integer'], 'public', ARRAY[]::name[],
    'public cannot execute pgq.claim_v3'
);
SELECT function_privs_are('pgq', 'complete', ARRAY['uuid', 'bigint[]', 'jsonb[]', 'integer[]'], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.complete');
SELECT function_privs_are('pgq', 'complete', ARRAY['uuid', 'bigint[]', 'jsonb[]', 'integer[]'], 'pgq_worker', ARRAY['EXECUTE'], 'pgq_worker can execute pgq.complete');
SELECT function_privs_are('pgq', 'complete', ARRAY['uuid', 'bigint[]', 'jsonb[]', 'integer[]'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.complete');
SELECT function_privs_are('pgq', 'complete', ARRAY['uuid', 'bigint[]', 'jsonb[]', 'integer[]'], 'public', ARRAY[]::name[], 'public cannot execute pgq.complete');
SELECT function_privs_are('pgq', 'configure', ARRAY['text', 'integer', 'interval', 'interval', 'interval', 'interval', 'integer', 'numeric', 'interval', 'integer', 'integer', 'integer', 'boolean'], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.configure');
SELECT function_privs_are('pgq', 'configure', ARRAY['text', 'integer', 'interval', 'interval', 'interval', 'interval', 'integer', 'numeric', 'interval', 'integer', 'integer', 'integer', 'boolean'], 'pgq_worker', ARRAY[]::name[], 'pgq_worker cannot execute pgq.configure');
SELECT function_privs_are('pgq', 'configure', ARRAY['text', 'integer', 'interval', 'interval', 'interval', 'interval', 'integer', 'numeric', 'interval', 'integer', 'integer', 'integer', 'boolean'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.configure');
SELECT function_privs_are('pgq', 'configure', ARRAY['text', 'integer', 'interval', 'interval', 'interval', 'interval', 'integer', 'numeric', 'interval', 'integer', 'integer', 'integer', 'boolean'], 'public', ARRAY[]::name[], 'public cannot execute pgq.configure');
SELECT function_privs_are('pgq', 'enqueue', ARRAY['text', 'jsonb', 'integer', 'timestamp with time zone', 'text', 'jsonb', 'integer', 'bigint[]', 'text', 'text', 'interval', 'text'], 'pgq_producer', ARRAY['EXECUTE'], 'pgq_producer can execute pgq.enqueue');
SELECT function_privs_are('pgq', 'enqueue', ARRAY['text', 'jsonb', 'integer', 'timestamp with time zone', 'text', 'jsonb', 'integer', 'bigint[]', 'text', 'text', 'interval', 'text'], 'pgq_worker', ARRAY[]::name[], 'pgq_worker cannot execute pgq.enqueue');
SELECT function_privs_are('pgq', 'enqueue', ARRAY['text', 'jsonb', 'integer', 'timestamp with time zone', 'text', 'jsonb', 'integer', 'bigint[]', 'text', 'text', 'interval', 'text'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.enqueue');
SELECT function_privs_are('pgq', 'enqueue', ARRAY['text', 'jsonb', 'integer', 'timestamp with time zone', 'text', 'jsonb', 'integer', 'bigint[]', 'text', 'text', 'interval', 'text'], 'public', ARRAY[]::name[], 'public cannot execute pgq.enqueue');
SELECT function_privs_are('pgq', 'enqueue_batch', ARRAY['text', 'jsonb[]', 'integer', 'timestamp with time zone', 'text[]', 'text[]', 'text', 'interval', 'text', 'jsonb', 'integer', 'bigint[]', 'bigint'], 'pgq_producer', ARRAY['EXECUTE'], 'pgq_producer can execute pgq.enqueue_batch');
SELECT function_privs_are('pgq', 'enqueue_batch', ARRAY['text', 'jsonb[]', 'integer', 'timestamp with time zone', 'text[]', 'text[]', 'text', 'interval', 'text', 'jsonb', 'integer', 'bigint[]', 'bigint'], 'pgq_worker', ARRAY[]::name[], 'pgq_worker cannot execute pgq.enqueue_batch');
SELECT function_privs_are('pgq', 'enqueue_batch', ARRAY['text', 'jsonb[]', 'integer', 'timestamp with time zone', 'text[]', 'text[]', 'text', 'interval', 'text', 'jsonb', 'integer', 'bigint[]', 'bigint'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.enqueue_batch');
SELECT function_privs_are('pgq', 'enqueue_batch', ARRAY['text', 'jsonb[]', 'integer', 'timestamp with time zone', 'text[]', 'text[]', 'text', 'interval', 'text', 'jsonb', 'integer', 'bigint[]', 'bigint'], 'public', ARRAY[]::name[], 'public cannot execute pgq.enqueue_batch');
SELECT function_privs_are('pgq', 'enqueue_job', ARRAY['text', 'jsonb', 'integer', 'timestamp with time zone', 'text', 'jsonb', 'integer', 'bigint[]', 'text', 'text', 'interval', 'text'], 'pgq_producer', ARRAY['EXECUTE'], 'pgq_producer can execute pgq.enqueue_job');
SELECT function_privs_are('pgq', 'enqueue_job', ARRAY['text', 'jsonb', 'integer', 'timestamp with time zone', 'text', 'jsonb', 'integer', 'bigint[]', 'text', 'text', 'interval', 'text'], 'pgq_worker', ARRAY[]::name[], 'pgq_worker cannot execute pgq.enqueue_job');
SELECT function_privs_are('pgq', 'enqueue_job', ARRAY['text', 'jsonb', 'integer', 'timestamp with time zone', 'text', 'jsonb', 'integer', 'bigint[]', 'text', 'text', 'interval', 'text'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.enqueue_job');
SELECT function_privs_are('pgq', 'enqueue_job', ARRAY['text', 'jsonb', 'integer', 'timestamp with time zone', 'text', 'jsonb', 'integer', 'bigint[]', 'text', 'text', 'interval', 'text'], 'public', ARRAY[]::name[], 'public cannot execute pgq.enqueue_job');
SELECT function_privs_are('pgq', 'enqueue_trigger', ARRAY[]::name[], 'pgq_producer', ARRAY['EXECUTE'], 'pgq_producer can execute pgq.enqueue_trigger');
SELECT function_privs_are('pgq', 'enqueue_trigger', ARRAY[]::name[], 'pgq_worker', ARRAY[]::name[], 'pgq_worker cannot execute pgq.enqueue_trigger');
SELECT function_privs_are('pgq', 'enqueue_trigger', ARRAY[]::name[], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.enqueue_trigger');
SELECT function_privs_are('pgq', 'enqueue_trigger', ARRAY[]::name[], 'public', ARRAY[]::name[], 'public cannot execute pgq.enqueue_trigger');
SELECT function_privs_are('pgq', 'fail', ARRAY['uuid', 'bigint', 'text', 'interval', 'integer'], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.fail');
SELECT function_privs_are('pgq', 'fail', ARRAY['uuid', 'bigint', 'text', 'interval', 'integer'], 'pgq_worker', ARRAY['EXECUTE'], 'pgq_worker can execute pgq.fail');
SELECT function_privs_are('pgq', 'fail', ARRAY['uuid', 'bigint', 'text', 'interval', 'integer'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.fail');
SELECT function_privs_are('pgq', 'fail', ARRAY['uuid', 'bigint', 'text', 'interval', 'integer'], 'public', ARRAY[]::name[], 'public cannot execute pgq.fail');
SELECT function_privs_are('pgq', 'snooze', ARRAY['uuid', 'bigint', 'interval', 'integer'], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.snooze');
SELECT function_privs_are('pgq', 'snooze', ARRAY['uuid', 'bigint', 'interval', 'integer'], 'pgq_worker', ARRAY['EXECUTE'], 'pgq_worker can execute pgq.snooze');
SELECT function_privs_are('pgq', 'snooze', ARRAY['uuid', 'bigint', 'interval', 'integer'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.snooze');
SELECT function_privs_are('pgq', 'snooze', ARRAY['uuid', 'bigint', 'interval', 'integer'], 'public', ARRAY[]::name[], 'public cannot execute pgq.snooze');
SELECT function_privs_are('pgq', 'confirm_cancel', ARRAY['uuid', 'bigint', 'integer'], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.confirm_cancel');
SELECT function_privs_are('pgq', 'confirm_cancel', ARRAY['uuid', 'bigint', 'integer'], 'pgq_worker', ARRAY['EXECUTE'], 'pgq_worker can execute pgq.confirm_cancel');
SELECT function_privs_are('pgq', 'confirm_cancel', ARRAY['uuid', 'bigint', 'integer'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.confirm_cancel');
SELECT function_privs_are('pgq', 'confirm_cancel', ARRAY['uuid', 'bigint', 'integer'], 'public', ARRAY[]::name[], 'public cannot execute pgq.confirm_cancel');
SELECT function_privs_are('pgq', 'heartbeat', ARRAY['uuid', 'bigint[]'], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.heartbeat');
SELECT function_privs_are('pgq', 'heartbeat', ARRAY['uuid', 'bigint[]'], 'pgq_worker', ARRAY['EXECUTE'], 'pgq_worker can execute pgq.heartbeat');
SELECT function_privs_are('pgq', 'heartbeat', ARRAY['uuid', 'bigint[]'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.heartbeat');
SELECT function_privs_are('pgq', 'heartbeat', ARRAY['uuid', 'bigint[]'], 'public', ARRAY[]::name[], 'public cannot execute pgq.heartbeat');
SELECT function_privs_are('pgq', 'job_status', ARRAY['bigint'], 'pgq_producer', ARRAY['EXECUTE'], 'pgq_producer can execute pgq.job_status');
SELECT function_privs_are('pgq', 'job_status', ARRAY['bigint'], 'pgq_worker', ARRAY['EXECUTE'], 'pgq_worker can execute pgq.job_status');
SELECT function_privs_are('pgq', 'job_status', ARRAY['bigint'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.job_status');
SELECT function_privs_are('pgq', 'job_status', ARRAY['bigint'], 'public', ARRAY[]::name[], 'public cannot execute pgq.job_status');
SELECT function_privs_are('pgq', 'job', ARRAY['bigint'], 'pgq_producer', ARRAY['EXECUTE'], 'pgq_producer can execute pgq.job');
SELECT function_privs_are('pgq', 'job', ARRAY['bigint'], 'pgq_worker', ARRAY['EXECUTE'], 'pgq_worker can execute pgq.job');
SELECT function_privs_are('pgq', 'job', ARRAY['bigint'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.job');
SELECT function_privs_are('pgq', 'job', ARRAY['bigint'], 'public', ARRAY[]::name[], 'public cannot execute pgq.job');
SELECT function_privs_are('pgq', 'watch', ARRAY['bigint'], 'pgq_producer', ARRAY['EXECUTE'], 'pgq_producer can execute pgq.watch');
SELECT function_privs_are('pgq', 'watch', ARRAY['bigint'], 'pgq_worker', ARRAY['EXECUTE'], 'pgq_worker can execute pgq.watch');
SELECT function_privs_are('pgq', 'watch', ARRAY['bigint'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.watch');
SELECT function_privs_are('pgq', 'watch', ARRAY['bigint'], 'public', ARRAY[]::name[], 'public cannot execute pgq.watch');
SELECT function_privs_are('pgq', 'pause', ARRAY['text', 'boolean'], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.pause');
SELECT function_privs_are('pgq', 'pause', ARRAY['text', 'boolean'], 'pgq_worker', ARRAY[]::name[], 'pgq_worker cannot execute pgq.pause');
SELECT function_privs_are('pgq', 'pause', ARRAY['text', 'boolean'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.pause');
SELECT function_privs_are('pgq', 'pause', ARRAY['text', 'boolean'], 'public', ARRAY[]::name[], 'public cannot execute pgq.pause');
SELECT function_privs_are('pgq', 'prune', ARRAY[]::name[], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.prune');
SELECT function_privs_are('pgq', 'prune', ARRAY[]::name[], 'pgq_worker', ARRAY[]::name[], 'pgq_worker cannot execute pgq.prune');
SELECT function_privs_are('pgq', 'prune', ARRAY[]::name[], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.prune');
SELECT function_privs_are('pgq', 'prune', ARRAY[]::name[], 'public', ARRAY[]::name[], 'public cannot execute pgq.prune');
SELECT function_privs_are('pgq', 'reap', ARRAY[]::name[], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.reap');
SELECT function_privs_are('pgq', 'reap', ARRAY[]::name[], 'pgq_worker', ARRAY['EXECUTE'], 'pgq_worker can execute pgq.reap');
SELECT function_privs_are('pgq', 'reap', ARRAY[]::name[], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.reap');
SELECT function_privs_are('pgq', 'reap', ARRAY[]::name[], 'public', ARRAY[]::name[], 'public cannot execute pgq.reap');
SELECT function_privs_are('pgq', 'sweep', ARRAY[]::name[], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.sweep');
SELECT function_privs_are('pgq', 'sweep', ARRAY[]::name[], 'pgq_worker', ARRAY['EXECUTE'], 'pgq_worker can execute pgq.sweep');
SELECT function_privs_are('pgq', 'sweep', ARRAY[]::name[], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.sweep');
SELECT function_privs_are('pgq', 'sweep', ARRAY[]::name[], 'public', ARRAY[]::name[], 'public cannot execute pgq.sweep');
SELECT function_privs_are(
    'pgq', 'release', ARRAY['uuid', 'bigint[]'], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.release'
);
SELECT function_privs_are(
    'pgq', 'release', ARRAY['uuid', 'bigint[]'], 'pgq_worker', ARRAY['EXECUTE'], 'pgq_worker can execute pgq.release'
);
SELECT function_privs_are(
    'pgq', 'release', ARRAY['uuid', 'bigint[]'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.release'
);
SELECT function_privs_are(
    'pgq', 'release', ARRAY['uuid', 'bigint[]'], 'public', ARRAY[]::name[], 'public cannot execute pgq.release'
);
SELECT function_privs_are('pgq', 'register_worker', ARRAY['text', 'text[]'], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.register_worker');
SELECT function_privs_are('pgq', 'register_worker', ARRAY['text', 'text[]'], 'pgq_worker', ARRAY['EXECUTE'], 'pgq_worker can execute pgq.register_worker');
SELECT function_privs_are('pgq', 'register_worker', ARRAY['text', 'text[]'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.register_worker');
SELECT function_privs_are('pgq', 'register_worker', ARRAY['text', 'text[]'], 'public', ARRAY[]::name[], 'public cannot execute pgq.register_worker');
SELECT function_privs_are('pgq', 'resume', ARRAY['text'], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.resume');
SELECT function_privs_are('pgq', 'resume', ARRAY['text'], 'pgq_worker', ARRAY[]::name[], 'pgq_worker cannot execute pgq.resume');
SELECT function_privs_are('pgq', 'resume', ARRAY['text'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.resume');
SELECT function_privs_are('pgq', 'resume', ARRAY['text'], 'public', ARRAY[]::name[], 'public cannot execute pgq.resume');
SELECT function_privs_are('pgq', 'isolate', ARRAY['text'], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.isolate');
SELECT function_privs_are('pgq', 'isolate', ARRAY['text'], 'pgq_worker', ARRAY[]::name[], 'pgq_worker cannot execute pgq.isolate');
SELECT function_privs_are('pgq', 'isolate', ARRAY['text'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.isolate');
SELECT function_privs_are('pgq', 'isolate', ARRAY['text'], 'public', ARRAY[]::name[], 'public cannot execute pgq.isolate');
SELECT function_privs_are('pgq', 'unisolate', ARRAY['text'], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.unisolate');
SELECT function_privs_are('pgq', 'unisolate', ARRAY['text'], 'pgq_worker', ARRAY[]::name[], 'pgq_worker cannot execute pgq.unisolate');
SELECT function_privs_are('pgq', 'unisolate', ARRAY['text'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.unisolate');
SELECT function_privs_are('pgq', 'unisolate', ARRAY['text'], 'public', ARRAY[]::name[], 'public cannot execute pgq.unisolate');
SELECT function_privs_are('pgq', 'retry', ARRAY['bigint[]'], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.retry');
SELECT function_privs_are('pgq', 'retry', ARRAY['bigint[]'], 'pgq_worker', ARRAY[]::name[], 'pgq_worker cannot execute pgq.retry');
SELECT function_privs_are('pgq', 'retry', ARRAY['bigint[]'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.retry');
SELECT function_privs_are('pgq', 'retry', ARRAY['bigint[]'], 'public', ARRAY[]::name[], 'public cannot execute pgq.retry');
SELECT function_privs_are('pgq', 'rerun', ARRAY['bigint[]'], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.rerun');
SELECT function_privs_are('pgq', 'rerun', ARRAY['bigint[]'], 'pgq_worker', ARRAY[]::name[], 'pgq_worker cannot execute pgq.rerun');
SELECT function_privs_are('pgq', 'rerun', ARRAY['bigint[]'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.rerun');
SELECT function_privs_are('pgq', 'rerun', ARRAY['bigint[]'], 'public', ARRAY[]::name[], 'public cannot execute pgq.rerun');
SELECT function_privs_are('pgq', 'run_schedules', ARRAY['timestamp with time zone'], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.run_schedules');
SELECT function_privs_are('pgq', 'run_schedules', ARRAY['timestamp with time zone'], 'pgq_worker', ARRAY[]::name[], 'pgq_worker cannot execute pgq.run_schedules');
SELECT function_privs_are('pgq', 'run_schedules', ARRAY['timestamp with time zone'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.run_schedules');
SELECT function_privs_are('pgq', 'run_schedules', ARRAY['timestamp with time zone'], 'public', ARRAY[]::name[], 'public cannot execute pgq.run_schedules');
SELECT function_privs_are('pgq', 'schedule', ARRAY['text', 'text', 'text', 'jsonb'], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.schedule');
SELECT function_privs_are('pgq', 'schedule', ARRAY['text', 'text', 'text', 'jsonb'], 'pgq_worker', ARRAY[]::name[], 'pgq_worker cannot execute pgq.schedule');
SELECT function_privs_are('pgq', 'schedule', ARRAY['text', 'text', 'text', 'jsonb'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.schedule');
SELECT function_privs_are('pgq', 'schedule', ARRAY['text', 'text', 'text', 'jsonb'], 'public', ARRAY[]::name[], 'public cannot execute pgq.schedule');
SELECT function_privs_are('pgq', 'settings', ARRAY['text[]'], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.settings');
SELECT function_privs_are('pgq', 'settings', ARRAY['text[]'], 'pgq_worker', ARRAY['EXECUTE'], 'pgq_worker can execute pgq.settings');
SELECT function_privs_are('pgq', 'settings', ARRAY['text[]'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.settings');
SELECT function_privs_are('pgq', 'settings', ARRAY['text[]'], 'public', ARRAY[]::name[], 'public cannot execute pgq.settings');
SELECT function_privs_are(
    'pgq', 'settings', ARRAY['text[]', 'integer'], 'pgq_producer', ARRAY[]::name[],
    'pgq_producer cannot execute pgq.settings (protocol form)'
);
SELECT function_privs_are(
    'pgq', 'settings', ARRAY['text[]', 'integer'], 'pgq_worker', ARRAY['EXECUTE'],
    'pgq_worker can execute pgq.settings (protocol form)'
);
SELECT function_privs_are(
    'pgq', 'settings', ARRAY['text[]', 'integer'], 'pgq_admin', ARRAY['EXECUTE'],
    'pgq_admin can execute pgq.settings (protocol form)'
);
SELECT function_privs_are(
    'pgq', 'settings', ARRAY['text[]', 'integer'], 'public', ARRAY[]::name[],
    'public cannot execute pgq.settings (protocol form)'
);
SELECT function_privs_are('pgq', 'stats', ARRAY['interval'], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.stats');
SELECT function_privs_are('pgq', 'stats', ARRAY['interval'], 'pgq_worker', ARRAY['EXECUTE'], 'pgq_worker can execute pgq.stats');
SELECT function_privs_are('pgq', 'stats', ARRAY['interval'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.stats');
SELECT function_privs_are('pgq', 'stats', ARRAY['interval'], 'public', ARRAY[]::name[], 'public cannot execute pgq.stats');
SELECT function_privs_are('pgq', 'unregister_worker', ARRAY['uuid'], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.unregister_worker');
SELECT function_privs_are('pgq', 'unregister_worker', ARRAY['uuid'], 'pgq_worker', ARRAY['EXECUTE'], 'pgq_worker can execute pgq.unregister_worker');
SELECT function_privs_are('pgq', 'unregister_worker', ARRAY['uuid'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.unregister_worker');
SELECT function_privs_are('pgq', 'unregister_worker', ARRAY['uuid'], 'public', ARRAY[]::name[], 'public cannot execute pgq.unregister_worker');
SELECT function_privs_are('pgq', 'unschedule', ARRAY['text'], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.unschedule');
SELECT function_privs_are('pgq', 'unschedule', ARRAY['text'], 'pgq_worker', ARRAY[]::name[], 'pgq_worker cannot execute pgq.unschedule');
SELECT function_privs_are('pgq', 'unschedule', ARRAY['text'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.unschedule');
SELECT function_privs_are('pgq', 'unschedule', ARRAY['text'], 'public', ARRAY[]::name[], 'public cannot execute pgq.unschedule');
SELECT function_privs_are('pgq', 'run_now', ARRAY['bigint[]'], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.run_now');
SELECT function_privs_are('pgq', 'run_now', ARRAY['bigint[]'], 'pgq_worker', ARRAY[]::name[], 'pgq_worker cannot execute pgq.run_now');
SELECT function_privs_are('pgq', 'run_now', ARRAY['bigint[]'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.run_now');
SELECT function_privs_are('pgq', 'run_now', ARRAY['bigint[]'], 'public', ARRAY[]::name[], 'public cannot execute pgq.run_now');
SELECT function_privs_are('pgq', 'trigger_schedule', ARRAY['text'], 'pgq_producer', ARRAY[]::name[], 'pgq_producer cannot execute pgq.trigger_schedule');
SELECT function_privs_are('pgq', 'trigger_schedule', ARRAY['text'], 'pgq_worker', ARRAY[]::name[], 'pgq_worker cannot execute pgq.trigger_schedule');
SELECT function_privs_are('pgq', 'trigger_schedule', ARRAY['text'], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.trigger_schedule');
SELECT function_privs_are('pgq', 'trigger_schedule', ARRAY['text'], 'public', ARRAY[]::name[], 'public cannot execute pgq.trigger_schedule');
SELECT function_privs_are('pgq', 'version', ARRAY[]::name[], 'pgq_producer', ARRAY['EXECUTE'], 'pgq_producer can execute pgq.version');
SELECT function_privs_are('pgq', 'version', ARRAY[]::name[], 'pgq_worker', ARRAY['EXECUTE'], 'pgq_worker can execute pgq.version');
SELECT function_privs_are('pgq', 'version', ARRAY[]::name[], 'pgq_admin', ARRAY['EXECUTE'], 'pgq_admin can execute pgq.version');
SELECT function_privs_are('pgq', 'version', ARRAY[]::name[], 'public', ARRAY[]::name[], 'public cannot execute pgq.version');
SELECT matches(pgq.version(), '^[0-9]+\.[0-9]+\.[0-9]+', 'pgq.version() is a release number');
SELECT is_empty(
    $$
        SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = 'pgq'::regnamespace AND p.proowner <> 'pgq_owner'::regrole
        UNION ALL
        SELECT c.oid::regclass::text FROM pg_catalog.pg_class AS c
        WHERE c.relnamespace = 'pgq'::regnamespace AND c.relowner <> 'pgq_owner'::regrole
    $$,
    'the NOLOGIN role pgq_owner owns every function, table and view in pgq'
);
SELECT is_empty(
    $$
        SELECT p.oid::regprocedure
        FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = 'pgq'::regnamespace
          AND pg_catalog.has_function_privilege('public', p.oid, 'EXECUTE')
    $$,
    'PUBLIC cannot execute any function in pgq, internal ones included'
);

-- View privileges.
SELECT table_privs_are('pgq', 'queues', 'pgq_producer', ARRAY[]::name[], 'pgq_producer has no privilege on pgq.queues');
SELECT table_privs_are('pgq', 'queues', 'pgq_worker', ARRAY['SELECT'], 'pgq_worker can only SELECT from pgq.queues');
SELECT table_privs_are('pgq', 'queues', 'pgq_admin', ARRAY['SELECT'], 'pgq_admin can only SELECT from pgq.queues');
SELECT table_privs_are(
    'pgq', 'outcome_totals', 'pgq_producer', ARRAY[]::name[], 'pgq_producer has no privilege on pgq.outcome_totals'
);
SELECT table_privs_are(
    'pgq', 'outcome_totals', 'pgq_worker', ARRAY['SELECT'], 'pgq_worker can only SELECT from pgq.outcome_totals'
);
SELECT table_privs_are(
    'pgq', 'outcome_totals', 'pgq_admin', ARRAY['SELECT'], 'pgq_admin can only SELECT from pgq.outcome_totals'
);
SELECT table_privs_are('pgq', 'queues', 'public', ARRAY[]::name[], 'public has no privilege on pgq.queues');
SELECT table_privs_are('pgq', 'workers', 'pgq_producer', ARRAY[]::name[], 'pgq_producer has no privilege on pgq.workers');
SELECT table_privs_are('pgq', 'workers', 'pgq_worker', ARRAY['SELECT'], 'pgq_worker can only SELECT from pgq.workers');
SELECT table_privs_are('pgq', 'workers', 'pgq_admin', ARRAY['SELECT'], 'pgq_admin can only SELECT from pgq.workers');
SELECT table_privs_are('pgq', 'workers', 'public', ARRAY[]::name[], 'public has no privilege on pgq.workers');
SELECT table_privs_are('pgq', 'jobs', 'pgq_producer', ARRAY[]::name[], 'pgq_producer has no privilege on pgq.jobs');
SELECT table_privs_are('pgq', 'jobs', 'pgq_worker', ARRAY[]::name[], 'pgq_worker has no privilege on pgq.jobs');
SELECT table_privs_are('pgq', 'jobs', 'pgq_admin', ARRAY['SELECT'], 'pgq_admin can only SELECT from pgq.jobs');
SELECT table_privs_are('pgq', 'jobs', 'public', ARRAY[]::name[], 'public has no privilege on pgq.jobs');
SELECT table_privs_are('pgq', 'outcomes', 'pgq_producer', ARRAY[]::name[], 'pgq_producer has no privilege on pgq.outcomes');
SELECT table_privs_are('pgq', 'outcomes', 'pgq_worker', ARRAY[]::name[], 'pgq_worker has no privilege on pgq.outcomes');
SELECT table_privs_are('pgq', 'outcomes', 'pgq_admin', ARRAY['SELECT'], 'pgq_admin can only SELECT from pgq.outcomes');
SELECT table_privs_are('pgq', 'outcomes', 'public', ARRAY[]::name[], 'public has no privilege on pgq.outcomes');
SELECT table_privs_are('pgq', 'schedules', 'pgq_producer', ARRAY[]::name[], 'pgq_producer has no privilege on pgq.schedules');
SELECT table_privs_are('pgq', 'schedules', 'pgq_worker', ARRAY[]::name[], 'pgq_worker has no privilege on pgq.schedules');
SELECT table_privs_are('pgq', 'schedules', 'pgq_admin', ARRAY['SELECT'], 'pgq_admin can only SELECT from pgq.schedules');
SELECT table_privs_are('pgq', 'schedules', 'public', ARRAY[]::name[], 'public has no privilege on pgq.schedules');

-- Internal tables and sequences: no privilege for any pgq role or PUBLIC.
SELECT is_empty(
    $$
        SELECT c.relname, r.rolname, pr.priv
        FROM pg_catalog.pg_class AS c
        CROSS JOIN (VALUES ('pgq_producer'), ('pgq_worker'), ('pgq_admin'), ('public')) AS r (rolname)
        CROSS JOIN
            unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']) AS pr (priv)
        WHERE c.relnamespace = 'pgq'::regnamespace AND c.relkind IN ('r', 'p')
          AND pg_catalog.has_table_privilege(r.rolname, c.oid, pr.priv)
    $$,
    'no pgq role and not PUBLIC has any privilege on the internal tables'
);
SELECT is_empty(
    $$
        SELECT c.relname, r.rolname
        FROM pg_catalog.pg_class AS c
        CROSS JOIN (VALUES ('pgq_producer'), ('pgq_worker'), ('pgq_admin'), ('public')) AS r (rolname)
        WHERE c.relnamespace = 'pgq'::regnamespace AND c.relkind = 'S'
          AND pg_catalog.has_sequence_privilege(r.rolname, c.oid, 'USAGE, SELECT, UPDATE')
    $$,
    'no pgq role and not PUBLIC has any privilege on the sequences'
);

SELECT * FROM finish();
ROLLBACK;
