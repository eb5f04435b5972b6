-- 0014: the 0.3.0 worker claims through pgq.claim_v3, whose rows count attempts from 1 and
-- say why each job is delivered (first, retry, snooze, lost). The reason is the one thing
-- the job table did not hold: how its last delivery ended. Jobs re-queued before this
-- upgrade have none (NULL): pgq.claim_v3 calls their next delivery 'lost', the answer that
-- makes a handler check. The column is nullable without a default: adding it rewrites
-- nothing.
ALTER TABLE pgq._jobs ADD COLUMN delivery_reason text;
