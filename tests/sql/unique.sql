-- Uniqueness: pgq.enqueue_job's (id, created, replaced), dedupe_scope ('live', 'queued'),
-- dedupe_window (successes in the outcome log), dedupe_mode ('keep', 'replace'), the same
-- options through pgq.enqueue, pgq.enqueue_batch (dedupe_keys) and pgq.enqueue_trigger,
-- and their validation (PQ001, changing nothing). Races are in tests/py/sql/test_unique.py.
BEGIN;
SELECT plan(59);

\ir fixtures/setup.sql

INSERT INTO t_worker VALUES ('w', pgq.register_worker('w', ARRAY['u_run', 'u_queued', 'u_win', 'u_repl_run']));

-- created / kept.
INSERT INTO t_job VALUES ('first', (SELECT e.id FROM pgq.enqueue_job('u_keep', '{"v": 1}', dedupe_key => 'k') AS e));
SELECT results_eq(
    $$ SELECT e.created, e.replaced FROM pgq.enqueue_job('u_keep', '{"v": 0}', dedupe_key => 'other') AS e $$,
    $$ VALUES (TRUE, FALSE) $$,
    'a job with a new key is created'
);
SELECT results_eq(
    $$ SELECT e.id, e.created, e.replaced FROM pgq.enqueue_job('u_keep', '{"v": 2}', dedupe_key => 'k') AS e $$,
    $$ VALUES (pg_temp.jid('first'), FALSE, FALSE) $$,
    'a second enqueue with the key returns the live job, created false'
);
SELECT is(
    (SELECT j.payload FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('first')),
    '{"v": 1}'::jsonb,
    'dedupe_mode keep (the default) leaves the live job as it is'
);
SELECT results_eq(
    $$ SELECT e.created, e.replaced FROM pgq.enqueue_job('u_keep', dedupe_key => NULL) AS e $$,
    $$ VALUES (TRUE, FALSE) $$,
    'a job without a key is always created'
);
SELECT is(
    pgq.enqueue('u_keep', '{"v": 3}', dedupe_key => 'k', dedupe_mode => 'keep'),
    pg_temp.jid('first'),
    'pgq.enqueue with the new arguments still returns the id alone'
);

-- replace.
SELECT results_eq(
    $$
        SELECT e.id, e.created, e.replaced
        FROM pgq.enqueue_job('u_keep', '{"v": 4}', priority => 7, run_at => now() + interval '1 hour',
                             dedupe_key => 'k', headers => '{"h": 1}', max_attempts => 3,
                             concurrency_key => 'c', dedupe_mode => 'replace') AS e
    $$,
    $$ VALUES (pg_temp.jid('first'), FALSE, TRUE) $$,
    'dedupe_mode replace rewrites a queued job and reports replaced'
);
SELECT results_eq(
    $$
        SELECT j.payload, j.priority, j.run_at, j.headers, j.max_attempts, j.concurrency_key, j.status
        FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('first')
    $$,
    $$ VALUES ('{"v": 4}'::jsonb, 7, now() + interval '1 hour', '{"h": 1}'::jsonb, 3, 'c', 'queued') $$,
    'the replaced job has the new payload, priority, run_at, headers, max_attempts and concurrency key'
);
SELECT is(
    (SELECT count(*)::integer FROM pgq._jobs AS j WHERE j.entrypoint = 'u_keep' AND j.dedupe_key = 'k'),
    1,
    'replacing creates no second job'
);
SELECT is(
    (SELECT q.keyed FROM pgq._queues AS q WHERE q.entrypoint = 'u_keep'),
    TRUE,
    'a replacement with a concurrency key marks the entrypoint keyed'
);
SELECT pgq.enqueue('u_keep', '{"v": 5}', dedupe_key => 'k', dedupe_mode => 'replace');
SELECT results_eq(
    $$ SELECT j.payload, j.run_at = now() FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('first') $$,
    $$ VALUES ('{"v": 5}'::jsonb, TRUE) $$,
    'a replacement without run_at makes the job due now'
);

