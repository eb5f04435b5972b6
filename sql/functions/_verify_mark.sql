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
