-- 0005: reserved for the change in flight that owns this number; this placeholder keeps the
-- sequence contiguous on this branch and goes when that migration lands.
SELECT 1;