-- replace a waiting job: its dependencies stay.
INSERT INTO t_job VALUES ('dep', pgq.enqueue('u_dep_parent'));
INSERT INTO t_job VALUES ('waiting', pgq.enqueue('u_dep', '{"v": 1}', dedupe_key => 'w', depends_on => ARRAY[pg_temp.jid('dep')]));
SELECT results_eq(
    $$ SELECT e.id, e.replaced FROM pgq.enqueue_job('u_dep', '{"v": 2}', dedupe_key => 'w', dedupe_mode => 'replace') AS e $$,
    $$ VALUES (pg_temp.jid('waiting'), TRUE) $$,
    'dedupe_mode replace rewrites a waiting job'
);
SELECT results_eq(
    $$ SELECT j.status, j.payload, j.depends_on FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('waiting') $$,
    $$ VALUES ('waiting', '{"v": 2}'::jsonb, ARRAY[pg_temp.jid('dep')]) $$,
    'the replaced waiting job still waits for its dependencies'
);

-- A running job: kept under 'live', gives its key up under 'queued'.
INSERT INTO t_job VALUES ('running', pgq.enqueue('u_run', '{"v": 1}', dedupe_key => 'r'));
SELECT is(
    (SELECT c.id FROM pgq.claim(pg_temp.wid('w'), ARRAY['u_run']) AS c), pg_temp.jid('running'), 'the job is claimed'
);
SELECT results_eq(
    $$ SELECT e.id, e.created, e.replaced FROM pgq.enqueue_job('u_run', '{"v": 2}', dedupe_key => 'r', dedupe_mode => 'replace') AS e $$,
    $$ VALUES (pg_temp.jid('running'), FALSE, FALSE) $$,
    'scope live: a running job stands, and replace does not touch it'
);
SELECT is(
    (SELECT j.payload FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('running')),
    '{"v": 1}'::jsonb,
    'the running job keeps its payload'
);
SELECT results_eq(
    $$ SELECT e.id, e.created FROM pgq.enqueue_job('u_run', dedupe_key => 'r', dedupe_scope => 'live') AS e $$,
    $$ VALUES (pg_temp.jid('running'), FALSE) $$,
    'dedupe_scope live named: the running job stands'
);
INSERT INTO t_job VALUES (
    'after_start',
    (SELECT e.id FROM pgq.enqueue_job('u_run', '{"v": 3}', dedupe_key => 'r', dedupe_scope => 'queued') AS e)
);
SELECT isnt(pg_temp.jid('after_start'), pg_temp.jid('running'), 'scope queued: a running job does not stand');
SELECT results_eq(
    $$ SELECT j.id, j.status, j.dedupe_key FROM pgq._jobs AS j WHERE j.entrypoint = 'u_run' ORDER BY j.id $$,
    $$ VALUES (pg_temp.jid('running'), 'running', NULL::text), (pg_temp.jid('after_start'), 'queued', 'r') $$,
    'the running job gave its key up and runs on; the new job holds it'
);
SELECT results_eq(
    $$ SELECT e.id, e.created FROM pgq.enqueue_job('u_run', dedupe_key => 'r', dedupe_scope => 'queued') AS e $$,
    $$ VALUES (pg_temp.jid('after_start'), FALSE) $$,
    'scope queued: the queued job stands'
);
SELECT results_eq(
    $$ SELECT e.id, e.created FROM pgq.enqueue_job('u_dep', dedupe_key => 'w', dedupe_scope => 'queued') AS e $$,
    $$ VALUES (pg_temp.jid('waiting'), FALSE) $$,
    'scope queued: a waiting job stands'
);
SELECT is(
    pgq.complete(pg_temp.wid('w'), ARRAY[pg_temp.jid('running')])::bigint,
    pg_temp.jid('running'),
    'the job that gave its key up completes'
);
SELECT is(
    (SELECT o.dedupe_key FROM pgq._outcomes AS o WHERE o.job_id = pg_temp.jid('running')),
    NULL,
    'its outcome has no key'
);

