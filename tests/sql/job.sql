-- pgq.job: the story of queued, failed-and-retrying, waiting, succeeded (with its result,
-- payload and headers kept), canceled and dead jobs; NULL for unknown ids; PQ001 for NULL.
BEGIN;
SELECT plan(22);

\ir fixtures/setup.sql

INSERT INTO t_worker VALUES ('w', pgq.register_worker('w', ARRAY['js']));
INSERT INTO t_job VALUES ('parent', pgq.enqueue('js', '{"n": 1}', priority => 5, headers => '{"trace": "t1"}'));
INSERT INTO t_job VALUES ('child', pgq.enqueue('js', '{"n": 2}', depends_on => ARRAY[pg_temp.jid('parent')]));
INSERT INTO t_job VALUES ('doomed', pgq.enqueue('js', '{"n": 3}', priority => 4, max_attempts => 1));
INSERT INTO t_job VALUES ('canceled', pgq.enqueue('js', '{"n": 4}', priority => -5));

SELECT is(
    pgq.job(pg_temp.jid('parent')) ->> 'status', 'queued', 'a queued job: status queued'
);
SELECT is(
    pgq.job(pg_temp.jid('parent')) -> 'dependents',
    jsonb_build_array(jsonb_build_object('id', pg_temp.jid('child'), 'status', 'waiting')),
    'a job lists the jobs waiting for it'
);
SELECT is(
    pgq.job(pg_temp.jid('child')) -> 'depends_on',
    jsonb_build_array(jsonb_build_object('id', pg_temp.jid('parent'), 'status', 'queued')),
    'a waiting job lists the jobs it waits for, with their status'
);
SELECT is(pgq.job(pg_temp.jid('child')) ->> 'status', 'waiting', 'a waiting job: status waiting');

-- The parent fails once (a two-line error), then succeeds with a result.
SELECT is((SELECT count(*) FROM pgq.claim(pg_temp.wid('w'), ARRAY['js'], 2)), 2::bigint, 'w claims parent and doomed');
SELECT is(pgq.fail(pg_temp.wid('w'), pg_temp.jid('parent'), E'Traceback\nValueError: bad', '0 seconds'), 'queued', 'parent fails once');
SELECT is(pgq.job(pg_temp.jid('parent')) ->> 'error', E'Traceback\nValueError: bad', 'a retrying job shows its last error in full');
SELECT is(jsonb_array_length(pgq.job(pg_temp.jid('parent')) -> 'attempts'), 1, 'one failed attempt is listed');
SELECT is(pgq.fail(pg_temp.wid('w'), pg_temp.jid('doomed'), 'fatal', '0 seconds'), 'dead', 'doomed dies');
SELECT is(pgq.job(pg_temp.jid('doomed')) ->> 'status', 'dead', 'a dead job: status dead');
SELECT ok((pgq.job(pg_temp.jid('doomed')) ->> 'finished')::boolean, 'a dead job is finished');
SELECT isnt(pgq.job(pg_temp.jid('doomed')) ->> 'finished_at', NULL, 'a dead job has the time of its last failure');
SELECT is((SELECT count(*) FROM pgq.claim(pg_temp.wid('w'), ARRAY['js'], 1)), 1::bigint, 'w claims parent again');
SELECT is(
    (SELECT count(*) FROM pgq.complete(pg_temp.wid('w'), ARRAY[pg_temp.jid('parent')], ARRAY['{"ok": true}']::jsonb[])),
    1::bigint,
    'parent succeeds with a result'
);

SELECT is(
    pgq.job(pg_temp.jid('parent'))
    - ARRAY['worker_id', 'enqueued_at', 'started_at', 'finished_at', 'attempts', 'dependents', 'depends_on', 'steps', 'progress', 'progress'],
    jsonb_build_object(
        'id', pg_temp.jid('parent'), 'entrypoint', 'js', 'status', 'succeeded', 'finished', TRUE,
        'payload', '{"n": 1}'::jsonb, 'headers', '{"trace": "t1"}'::jsonb, 'priority', 5, 'run_at', NULL,
        'attempt', 2, 'max_attempts', NULL, 'deliveries', 2, 'dedupe_key', NULL, 'concurrency_key', NULL,
        'cancel_requested', FALSE, 'result', '{"ok": true}'::jsonb, 'error', NULL
    ),
    'a succeeded job: its payload, headers and result from the outcome log'
);
SELECT is(
    pgq.job(pg_temp.jid('parent')) #>> '{attempts,0,error}', E'Traceback\nValueError: bad',
    'the failed attempt of a finished job keeps its full error'
);
SELECT ok(
    (pgq.job(pg_temp.jid('parent')) ->> 'finished_at')::timestamptz
    >= (pgq.job(pg_temp.jid('parent')) ->> 'started_at')::timestamptz,
    'a finished job has its start and finish times'
);
SELECT is(pgq.job(pg_temp.jid('child')) ->> 'status', 'queued', 'the child was released');
SELECT is(pgq.cancel(ARRAY[pg_temp.jid('canceled')]), 1, 'one job is canceled');
SELECT is(
    pgq.job(pg_temp.jid('canceled')) - ARRAY['id', 'enqueued_at', 'finished_at', 'attempts', 'dependents', 'depends_on', 'steps', 'progress', 'worker_id', 'started_at', 'run_at', 'max_attempts', 'dedupe_key', 'cancel_requested', 'deliveries', 'attempt', 'entrypoint', 'headers', 'result', 'finished'],
    '{"status": "canceled", "payload": {"n": 4}, "priority": -5, "error": "canceled by pgq.cancel", "concurrency_key": null}'::jsonb,
    'a canceled job keeps its payload and says why it was canceled'
);
SELECT is(pgq.job(-1), NULL, 'an unknown id: NULL');
SELECT throws_ok('SELECT pgq.job(NULL)', 'PQ001', NULL, 'a NULL id raises PQ001');

SELECT * FROM finish();
ROLLBACK;
