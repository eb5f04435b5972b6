-- pgq._mark_epoch(): how many times the claim marks were voided (pgq._lower_mark). A mark is
-- in force only while its epoch equals this. The sequence is read, not advanced: its row
-- is updated in place by nextval, so every session sees a void at once, before the voiding
-- transaction commits (which is what makes the void safe to publish early).
CREATE OR REPLACE FUNCTION pgq._mark_epoch()
RETURNS bigint
LANGUAGE sql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT s.last_value + s.is_called::integer FROM pgq._mark_voids AS s
$$;

COMMENT ON FUNCTION pgq._mark_epoch() IS
'Internal: the number of claim-mark voids so far; a mark holds only while its epoch equals it.';
