-- pgq._release_gone(worker_id, lost): the jobs of a worker that stopped or was found dead
-- go back (pgq._release; lost: it died, so each counts a lost delivery), and once none is
-- left the worker is marked released (released_at): the heartbeats' sweep never looks it
-- up again. That is safe because a worker that is not alive never claims again: a claim
-- that took jobs holds its worker's row (FOR SHARE, see pgq.claim), so the statement that
-- ended the worker either waited for that claim, and this one sees its jobs, or came
-- first, and the claim failed. A job skipped because another transaction holds it (a late
-- complete) keeps the worker unreleased: the next sweep looks again.
-- max_jobs (NULL: all): release at most that many; the worker stays unreleased while it
-- holds any, and the next call goes on.
-- Returns the number of jobs released, canceled or killed.
CREATE OR REPLACE FUNCTION pgq._release_gone(worker_id uuid, lost boolean, max_jobs integer DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_count integer;
BEGIN
    v_count := pgq._release(ARRAY[worker_id], '{}', lost, max_jobs);
    UPDATE pgq._workers AS w
    SET released_at = now()
    WHERE w.id = _release_gone.worker_id AND w.state <> 'alive' AND w.released_at IS NULL
      -- `j.entrypoint >= ''` holds for every job: it bounds the first column of _jobs_running_idx
      -- so that PostgreSQL 18's planner skips through it by worker_id, as 14 to 17 do without it,
      -- instead of walking _jobs_started_idx and visiting the row of every entry (dead ones too,
      -- under a held snapshot).
      AND NOT EXISTS (
          SELECT 1 FROM pgq._jobs AS j
          WHERE j.status = 'running' AND j.entrypoint >= '' AND j.worker_id = _release_gone.worker_id
      );
    RETURN v_count;
END
$$;
