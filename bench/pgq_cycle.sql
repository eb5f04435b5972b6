-- pgbench script: the same claim -> complete cycle through pgq's own SQL functions
-- (pgq.claim_v3, pgq.complete), without the Python worker: the worker's share of the cost is
-- what separates this from a real drain. Every claimed row is rendered as text, as a
-- client would receive it. The bench registers worker md5(client_id)::uuid per client, for
-- the entrypoints of :entrypoints (a text[] literal: pgbench -D 'entrypoints={bench}').
WITH c AS (
    SELECT * FROM pgq.claim_v3(md5(:client_id::text)::uuid, :entrypoints::text[], :batch)
)
SELECT coalesce(array_agg(c.id)::text, '{}') AS ids, sum(length(c::text)) AS bytes FROM c \gset
SELECT count(*) FROM pgq.complete(md5(:client_id::text)::uuid, :ids::bigint[]);
