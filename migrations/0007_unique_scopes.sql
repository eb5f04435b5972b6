-- 0007: uniqueness scopes, windows and replace mode for dedupe keys (pgq.enqueue_job).

-- A succeeded job keeps its dedupe key in the outcome log: an enqueue with a dedupe_window
-- looks for a success with the same key within the window. Jobs without a key are not in
-- the index, so they pay nothing for it.
ALTER TABLE pgq._outcomes ADD COLUMN dedupe_key text;

CREATE INDEX _outcomes_dedupe_idx ON pgq._outcomes (entrypoint, dedupe_key, finished_at)
WHERE dedupe_key IS NOT NULL;

-- Signatures that gained trailing parameters.
DROP FUNCTION IF EXISTS pgq.enqueue(text, jsonb, integer, timestamptz, text, jsonb, integer, bigint[], text);
DROP FUNCTION IF EXISTS pgq.enqueue_batch(text, jsonb[], integer, timestamptz, text[]);
