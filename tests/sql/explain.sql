-- pgq.explain: every reason a job is not running now (finished, dead, held, waiting,
-- scheduled, paused, concurrency, key_concurrency, rate, no_worker, behind), none for a due
-- job nothing holds back; NULL (PQ001) and unknown ids (PQ005) change nothing; privileges.
BEGIN;
SELECT plan(26);

\ir fixtures/setup.sql

-- The reason codes of a job, in order.
CREATE FUNCTION pg_temp.why(label text) RETURNS text[]
LANGUAGE sql AS $$ SELECT coalesce(array_agg(e.reason), '{}') FROM pgq.explain(pg_temp.jid($1)) AS e $$;

SELECT pgq.configure('ex_c', concurrency => 1);
SELECT pgq.configure('ex_k', key_concurrency => 1);
SELECT pgq.configure('ex_r', rate => 0.001);
INSERT INTO t_worker VALUES ('w1', pgq.register_worker('w1', ARRAY['ex', 'ex_c', 'ex_k', 'ex_r']));

INSERT INTO t_job VALUES ('running', pgq.enqueue('ex', priority => 9));
INSERT INTO t_job VALUES ('succeeded', pgq.enqueue('ex', priority => 8));
INSERT INTO t_job VALUES ('dead', pgq.enqueue('ex', priority => 7, max_attempts => 1));
SELECT is((SELECT count(*) FROM pgq.claim(pg_temp.wid('w1'), ARRAY['ex'], 3)), 3::bigint, 'w1 claims three jobs');
SELECT is(
    (SELECT count(*) FROM pgq.complete(pg_temp.wid('w1'), ARRAY[pg_temp.jid('succeeded')])), 1::bigint,
    'one succeeds'
);
SELECT is(pgq.fail(pg_temp.wid('w1'), pg_temp.jid('dead'), 'card declined'), 'dead', 'one dies');
INSERT INTO t_job VALUES ('first', pgq.enqueue('ex', priority => 1));
INSERT INTO t_job VALUES ('second', pgq.enqueue('ex'));
INSERT INTO t_job VALUES ('scheduled', pgq.enqueue('ex', run_at => now() + interval '1 hour'));
INSERT INTO t_job VALUES ('waiting', pgq.enqueue('ex', depends_on => ARRAY[pg_temp.jid('running'), pg_temp.jid('succeeded')]));

SELECT is(pg_temp.why('succeeded'), ARRAY['finished'], 'a succeeded job: finished');
SELECT matches((SELECT e.detail FROM pgq.explain(pg_temp.jid('succeeded')) AS e), '^succeeded at ', 'finished says how');
SELECT is(pg_temp.why('dead'), ARRAY['dead'], 'a dead job: dead');
SELECT matches((SELECT e.detail FROM pgq.explain(pg_temp.jid('dead')) AS e), 'card declined', 'dead names its last error');
SELECT is(pg_temp.why('running'), ARRAY['held'], 'a running job: held');
SELECT ok(
    (SELECT e.detail LIKE '%' || pg_temp.wid('w1') || '%' AND e.until > now() FROM pgq.explain(pg_temp.jid('running')) AS e),
    'held names the worker and when its lease ends'
);
SELECT is(pg_temp.why('waiting'), ARRAY['waiting'], 'a waiting job: waiting');
SELECT is(
    (SELECT e.job_ids FROM pgq.explain(pg_temp.jid('waiting')) AS e), ARRAY[pg_temp.jid('running')],
    'waiting names the dependencies that have not succeeded, not those that have'
);
SELECT is(pg_temp.why('scheduled'), ARRAY['scheduled'], 'a job scheduled later: scheduled');
SELECT is(
    (SELECT e.until FROM pgq.explain(pg_temp.jid('scheduled')) AS e), now() + interval '1 hour', 'scheduled until its run_at'
);
SELECT is(pg_temp.why('first'), '{}'::text[], 'a due job first in line: no reason');
SELECT is(pg_temp.why('second'), ARRAY['behind'], 'a due job behind another: behind');

SELECT pgq.pause('ex');
SELECT is(pg_temp.why('scheduled'), ARRAY['scheduled', 'paused'], 'a scheduled job of a paused entrypoint: both reasons');
SELECT pgq.resume('ex');

-- Limits.
INSERT INTO t_job VALUES ('c1', pgq.enqueue('ex_c'));
INSERT INTO t_job VALUES ('c2', pgq.enqueue('ex_c'));
INSERT INTO t_job VALUES ('k1', pgq.enqueue('ex_k', concurrency_key => 'acme'));
INSERT INTO t_job VALUES ('k2', pgq.enqueue('ex_k', concurrency_key => 'acme'));
INSERT INTO t_job VALUES ('r1', pgq.enqueue('ex_r'));
INSERT INTO t_job VALUES ('r2', pgq.enqueue('ex_r'));
SELECT is(
    (SELECT count(*) FROM pgq.claim(pg_temp.wid('w1'), ARRAY['ex_c', 'ex_k', 'ex_r'], 10)), 3::bigint,
    'one job of each limited entrypoint is claimed'
);
SELECT is(pg_temp.why('c2'), ARRAY['concurrency'], 'a full concurrency limit: concurrency');
SELECT matches((SELECT e.detail FROM pgq.explain(pg_temp.jid('c2')) AS e), '1 of 1 running', 'concurrency counts');
SELECT is(pg_temp.why('k2'), ARRAY['key_concurrency'], 'a key at key_concurrency: key_concurrency');
SELECT ok(
    (SELECT e.reason = 'rate' AND e.until > clock_timestamp() + interval '15 minutes' FROM pgq.explain(pg_temp.jid('r2')) AS e),
    'an empty rate bucket: rate, with the time of the next token (1000 s away at 0.001/s)'
);

INSERT INTO t_job VALUES ('orphan', pgq.enqueue('ex_none'));
SELECT is(pg_temp.why('orphan'), ARRAY['no_worker'], 'no live worker for its entrypoint: no_worker');

-- Bad input.
SELECT throws_ok($$SELECT * FROM pgq.explain(NULL)$$, 'PQ001', NULL, 'job_id NULL raises PQ001');
SELECT throws_ok(
    $$SELECT * FROM pgq.explain((SELECT max(t.id) + 1000 FROM t_job AS t))$$, 'PQ005', NULL,
    'an unknown id raises PQ005'
);

-- Privileges: producers and workers may ask.
SET ROLE pgq_producer;
SELECT is((SELECT count(*) FROM pgq.explain(pg_temp.jid('second'))), 1::bigint, 'pgq_producer can call explain');
RESET ROLE;
SET ROLE pgq_worker;
SELECT is((SELECT count(*) FROM pgq.explain(pg_temp.jid('second'))), 1::bigint, 'pgq_worker can call explain');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
