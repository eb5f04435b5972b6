-- pgq.watch: marks a live job watched and returns its status; finished and unknown jobs;
-- PQ001 for NULL, changing nothing; the triggers that notify exist with their conditions.
-- (The notification itself needs a commit: tests/py/client/test_wait.py.)
BEGIN;
SELECT plan(11);

\ir fixtures/setup.sql

INSERT INTO t_job VALUES ('queued', pgq.enqueue('wt'));
INSERT INTO t_job VALUES ('other', pgq.enqueue('wt'));
INSERT INTO t_job VALUES ('canceled', pgq.enqueue('wt'));
SELECT is(pgq.cancel(ARRAY[pg_temp.jid('canceled')]), 1, 'one job is canceled');

SELECT is(pgq.watch(pg_temp.jid('queued')), 'queued', 'watch returns the status of a live job');
SELECT ok(
    (SELECT j.watched FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('queued')),
    'the watched job is flagged'
);
SELECT ok(
    NOT (SELECT j.watched FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('other')),
    'a job nobody watches is not flagged'
);
SELECT is(pgq.watch(pg_temp.jid('queued')), 'queued', 'watching twice is harmless');
SELECT is(pgq.watch(pg_temp.jid('canceled')), 'canceled', 'watch returns the status of a finished job');
SELECT is(pgq.watch(-1), NULL, 'watch returns NULL for an unknown id');
SELECT throws_ok('SELECT pgq.watch(NULL)', 'PQ001', NULL, 'a NULL id raises PQ001');
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.watched),
    1::bigint,
    'bad calls changed nothing'
);
SELECT trigger_is('pgq', '_jobs', '_jobs_finished_trg', 'pgq', '_trg_notify_finished', 'deletions of watched jobs notify');
SELECT trigger_is('pgq', '_jobs', '_jobs_dead_trg', 'pgq', '_trg_notify_finished', 'watched jobs going dead notify');

SELECT * FROM finish();
ROLLBACK;
