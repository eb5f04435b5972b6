-- Privileges, re-applied on every install and upgrade. Nothing is granted to PUBLIC;
-- internal tables and helpers are reachable only through the SECURITY DEFINER functions.
REVOKE ALL ON SCHEMA pgq FROM public;
REVOKE ALL ON ALL TABLES IN SCHEMA pgq FROM public;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA pgq FROM public;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA pgq FROM public;

GRANT USAGE ON SCHEMA pgq TO pgq_producer, pgq_worker, pgq_admin;

-- Producers enqueue and follow their jobs.
GRANT EXECUTE ON FUNCTION
pgq.enqueue(text, jsonb, integer, timestamptz, text, jsonb, integer, bigint[], text),
pgq.enqueue_batch(text, jsonb[], integer, timestamptz, text[]),
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
pgq.heartbeat(uuid, bigint[]),
pgq.complete(uuid, bigint[], jsonb[], integer[]),
pgq.release(uuid, bigint[]),
pgq.fail(uuid, bigint, text, interval, integer),
pgq.snooze(uuid, bigint, interval, integer),
pgq.reap(),
pgq.sweep(),
pgq.settings(text[]),
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
pgq.prune(),
pgq.stats(interval)
TO pgq_admin;

-- The views call pgq._defaults(), a constant: their readers need to execute it.
GRANT EXECUTE ON FUNCTION pgq._defaults() TO pgq_producer, pgq_worker, pgq_admin;

GRANT SELECT ON pgq.queues, pgq.workers, pgq.jobs, pgq.outcomes, pgq.schedules TO pgq_admin;
GRANT SELECT ON pgq.queues, pgq.workers TO pgq_worker;