-- replace + scope queued on a running job: a new job.
INSERT INTO t_job VALUES ('repl_run', pgq.enqueue('u_repl_run', '{"v": 1}', dedupe_key => 'x'));
SELECT is(
    (SELECT c.id FROM pgq.claim(pg_temp.wid('w'), ARRAY['u_repl_run']) AS c), pg_temp.jid('repl_run'), 'claimed'
);
SELECT results_eq(
    $$
        SELECT e.id <> pg_temp.jid('repl_run'), e.created, e.replaced
        FROM pgq.enqueue_job('u_repl_run', '{"v": 2}', dedupe_key => 'x', dedupe_scope => 'queued',
                             dedupe_mode => 'replace') AS e
    $$,
    $$ VALUES (TRUE, TRUE, FALSE) $$,
    'scope queued, mode replace, running holder: a new job is created'
);

-- Dead jobs never stand.
INSERT INTO t_job VALUES ('dead', pgq.enqueue('u_dead', dedupe_key => 'd'));
UPDATE pgq._jobs SET status = 'dead' WHERE id = pg_temp.jid('dead');
SELECT results_eq(
    $$
        SELECT e.id <> pg_temp.jid('dead'), e.created
        FROM pgq.enqueue_job('u_dead', dedupe_key => 'd', dedupe_window => '1 day') AS e
    $$,
    $$ VALUES (TRUE, TRUE) $$,
    'a dead job with the key does not stand'
);

-- Windows.
INSERT INTO t_worker VALUES ('w2', pgq.register_worker('w2', ARRAY['u_win']));
INSERT INTO t_job VALUES ('win', pgq.enqueue('u_win', '{"v": 1}', dedupe_key => 'day'));
SELECT is((SELECT c.id FROM pgq.claim(pg_temp.wid('w2'), ARRAY['u_win']) AS c), pg_temp.jid('win'), 'claimed');
SELECT is(
    pgq.complete(pg_temp.wid('w2'), ARRAY[pg_temp.jid('win')])::bigint, pg_temp.jid('win'), 'completed'
);
SELECT is(
    (SELECT o.dedupe_key FROM pgq._outcomes AS o WHERE o.job_id = pg_temp.jid('win') AND o.outcome = 'succeeded'),
    'day',
    'a succeeded job keeps its dedupe key in the outcome log'
);
SELECT is(pgq.job(pg_temp.jid('win')) ->> 'dedupe_key', 'day', 'pgq.job shows the key of a succeeded job');
SELECT results_eq(
    $$ SELECT e.id, e.created FROM pgq.enqueue_job('u_win', dedupe_key => 'day', dedupe_window => '1 hour') AS e $$,
    $$ VALUES (pg_temp.jid('win'), FALSE) $$,
    'a success within the window stands: its id, created false'
);
SELECT is(
    pgq.enqueue('u_win', dedupe_key => 'day', dedupe_window => '1 hour', dedupe_mode => 'replace'),
    pg_temp.jid('win'),
    'replace does not revive a finished job'
);
SELECT is(
    (SELECT count(*)::integer FROM pgq._jobs AS j WHERE j.entrypoint = 'u_win'),
    0,
    'no job was created'
);
INSERT INTO t_job VALUES ('win_later', pgq.enqueue('u_win', dedupe_key => 'day'));
SELECT isnt(pg_temp.jid('win_later'), pg_temp.jid('win'), 'without a window a finished job does not stand');
SELECT is(
    pgq.enqueue('u_win', '{"v": 9}', dedupe_key => 'day', dedupe_window => '1 hour', dedupe_mode => 'replace'),
    pg_temp.jid('win_later'),
    'a live job stands before a success in the window'
);
SELECT is(
    (SELECT j.payload FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('win_later')),
    '{"v": 9}'::jsonb,
    'and is the one replaced'
);
INSERT INTO pgq._outcomes (
    job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, finished_at, dedupe_key
)
VALUES
(-1, 'u_old', 'succeeded', 0, 0, 1, now() - interval '3 hours', now() - interval '2 hours', 'old'),
(-2, 'u_old', 'canceled', 0, 0, 0, now(), now(), 'canceled'),
(-3, 'u_old', 'succeeded', 0, 0, 1, now(), now(), 'other');
SELECT results_eq(
    $$ SELECT e.created FROM pgq.enqueue_job('u_old', dedupe_key => 'old', dedupe_window => '1 hour') AS e $$,
    $$ VALUES (TRUE) $$,
    'a success before the window does not stand'
);
SELECT is(
    pgq.enqueue('u_old', dedupe_key => 'old', dedupe_window => '3 hours'),
    (SELECT j.id FROM pgq._jobs AS j WHERE j.entrypoint = 'u_old' AND j.dedupe_key = 'old'),
    'a wider window: the live job still stands first'
);
SELECT results_eq(
    $$ SELECT e.created FROM pgq.enqueue_job('u_old', dedupe_key => 'canceled', dedupe_window => '1 hour') AS e $$,
    $$ VALUES (TRUE) $$,
    'a canceled job does not stand'
);
SELECT results_eq(
    $$ SELECT e.id, e.created FROM pgq.enqueue_job('u_old', dedupe_key => 'other', dedupe_window => '1 hour') AS e $$,
    $$ VALUES (-3::bigint, FALSE) $$,
    'a success within the window stands whoever enqueued it'
);
SELECT throws_ok(
    $$ SELECT pgq.enqueue('u_old', dedupe_key => 'other', dedupe_window => '1 hour', depends_on => ARRAY[-5]) $$,
    'PQ001', NULL, 'depends_on is validated even when a success in the window stands'
);
SELECT results_eq(
    $$ SELECT e.created FROM pgq.enqueue_job('u_old2', dedupe_key => 'other', dedupe_window => '1 hour') AS e $$,
    $$ VALUES (TRUE) $$,
    'the window is per entrypoint'
);

