-- pgq._mark_keyed(entrypoint): the entrypoint has jobs with a concurrency key, so its
-- claims take the keyed path (fair rotation, per-key limits; see pgq.claim). Checked with a
-- plain read first: only the first keyed enqueue of an entrypoint writes (and locks) its
-- settings row, so producers do not queue behind one another on it.
CREATE OR REPLACE FUNCTION pgq._mark_keyed(entrypoint text)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pgq._queues AS q WHERE q.entrypoint = _mark_keyed.entrypoint AND q.keyed) THEN
        INSERT INTO pgq._queues AS q (entrypoint, keyed)
        VALUES (_mark_keyed.entrypoint, TRUE)
        ON CONFLICT ON CONSTRAINT _queues_pkey DO UPDATE SET keyed = TRUE WHERE NOT q.keyed;
    END IF;
END
$$;
