-- pgbench script: 1000 jobs per statement through pgq.enqueue_batch.
SELECT count(*) FROM pgq.enqueue_batch('bench', array_fill('{"n": 1}'::jsonb, ARRAY[1000]));
