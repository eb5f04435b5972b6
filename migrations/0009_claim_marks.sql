-- 0009: the claim's low-water mark (issue 14): claims start their index scan at the first
-- queued job instead of walking the entries of every job claimed since the oldest
-- snapshot (see docs/held-snapshot.md).

-- The claim index sorts in claim order in one direction, so that a row comparison
-- (-priority, run_at, id) >= mark bounds the scan from below; a mixed ASC/DESC index does
-- not take a row comparison as a bound.
DROP INDEX pgq._jobs_claim_idx;
CREATE INDEX _jobs_claim_idx ON pgq._jobs (entrypoint, (-priority::bigint), run_at, id)
WHERE status = 'queued';

-- Per entrypoint: no queued job sorts before the lesser of (neg_priority, run_at, id) and
-- the entrypoint's rows in pgq._mark_lows (see pgq._raise_mark).
CREATE TABLE pgq._marks (
    entrypoint text PRIMARY KEY,
    neg_priority bigint NOT NULL,
    run_at timestamptz NOT NULL,
    id bigint NOT NULL,
    raised_at timestamptz NOT NULL,
    -- When a raise last walked from the front instead of from the mark.
    verified_at timestamptz NOT NULL
);

-- Positions of queued jobs whose producers could not lower the mark in place (see
-- pgq._lower_mark); the next raise takes them in and deletes them.
CREATE TABLE pgq._mark_lows (
    entrypoint text NOT NULL,
    neg_priority bigint NOT NULL,
    run_at timestamptz NOT NULL,
    id bigint NOT NULL
);
CREATE INDEX _mark_lows_idx ON pgq._mark_lows (entrypoint, neg_priority, run_at, id);
