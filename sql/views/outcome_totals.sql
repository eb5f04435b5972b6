-- pgq.outcome_totals: finished jobs counted since the install (or the upgrade that added the
-- counts), by entrypoint and outcome; every figure only ever grows (retention prunes the
-- outcome log, not these), so it reads as a Prometheus counter. For psql:
--   SELECT * FROM pgq.outcome_totals WHERE entrypoint = 'email';
-- outcome: succeeded; failed (an attempt failed, the job runs again); dead (an attempt
-- failed and left the job dead); canceled; snoozed; discarded (a dead job removed).
-- jobs: how many; wait_seconds, run_seconds: sums of started - enqueued and finished -
-- started over those that started (divide by jobs for a mean).
CREATE OR REPLACE VIEW pgq.outcome_totals AS
SELECT
    c.entrypoint,
    c.outcome,
    sum(c.jobs)::bigint AS jobs,
    sum(c.wait_seconds) AS wait_seconds,
    sum(c.run_seconds) AS run_seconds
FROM pgq._outcome_counts AS c
GROUP BY c.entrypoint, c.outcome;

COMMENT ON VIEW pgq.outcome_totals IS
'Finished jobs by entrypoint and outcome since the install: cumulative counts (never lower), sums of wait and run seconds.';
