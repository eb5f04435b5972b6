-- pgq.claim: take up to batch_size due jobs of the given entrypoints for a worker, in the
-- rows of an older release: the claim itself (order, limits, keys, marks) is pgq.claim_v3
-- (claim_v3.sql), whose rows the 0.3.0 worker reads. A call shape keeps its result shape
-- and meaning across releases (a worker of an older release builds its jobs from these
-- rows while an upgrade runs): new columns or meanings come only through a new form.
-- This file holds the two older ones:
--   pgq.claim(worker_id, entrypoints, batch_size, protocol => 2): the row of claim
--     protocol 2 (0.2.0), which adds concurrency_key;
--   pgq.claim(worker_id, entrypoints[, batch_size]): the row of 0.1.0 (protocol 1), the
--     same claim with only its columns (below).
-- In both, attempt counts the failures so far (0 on a job's first run), as their workers
-- expect; pgq.claim_v3 counts attempts from 1.
-- Parameters: worker_id (from pgq.register_worker); entrypoints (a subset of those the
--   worker registered); batch_size (1 to 10000; default 1 in the 0.1.0 form); protocol
--   (2: the row shape this form returns).
-- Returns the claimed jobs in claim order (empty when nothing is due); max_attempts is the
-- effective value and timeout the entrypoint's. Each has deliveries + 1: a job
-- with deliveries > 1 was delivered before (a crash, a lost lease, a release, a retry, a
-- snooze).
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
AS $$
BEGIN
    IF protocol IS DISTINCT FROM 2 THEN
        PERFORM pgq._invalid('protocol', format('%s is not a claim protocol', coalesce(protocol::text, 'NULL')),
            'protocol => 2 returns the rows of 0.2.0; pgq.claim without protocol those of 0.1.0; '
            || 'pgq.claim_v3 those of 0.3.0 on.');
    END IF;
    RETURN QUERY
    SELECT c.id, c.entrypoint, c.payload, c.headers, c.priority, c.attempt - 1, c.deliveries, c.enqueued_at,
           c.run_at, c.max_attempts, c.timeout, c.concurrency_key
    FROM pgq.claim_v3(claim.worker_id, claim.entrypoints, claim.batch_size) AS c;
END
$$;

COMMENT ON FUNCTION pgq.claim(uuid, text[], integer, integer) IS
'Claim up to batch_size due jobs for a registered worker, highest priority first, then oldest; protocol 2 rows (with concurrency_key; attempt counts failures, from 0).';

-- The 0.1.0 form: the same claim, the row of 0.1.0 (its workers build their jobs from every
-- column, so it never gains one). One statement around the protocol 2 form above, which
-- keeps its meaning of attempt ($1, $2, $3: worker_id, entrypoints, batch_size).
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
