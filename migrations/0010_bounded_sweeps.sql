-- 0010: sweeps whose cost does not grow with the jobs claimed since the oldest snapshot
-- (issue 14). Under a held snapshot every claimed job leaves an entry in the running index
-- that vacuum may not remove, and a sweep that walked that index visited each one's heap
-- page: at a million claimed, every heartbeat cost a second of server time.

-- When the jobs of a worker that stopped or was found dead were all given back: the sweep
-- looks up only the workers without it, each by its own id (see pgq._reap).
ALTER TABLE pgq._workers ADD COLUMN released_at timestamptz;
UPDATE pgq._workers AS w
SET released_at = now()
WHERE
    w.state <> 'alive'
    AND NOT EXISTS (SELECT 1 FROM pgq._jobs AS j WHERE j.status = 'running' AND j.worker_id = w.id);

-- Running jobs by start: the timeout rule reads only those started before the shortest
-- timeout plus lease.
CREATE INDEX _jobs_started_idx ON pgq._jobs (started_at) WHERE status = 'running';
