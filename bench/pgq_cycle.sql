-- pgbench script: the same claim -> complete cycle through pgq's own SQL functions
-- (pgq.claim_v3, pgq.complete), without the Python worker: the worker's share of the cost is
-- what separates this from a real drain. Every claimed row is rendered as text, as a
-- client would receive it. The bench registers a worker per client, its id the client id in
-- the last 12 digits of a UUID (no md5(): a server in FIPS mode refuses it), for
-- the entrypoints of :entrypoints (a text[] literal: pgbench -D 'entrypoints={bench}').
WITH c AS (
    SELECT * FROM pgq.claim_v3(
        ('00000000-0000-4000-8000-' || lpad(:client_id::text, 12, '0'))::uuid, :entrypoints::text[], :batch
    )
)
SELECT coalesce(array_agg(c.id)::text, '{}') AS ids, sum(length(c::text)) AS bytes FROM c \gset
SELECT count(*) FROM pgq.complete(
    ('00000000-0000-4000-8000-' || lpad(:client_id::text, 12, '0'))::uuid, :ids::bigint[]
);
