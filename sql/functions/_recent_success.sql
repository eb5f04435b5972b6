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