-- enqueue_batch with dedupe_keys.
SELECT results_eq(
    $$
        SELECT count(DISTINCT b.id)::integer, count(*)::integer
        FROM pgq.enqueue_batch('u_batch', ARRAY['1', '2', '3', '4']::jsonb[],
                               dedupe_keys => ARRAY['a', NULL, 'a', 'b'], dedupe_mode => 'replace') AS b (id)
    $$,
    $$ VALUES (3, 4) $$,
    'a batch with dedupe_keys: two payloads with one key make one job, one id per payload'
);
SELECT results_eq(
    $$ SELECT j.dedupe_key, j.payload FROM pgq._jobs AS j WHERE j.entrypoint = 'u_batch' ORDER BY j.id $$,
    $$ VALUES ('a', '3'::jsonb), (NULL, '2'::jsonb), ('b', '4'::jsonb) $$,
    'the later payload replaced the earlier; a NULL key is a plain job'
);
SELECT results_eq(
    $$
        SELECT b.id FROM pgq.enqueue_batch('u_batch', ARRAY['5', '6']::jsonb[], dedupe_keys => ARRAY['b', 'a']) AS b (id)
    $$,
    $$
        SELECT j.id FROM pgq._jobs AS j WHERE j.entrypoint = 'u_batch' AND j.dedupe_key = 'b'
        UNION ALL
        SELECT j.id FROM pgq._jobs AS j WHERE j.entrypoint = 'u_batch' AND j.dedupe_key = 'a'
    $$,
    'the ids of standing jobs, in the order of payloads'
);

-- The trigger: one waiting job per row, carrying the row's latest version.
CREATE TABLE pg_temp.docs (id integer PRIMARY KEY, body text);
CREATE TRIGGER docs_index AFTER INSERT OR UPDATE ON pg_temp.docs
FOR EACH ROW EXECUTE FUNCTION pgq.enqueue_trigger('u_index', '0', '', 'id', 'queued', 'replace');
INSERT INTO pg_temp.docs VALUES (1, 'first'), (2, 'other');
UPDATE pg_temp.docs SET body = 'second' WHERE id = 1;
SELECT results_eq(
    $$ SELECT j.dedupe_key, j.payload ->> 'body' FROM pgq._jobs AS j WHERE j.entrypoint = 'u_index' ORDER BY j.id $$,
    $$ VALUES ('1', 'second'), ('2', 'other') $$,
    'trigger with a dedupe key column and replace: one job per row with its latest version'
);
CREATE TABLE pg_temp.pings (id integer PRIMARY KEY);
CREATE TRIGGER pings_win AFTER INSERT ON pg_temp.pings
FOR EACH ROW EXECUTE FUNCTION pgq.enqueue_trigger('u_ping', '0', '', 'nope');
SELECT throws_ok(
    $$ INSERT INTO pg_temp.pings VALUES (1) $$, 'PQ001', NULL, 'a dedupe key column the table lacks raises PQ001'
);
CREATE TABLE pg_temp.pongs (id integer PRIMARY KEY);
CREATE TRIGGER pongs_win AFTER INSERT ON pg_temp.pongs
FOR EACH ROW EXECUTE FUNCTION pgq.enqueue_trigger('u_pong', '0', '', 'id', '', '', 'soon');
SELECT throws_ok(
    $$ INSERT INTO pg_temp.pongs VALUES (1) $$, 'PQ001', NULL, 'a trigger window that is not an interval raises PQ001'
);

