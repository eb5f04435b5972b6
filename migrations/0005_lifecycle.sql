-- 0.2: a worker id is bound to the login role that registered it (pgq._check_worker_role).
-- Workers registered before this migration have no role and stay usable by any worker
-- role, so that workers of the previous version keep running through the upgrade.
ALTER TABLE pgq._workers ADD COLUMN registered_by name;
