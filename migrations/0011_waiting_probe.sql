-- 0011: a completion asks whether any job waits before it looks for its dependents
-- (issue 14). The dependents' lookup probes the waiting jobs' GIN index once per completed
-- id: with batches of 500, some 7% of the server CPU of a claim and completion, spent on
-- queues where no job ever waits. This index holds only waiting jobs, so "is any job
-- waiting?" is one descent, nearly always into an empty index. Its predicate also names
-- worker_id IS NULL (true of every waiting job: _jobs_held_check), which the dependents'
-- lookups do not state: the planner cannot use it for them, so they keep the GIN index
-- instead of walking every waiting job in id order.
CREATE INDEX _jobs_waiting_any_idx ON pgq._jobs (id) WHERE status = 'waiting' AND worker_id IS NULL;
