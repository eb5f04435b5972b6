-- pgbench script: one claim -> complete cycle of a worker, as plain SQL, in the two
-- transactions pgq uses (claim commits, then completion commits). The claimed rows are
-- rendered as text, as a worker receives them (pgq_cycle.sql does the same). :batch is
-- set with `pgbench -D batch=N`; :client_id is pgbench's own. Run with -M prepared, so
-- :ids is sent as a parameter. The locked rows are updated by their ctid (a TID scan), as
-- pgq.claim does.
WITH candidates AS (
    SELECT j.ctid
    FROM raw_jobs AS j
    WHERE j.entrypoint = 'bench' AND j.status = 'queued' AND j.run_at <= now()
    ORDER BY j.priority DESC, j.run_at, j.id
    LIMIT :batch
    FOR UPDATE SKIP LOCKED
),
claimed AS (
    UPDATE raw_jobs AS j
    SET status = 'running',
        worker_id = ('00000000-0000-4000-8000-' || lpad(:client_id::text, 12, '0'))::uuid,
        deliveries = j.deliveries + 1, started_at = now()
    WHERE j.ctid = ANY (ARRAY(SELECT c.ctid FROM candidates AS c))
    RETURNING j.id, j.entrypoint, j.payload, j.headers, j.priority, j.attempt, j.deliveries, j.enqueued_at,
              j.run_at
)
SELECT coalesce(array_agg(c.id)::text, '{}') AS ids, sum(length(c::text)) AS bytes FROM claimed AS c \gset
WITH done AS (
    DELETE FROM raw_jobs AS j
    WHERE j.id = ANY (:ids::bigint[])
      AND j.worker_id = ('00000000-0000-4000-8000-' || lpad(:client_id::text, 12, '0'))::uuid
      AND j.status = 'running'
    RETURNING j.id, j.entrypoint, j.priority, j.attempt, j.deliveries, j.enqueued_at,
              j.started_at, j.worker_id, j.payload, j.headers
)
INSERT INTO raw_outcomes (
    job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, started_at, worker_id,
    payload, headers
)
SELECT d.id, d.entrypoint, 'succeeded', d.priority, d.attempt, d.deliveries, d.enqueued_at,
       d.started_at, d.worker_id, d.payload, d.headers
FROM done AS d;
