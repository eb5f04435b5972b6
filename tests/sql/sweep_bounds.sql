-- The bounds of the maintenance inside heartbeats and registrations (pgq._reap, light form:
-- at most 200 jobs per call, the rest left to the next call) and of the whole sweep (all
-- the jobs), and pgq._sweep_deadline, which reads the statement_timeout in force.
BEGIN;
SELECT plan(11);

\ir fixtures/setup.sql

SET LOCAL statement_timeout = '400ms';
SELECT is(pgq._sweep_deadline(0.25), statement_timestamp() + interval '100 ms', 'a quarter of a 400 ms timeout');
SET LOCAL statement_timeout = 0;
SELECT is(pgq._sweep_deadline(0.5), 'infinity'::timestamptz, 'no timeout: no deadline');
-- PostgreSQL 17 and newer: a transaction_timeout counts from the transaction's start.
SELECT CASE WHEN current_setting('server_version_num')::int >= 170000 THEN set_config('transaction_timeout', '1h', TRUE) END;
SELECT is(
    pgq._sweep_deadline(0.5),
    CASE
        WHEN current_setting('server_version_num')::int >= 170000
            THEN transaction_timestamp() + interval '30 min'
        ELSE 'infinity'::timestamptz
    END,
    'half of a one-hour transaction_timeout, from the transaction start (17 and newer)'
);
SELECT CASE WHEN current_setting('server_version_num')::int >= 170000 THEN set_config('transaction_timeout', '0', TRUE) END;

INSERT INTO t_worker VALUES ('gone', pgq.register_worker('gone', ARRAY['sb']));
SELECT is(
    (SELECT count(*) FROM pgq.enqueue_batch('sb', array_fill('{}'::jsonb, ARRAY[450]))), 450::bigint, '450 jobs'
);
SELECT is(
    (SELECT count(*) FROM pgq.claim((SELECT t.id FROM t_worker AS t WHERE t.label = 'gone'), ARRAY['sb'], 450)),
    450::bigint,
    'a worker claims them all'
);
UPDATE pgq._workers SET heartbeat_at = now() - interval '1 hour' WHERE name = 'gone';

SELECT is(pgq._reap(FALSE), 200, 'the light reap gives back 200 jobs of a silent worker');
SELECT is(
    (SELECT count(*) FROM pgq._jobs WHERE entrypoint = 'sb' AND status = 'running'), 250::bigint,
    'the others stay held, for the next call'
);
SELECT is(pgq._reap(FALSE) + pgq._reap(FALSE), 250, 'the next calls give back the rest');
SELECT isnt(
    (SELECT w.released_at FROM pgq._workers AS w WHERE w.name = 'gone'), NULL,
    'then the worker is marked released'
);

INSERT INTO t_worker VALUES ('gone2', pgq.register_worker('gone2', ARRAY['sb']));
SELECT is(
    (SELECT count(*) FROM pgq.claim((SELECT t.id FROM t_worker AS t WHERE t.label = 'gone2'), ARRAY['sb'], 450)),
    450::bigint,
    'another worker claims them all'
);
UPDATE pgq._workers SET heartbeat_at = now() - interval '1 hour' WHERE name = 'gone2';
SELECT is(pgq.reap(), 450, 'pgq.reap gives back all of them in one call');

SELECT * FROM finish();
ROLLBACK;