-- Validation: PQ001 naming the argument, and nothing changes.
CREATE TEMP TABLE t_before AS SELECT count(*) AS n FROM pgq._jobs;
SELECT throws_ok(
    $$ SELECT pgq.enqueue('u_bad', dedupe_key => 'k', dedupe_scope => 'started') $$,
    'PQ001', 'pgq: invalid argument dedupe_scope: ''started'' is not a scope', 'an unknown scope raises PQ001'
);
SELECT throws_ok(
    $$ SELECT pgq.enqueue_job('u_bad', dedupe_key => 'k', dedupe_mode => 'upsert') $$,
    'PQ001', 'pgq: invalid argument dedupe_mode: ''upsert'' is not a mode', 'an unknown mode raises PQ001'
);
SELECT throws_ok(
    $$ SELECT pgq.enqueue('u_bad', dedupe_key => 'k', dedupe_window => '0') $$,
    'PQ001', NULL, 'a zero window raises PQ001'
);
SELECT throws_ok(
    $$ SELECT pgq.enqueue('u_bad', dedupe_key => 'k', dedupe_window => '-1 hour') $$,
    'PQ001', NULL, 'a negative window raises PQ001'
);
SELECT throws_ok(
    $$ SELECT pgq.enqueue('u_bad', dedupe_key => 'k', dedupe_window => '11 years') $$,
    'PQ001', 'pgq: invalid argument dedupe_window: 11 years is out of range', 'a window over 10 years raises PQ001'
);
SELECT throws_ok(
    $$ SELECT pgq.enqueue('u_bad', dedupe_key => 'k', dedupe_window => '1 hour', dedupe_scope => 'queued') $$,
    'PQ001', 'pgq: invalid argument dedupe_window: cannot be combined with dedupe_scope ''queued''',
    'a window with scope queued raises PQ001'
);
SELECT throws_ok(
    $$ SELECT pgq.enqueue('u_bad', dedupe_scope => 'live') $$,
    'PQ001', 'pgq: invalid argument dedupe_scope: needs a dedupe_key', 'a scope without a key raises PQ001'
);
SELECT throws_ok(
    $$ SELECT pgq.enqueue('u_bad', dedupe_window => '1 hour') $$,
    'PQ001', 'pgq: invalid argument dedupe_window: needs a dedupe_key', 'a window without a key raises PQ001'
);
SELECT throws_ok(
    $$ SELECT pgq.enqueue_batch('u_bad', ARRAY['1']::jsonb[], dedupe_mode => 'replace') $$,
    'PQ001', 'pgq: invalid argument dedupe_mode: needs a dedupe_keys', 'a batch mode without dedupe_keys raises PQ001'
);
SELECT throws_ok(
    $$ SELECT pgq.enqueue_batch('u_bad', ARRAY['1', '2']::jsonb[], dedupe_keys => ARRAY['a']) $$,
    'PQ001', 'pgq: invalid argument dedupe_keys: must have one element per payload', 'dedupe_keys of another length raises PQ001'
);
SELECT throws_ok(
    $$ SELECT pgq.enqueue_batch('u_bad', ARRAY['1', '2']::jsonb[], dedupe_keys => ARRAY['a', '']) $$,
    'PQ001', 'pgq: invalid argument dedupe_keys[2]: must be 1 to 1000 bytes long', 'an empty dedupe key in a batch raises PQ001'
);
SELECT is((SELECT count(*) FROM pgq._jobs), (SELECT t.n FROM t_before AS t), 'the failed calls changed nothing');

SELECT * FROM finish();
ROLLBACK;
