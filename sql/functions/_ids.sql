-- pgq._ids(ids): the elements of an id array, with a planner estimate of one row. pgq.claim
-- joins the ids its keyed path chose through it: the array is almost always empty, and
-- unnest's estimate of a parameter (10 rows) made the cached generic plan of the claim
-- look dearer than re-planning it on every call.
CREATE OR REPLACE FUNCTION pgq._ids(ids bigint[])
RETURNS SETOF bigint
LANGUAGE plpgsql
IMMUTABLE
ROWS 1
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY SELECT u.id FROM unnest(ids) AS u (id);
END
$$;
