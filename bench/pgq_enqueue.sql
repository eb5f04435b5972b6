-- pgbench script: one pgq.enqueue per transaction (what a producer does per job).
SELECT pgq.enqueue('bench', '{"n": 1}'::jsonb);
