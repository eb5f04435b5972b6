-- pgq.workers: registered workers, most recent first. state: alive, dead (reaped after
-- missing heartbeats), stopped (unregistered). Rows of workers gone for a day are pruned.
CREATE OR REPLACE VIEW pgq.workers AS
SELECT
    w.id,
    w.name,
    w.entrypoints,
    w.state,
    w.registered_at,
    w.heartbeat_at,
    now() - w.heartbeat_at AS heartbeat_age,
    w.stopped_at,
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.worker_id = w.id AND j.status = 'running') AS jobs_held
FROM pgq._workers AS w
ORDER BY w.state = 'alive' DESC, w.registered_at DESC;

COMMENT ON VIEW pgq.workers IS 'Registered workers: alive, dead or stopped, last heartbeat, jobs held.';
