-- pgq.claim_v3: take up to batch_size due jobs of the given entrypoints for a worker.
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
-- The claim of the 0.3.0 worker: its rows count attempts from 1 and say why the job is
-- delivered. pgq.claim keeps the rows of 0.1.0 and 0.2.0 for their workers (claim.sql): a
-- call shape keeps its result shape and meaning across releases, and a form of pgq.claim
-- with protocol => 3 cannot return other columns than protocol => 2 (the same argument
-- types), hence a function of its own. A release that changes the row again adds
-- pgq.claim_v4 and keeps this one as it is.
-- Parameters: worker_id (from pgq.register_worker); entrypoints (a subset of those the
--   worker registered); batch_size (1 to 10000, default 1).
-- Returns the claimed jobs in claim order (empty when nothing is due); max_attempts is the
-- effective value and timeout the entrypoint's. attempt: the number of this run, from 1
-- (failures so far + 1; pgq.retry starts again at 1). deliveries: the times the job was
-- claimed, this one included (the delivery that pgq.complete and pgq.fail fence on).
-- reason: why the job is delivered now:
--   first  its first delivery;
--   retry  the last delivery failed (pgq.fail, a timeout) or pgq.retry revived it;
--   snooze the last delivery snoozed (pgq.snooze);
--   lost   the last delivery ended without being settled: its worker was lost (lease
--          expired, reaped) or gave it back (pgq.release, unregistered) while it ran, so
--          its handler may have run, in part or to the end, without its outcome recorded.
--          Also for a job re-queued before the upgrade that added reasons.
-- Raises PQ001 for invalid arguments, PQ002 unknown worker, PQ003 worker no longer alive,
-- PQ007 for a concurrency-limited entrypoint claimed in REPEATABLE READ or SERIALIZABLE.
CREATE OR REPLACE FUNCTION pgq.claim_v3(worker_id uuid, entrypoints text[], batch_size integer DEFAULT 1)
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
    concurrency_key text,
    reason text
)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index paths into pgq._jobs whatever its statistics say (a queue analyzed empty):
-- tests/py/sql/test_empty_queue_plans.py says why; JIT off, which that cost would start.
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
    WHERE w.id = claim_v3.worker_id;
    -- Entrypoints the worker registered were checked by pgq.register_worker (<@ is
    -- false for a NULL element). IS NOT TRUE: a NULL argument takes the checks.
    IF (
        FOUND AND v_state = 'alive' AND (v_role IS NULL OR v_role = session_user)
        AND batch_size BETWEEN 1 AND 10000
        AND cardinality(entrypoints) BETWEEN 1 AND 1000 AND array_ndims(entrypoints) = 1
        AND entrypoints <@ v_registered
    ) IS NOT TRUE THEN
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
        v_allow := claim_v3.batch_size;
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
    -- entrypoints without limits, keys or rates (most claims, and every idle poll: the
    -- statement below); limits without keyed jobs claimed, and keyed jobs chosen by
    -- pgq._claim_keyed (the two statements of pgq._claim_limited, a function of their own:
    -- the call costs about 15 us, which the path without limits does not pay). Each must be
    -- good as a generic plan: the batch is updated by an array (a join with the candidates
    -- turns into a hash join over the whole table when the planner guesses the batch
    -- large). The first statement's array holds the ctids of the rows it locked (a TID
    -- scan; the others walk the primary key with ids), which saves a descent of the primary
    -- key per job, about 5% of the claim's server CPU: a locked row cannot move, and a row
    -- that another transaction changed between this statement's snapshot and the lock is
    -- not visible at its new ctid, so it is not updated nor returned; it stays locked until
    -- this claim commits, then queued for the next one. A ctid names a row only within its
    -- partition: the update matches each row's partition too (tableoid), so that a worker of
    -- entrypoints in several partitions (pgq.isolate) changes only the rows it locked (one
    -- TID lookup per row and partition). pgq._entrypoints_to_claim (inlined)
    -- says where each entrypoint's scan starts, and which entrypoints have limits now: one
    -- that this call did not lock above (it was paused, or had no limit or keyed job yet)
    -- gets nothing, so that a resume, a configure or a first keyed job committed since
    -- cannot let it past its limits.
    IF cardinality(v_limited) = 0 THEN
        RETURN QUERY
        WITH allowance AS (
            SELECT s.* FROM pgq._entrypoints_to_claim(entrypoints) AS s
        ),
        candidates AS (
            SELECT c.tableoid, c.ctid
            FROM allowance AS a
            CROSS JOIN LATERAL (
                SELECT j.tableoid, j.ctid, j.id, j.priority, j.run_at
                FROM pgq._jobs AS j
                WHERE j.entrypoint = a.ep AND j.status = 'queued' AND j.run_at <= now()
                  AND ROW(-j.priority::bigint, j.run_at, j.id) >= ROW(a.from_np, a.from_run, a.from_id)
                ORDER BY -j.priority::bigint, j.run_at, j.id
                LIMIT claim_v3.batch_size
                FOR UPDATE SKIP LOCKED
            ) AS c
            WHERE NOT a.limited
            ORDER BY c.priority DESC, c.run_at, c.id
            LIMIT claim_v3.batch_size
        ),
        claimed AS (
            UPDATE pgq._jobs AS j
            SET status = 'running', worker_id = claim_v3.worker_id, deliveries = j.deliveries + 1, started_at = now()
            WHERE j.ctid = ANY (ARRAY(SELECT c.ctid FROM candidates AS c))
              AND (j.tableoid, j.ctid) IN (SELECT c.tableoid, c.ctid FROM candidates AS c)
            RETURNING j.id, j.entrypoint, j.payload, j.headers, j.priority, j.attempt, j.deliveries,
                      j.enqueued_at, j.run_at, j.max_attempts, j.concurrency_key, j.delivery_reason
        )
        SELECT k.id, k.entrypoint, k.payload, k.headers, k.priority, k.attempt + 1, k.deliveries, k.enqueued_at,
               k.run_at, coalesce(k.max_attempts, a.max_attempts), a.timeout, k.concurrency_key,
               CASE WHEN k.deliveries = 1 THEN 'first' ELSE coalesce(k.delivery_reason, 'lost') END
        FROM claimed AS k
        JOIN allowance AS a ON a.ep = k.entrypoint
        ORDER BY k.priority DESC, k.run_at, k.id;
    ELSE
        RETURN QUERY
        SELECT * FROM pgq._claim_limited(
            claim_v3.worker_id, claim_v3.entrypoints, claim_v3.batch_size,
            v_limited, v_allowed, v_keyed, v_keyed_ids, v_rated, v_tokens, v_stamps
        );
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
        SELECT w.state INTO v_state FROM pgq._workers AS w WHERE w.id = claim_v3.worker_id FOR SHARE;
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

COMMENT ON FUNCTION pgq.claim_v3(uuid, text[], integer) IS
'Claim up to batch_size due jobs for a registered worker, highest priority first, then oldest; the rows of 0.3.0: attempt from 1, reason (first, retry, snooze, lost).';
