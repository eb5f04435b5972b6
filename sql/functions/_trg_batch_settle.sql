-- pgq._trg_batch_settle(): deferred constraint trigger (sql/setup.sql) on pgq._batch_members
-- (a member marked by pgq._trg_batch_member_ended) and on pgq._batches (a batch opened): runs at
-- the commit of the transaction. Its first call takes in every member this transaction
-- marked; later calls of the same commit find none left. Exactly once: the batches are
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
CREATE OR REPLACE FUNCTION pgq._trg_batch_settle()
RETURNS trigger
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    v_xact xid8 := pg_catalog.pg_current_xact_id();
    v_batches bigint[];
    v_ids bigint[];
    v_batch pgq._batches;
BEGIN
    SELECT array_agg(DISTINCT m.batch_id), array_agg(m.job_id) INTO v_batches, v_ids
    FROM pgq._batch_members AS m WHERE m.ended_xact = v_xact;
    IF tg_table_name = '_batches' THEN
        v_batches := array_append(v_batches, new.id);
    END IF;
    IF v_batches IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM 1 FROM pgq._batches AS b WHERE b.id = ANY (v_batches) ORDER BY b.id FOR UPDATE;
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
