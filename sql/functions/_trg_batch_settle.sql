-- pgq._trg_batch_settle(): deferred constraint trigger (sql/setup.sql) on pgq._batch_members
-- (a member marked by pgq._trg_batch_member_ended) and on pgq._batches (a batch opened): runs at
-- the commit of the transaction. The first call for a marked member queues one more call
-- behind every deferred event of the transaction (see below) and the calls in between
-- return; that last call takes in every member this transaction marked, and later calls of
-- the same commit find none left. Exactly once: the batches are
-- locked (FOR UPDATE, in id order, so that two commits settling members of the same
-- batches cannot deadlock) before their members are counted, so of two transactions
-- ending the last two members at the same instant the second counts after the first has
-- committed and sees its counts. Each member's fate is read as it stands at commit: its
-- live row (dead, or live again after pgq.retry), else the final outcome this transaction
-- logged for it (succeeded, canceled; dead = discarded), found in one scan of the log's
-- newest rows (finished_at >= the transaction's start, as every function that ends a job
-- stamps it), not one lookup per member; a member gone without an outcome was canceled
-- (every path that removes a job without logging it in the same statement cancels it).
-- Counts move by the change of each member's fate, so a member counted dead and then
-- discarded is counted once, and a retried one leaves the dead count. Then the callbacks
-- that became due are enqueued (pgq._batch_callback), each once: its job id is kept.
-- SECURITY DEFINER, as pgq._trg_check_waiting: a deferred trigger fires at COMMIT, outside any
-- pgq function, as the committing role (a producer's, a worker's), which may not read the
-- batch tables; it needs the owner's rights.
CREATE OR REPLACE FUNCTION pgq._trg_batch_settle()
RETURNS trigger
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    v_xact xid8 := pg_catalog.pg_current_xact_id();
    v_batches bigint[];
    v_ids bigint[];
    v_batch pgq._batches;
    v_touched text;
BEGIN
    IF tg_table_name = '_batches' THEN
        -- A batch opened by this transaction: only whether it finishes empty. Its members'
        -- ends, if any, are counted by their own calls (they can only move it toward its
        -- total, so checking it first finishes nothing early).
        v_batches := ARRAY[new.id];
    ELSE
        -- The first call of a commit that marked members counts nothing: it touches its
        -- row again, which queues one more call behind every deferred event of the
        -- transaction; the calls in between return. So the commit-time checks of new
        -- waiting jobs (pgq._trg_check_waiting) run first, and one that waits for another
        -- transaction's commit holds no batch that commit needs (else: a deadlock).
        -- Keyed by the transaction: a value left by anyone else (SET pgq.batch_settle) is
        -- no call queued by this commit.
        v_touched := v_xact || ':' || new.batch_id || ':' || new.job_id;
        IF coalesce(pg_catalog.current_setting('pgq.batch_settle', TRUE), '') NOT LIKE v_xact || ':%' THEN
            PERFORM pg_catalog.set_config('pgq.batch_settle', v_touched, TRUE);
            UPDATE pgq._batch_members AS m SET ended_xact = m.ended_xact
            WHERE m.batch_id = new.batch_id AND m.job_id = new.job_id AND m.ended_xact = v_xact;
            IF FOUND THEN
                RETURN NULL;
            END IF;
        ELSIF pg_catalog.current_setting('pgq.batch_settle') <> v_touched THEN
            RETURN NULL;
        END IF;
        PERFORM pg_catalog.set_config('pgq.batch_settle', '', TRUE);
        SELECT array_agg(DISTINCT m.batch_id), array_agg(m.job_id) INTO v_batches, v_ids
        FROM pgq._batch_members AS m WHERE m.ended_xact = v_xact;
        IF v_batches IS NULL THEN
            RETURN NULL;
        END IF;
    END IF;
    PERFORM 1 FROM pgq._batches AS b WHERE b.id = ANY (v_batches) ORDER BY b.id FOR UPDATE;
    IF v_ids IS NOT NULL THEN
        WITH logged AS (
            SELECT DISTINCT ON (o.job_id) o.job_id, o.outcome
            FROM pgq._outcomes AS o
            WHERE o.finished_at >= now() AND o.job_id = ANY (v_ids) AND o.outcome IN ('succeeded', 'canceled', 'dead')
            ORDER BY o.job_id, o.finished_at DESC
        ),
        fates AS (
            SELECT m.batch_id, m.job_id, m.outcome AS was,
                   CASE
                       WHEN j.id IS NOT NULL THEN CASE WHEN j.status = 'dead' THEN 'dead' END
                       ELSE coalesce(l.outcome, 'canceled')
                   END AS now
            FROM pgq._batch_members AS m
            LEFT JOIN pgq._jobs AS j ON j.id = m.job_id
            LEFT JOIN logged AS l ON l.job_id = m.job_id
            WHERE m.ended_xact = v_xact
        ),
        marked AS (
            UPDATE pgq._batch_members AS m
            SET outcome = f.now, ended_xact = NULL
            FROM fates AS f
            WHERE m.batch_id = f.batch_id AND m.job_id = f.job_id
        ),
        deltas AS (
            SELECT f.batch_id,
                   count(*) FILTER (WHERE f.now = 'succeeded') - count(*) FILTER (WHERE f.was = 'succeeded') AS succeeded,
                   count(*) FILTER (WHERE f.now = 'dead') - count(*) FILTER (WHERE f.was = 'dead') AS dead,
                   count(*) FILTER (WHERE f.now = 'canceled') - count(*) FILTER (WHERE f.was = 'canceled') AS canceled
            FROM fates AS f
            GROUP BY f.batch_id
        )
        UPDATE pgq._batches AS b
        SET succeeded = b.succeeded + d.succeeded, dead = b.dead + d.dead, canceled = b.canceled + d.canceled
        FROM deltas AS d
        WHERE b.id = d.batch_id;
    END IF;
    FOR v_batch IN
        SELECT b.* FROM pgq._batches AS b WHERE b.id = ANY (v_batches) ORDER BY b.id
    LOOP
        IF v_batch.dead > 0 AND v_batch.death_job IS NULL AND v_batch.on_death IS NOT NULL THEN
            UPDATE pgq._batches AS b SET death_job = pgq._batch_callback(v_batch, v_batch.on_death, 'death')
            WHERE b.id = v_batch.id;
        END IF;
        IF v_batch.succeeded + v_batch.dead + v_batch.canceled = v_batch.total AND v_batch.finished_at IS NULL THEN
            UPDATE pgq._batches AS b
            SET finished_at = now(), finish_job = pgq._batch_callback(v_batch, v_batch.on_finish, 'finish')
            WHERE b.id = v_batch.id;
        END IF;
        IF v_batch.succeeded = v_batch.total AND v_batch.success_job IS NULL AND v_batch.on_success IS NOT NULL THEN
            UPDATE pgq._batches AS b SET success_job = pgq._batch_callback(v_batch, v_batch.on_success, 'success')
            WHERE b.id = v_batch.id;
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION pgq._trg_batch_settle() IS
'Internal: at commit, counts the batch members this transaction ended and enqueues the callbacks that became due.';
