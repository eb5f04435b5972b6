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
pgq.enqueue_batch(text, jsonb[], integer, timestamptz, text[], text[], text, interval, text, jsonb, integer, bigint[], bigint),
pgq.batch(jsonb, jsonb, jsonb),
pgq.enqueue_trigger(),
pgq.job_status(bigint)
TO pgq_producer, pgq_admin;

-- Everyone may follow a job: its story, and a notification when it finishes.
GRANT EXECUTE ON FUNCTION pgq.job(bigint), pgq.watch(bigint) TO pgq_producer, pgq_worker, pgq_admin;
-- And why it is not running (pgq.explain).
GRANT EXECUTE ON FUNCTION pgq.explain(bigint) TO pgq_producer, pgq_worker, pgq_admin;
-- And the results of the jobs it depends on (pgq.dependency_results).
GRANT EXECUTE ON FUNCTION pgq.dependency_results(bigint) TO pgq_producer, pgq_worker, pgq_admin;
-- And the members of a batch (pgq.batch_results): its producer, and a callback's worker.
GRANT EXECUTE ON FUNCTION pgq.batch_results(bigint) TO pgq_producer, pgq_worker, pgq_admin;

-- Workers claim and settle jobs.
GRANT EXECUTE ON FUNCTION
pgq.register_worker(text, text[]),
pgq.unregister_worker(uuid),
pgq.claim(uuid, text[], integer),
pgq.claim(uuid, text[], integer, integer),
pgq.claim_v3(uuid, text[], integer),
pgq.heartbeat(uuid, bigint[]),
pgq.complete(uuid, bigint[], jsonb[], integer[]),
pgq.release(uuid, bigint[]),
pgq.fail(uuid, bigint, text, interval, integer),
pgq.snooze(uuid, bigint, interval, integer),
pgq.confirm_cancel(uuid, bigint, integer),

pgq.step_result(uuid, bigint, integer, text),
pgq.record_step(uuid, bigint, integer, text, jsonb),
pgq.progress(uuid, bigint, integer, numeric, text),
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
pgq.forget_steps(bigint[]),
pgq.rerun(bigint[]),
pgq.pause(text, boolean),
pgq.resume(text),
pgq.isolate(text),
pgq.unisolate(text),
pgq.configure(
    text, integer, interval, interval, interval, interval, integer, numeric, interval, integer, integer, integer,
    boolean
),
pgq.schedule(text, text, text, jsonb),
pgq.unschedule(text),
pgq.run_schedules(timestamptz),
pgq.run_now(bigint[]),
pgq.trigger_schedule(text),
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
-- Monitoring's counters (pgq status, the dashboard's /metrics).
GRANT SELECT ON pgq.outcome_totals TO pgq_worker, pgq_admin;
