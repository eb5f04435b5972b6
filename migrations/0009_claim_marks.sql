-- 0009: the claim's low-water mark (issue 14): claims start their index scan at the first
-- queued job instead of walking the entries of every job claimed since the oldest
-- snapshot (see docs/held-snapshot.md).

-- The claim index sorts in claim order in one direction, so that a row comparison
-- (priority, run_at, id) >= mark bounds the scan from below; a mixed ASC/DESC index does
-- not take a row comparison as a bound.
DROP INDEX pgq._jobs_claim_idx;
CREATE INDEX _jobs_claim_idx ON pgq._jobs (entrypoint, (-priority::bigint), run_at, id)
WHERE status = 'queued';

-- Per entrypoint: no queued job sorts before (neg_priority, run_at, id) while epoch equals
-- pgq._mark_epoch() (see pgq._raise_mark).
CREATE TABLE pgq._marks (
    entrypoint text PRIMARY KEY,
    neg_priority bigint NOT NULL,
    run_at timestamptz NOT NULL,
    id bigint NOT NULL,
    epoch bigint NOT NULL,
    raised_at timestamptz NOT NULL,
    -- When a raise last walked from the front instead of from the mark.
    verified_at timestamptz NOT NULL
);

-- Bumped (outside any transaction's control) by a writer that cannot lower a mark in place:
-- it voids every mark until its next raise.
CREATE SEQUENCE pgq._mark_voids;
