-- pgq.cancel: queued and waiting jobs at once (outcome 'canceled'), dead ones discarded
-- (outcome 'dead'), running ones by request (heartbeat reports it, fail ends it canceled);
-- jobs waiting for a canceled job are canceled too, through chains, with the reason logged;
-- unknown ids ignored; validation (PQ001); privileges.
BEGIN;
SELECT plan(47);

\ir fixtures/setup.sql

INSERT INTO t_worker VALUES ('w1', pgq.register_worker('w1', ARRAY['x', 'xd']));
INSERT INTO t_job VALUES ('queued', pgq.enqueue('x', '{"n": 1}', priority => -5));
INSERT INTO t_job VALUES ('scheduled', pgq.enqueue('x', run_at => now() + interval '1 day'));
INSERT INTO t_job VALUES ('running', pgq.enqueue('x', priority => 9));
INSERT INTO t_job VALUES ('finishes', pgq.enqueue('x', priority => 8));
INSERT INTO t_job VALUES ('dead', pgq.enqueue('x', priority => 7, max_attempts => 1));
SELECT is(
    (SELECT count(*) FROM pgq.claim(pg_temp.wid('w1'), ARRAY['x'], 3)), 3::bigint, 'w1 claims running, finishes, dead'
);
SELECT is(pgq.fail(pg_temp.wid('w1'), pg_temp.jid('dead'), 'fatal'), 'dead', 'one job goes dead');

-- Queued and scheduled jobs: canceled at once.
SELECT is(
    pgq.cancel(ARRAY[pg_temp.jid('queued'), pg_temp.jid('scheduled')]),
    2,
    'cancel returns the number of jobs canceled'
);
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.id IN (pg_temp.jid('queued'), pg_temp.jid('scheduled'))),
    0::bigint,
    'canceled jobs leave the hot table'
);
SELECT results_eq(
    $$
        SELECT o.outcome, o.entrypoint, o.priority, o.attempt, o.deliveries, o.started_at, o.worker_id
        FROM pgq.outcomes AS o WHERE o.job_id = pg_temp.jid('queued')
    $$,
    $$ VALUES ('canceled', 'x', -5, 0, 0, NULL::timestamptz, NULL::uuid) $$,
    'a canceled outcome is logged'
);
SELECT is(pgq.job_status(pg_temp.jid('scheduled')), 'canceled', 'job_status reports canceled');
SELECT is(pgq.cancel(ARRAY[pg_temp.jid('queued')]), 0, 'canceling a finished job again counts nothing');
SELECT is(
    (SELECT count(*) FROM pgq.outcomes AS o WHERE o.job_id = pg_temp.jid('queued')),
    1::bigint,
    'and logs nothing more'
);

-- Dead jobs: discarded.
SELECT is(pgq.cancel(ARRAY[pg_temp.jid('dead')]), 1, 'a dead job is discarded');
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('dead')),
    0::bigint,
    'the discarded job leaves the hot table'
);
SELECT is(
    (SELECT o.outcome FROM pgq.outcomes AS o WHERE o.job_id = pg_temp.jid('dead') AND o.outcome <> 'failed'),
    'dead',
    'its terminal outcome is dead'
);
SELECT is(pgq.job_status(pg_temp.jid('dead')), 'dead', 'job_status still reports dead');

-- Running jobs: cancellation is requested.
SELECT is(pgq.cancel(ARRAY[pg_temp.jid('running')]), 1, 'a running job counts as marked for cancellation');
SELECT results_eq(
    $$SELECT j.status, j.cancel_requested, j.worker_id FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('running')$$,
    $$SELECT 'running', TRUE, pg_temp.wid('w1')$$,
    'the job keeps running with cancel_requested'
);
SELECT is(pgq.cancel(ARRAY[pg_temp.jid('running')]), 0, 'requesting again counts nothing');
SELECT results_eq(
    format($$SELECT * FROM pgq.heartbeat(%L)$$, pg_temp.wid('w1')),
    $$SELECT pg_temp.jid('running')$$,
    'the worker learns it from its heartbeat'
);
SELECT is(pgq.fail(pg_temp.wid('w1'), pg_temp.jid('running'), 'canceled by handler'), 'canceled', 'then fail returns canceled');
SELECT is(pgq.job_status(pg_temp.jid('running')), 'canceled', 'the job ends canceled');
SELECT results_eq(
    $$SELECT o.outcome, o.attempt, o.worker_id, o.error FROM pgq.outcomes AS o WHERE o.job_id = pg_temp.jid('running')$$,
    $$SELECT 'canceled', 1, pg_temp.wid('w1'), 'canceled by handler'$$,
    'only a canceled outcome is logged (no failed row), with the attempt, the worker and the handler''s error'
);
SELECT is(pgq.cancel(ARRAY[pg_temp.jid('finishes')]), 1, 'cancellation of another running job is requested');
SELECT is(
    (SELECT count(*) FROM pgq.complete(pg_temp.wid('w1'), ARRAY[pg_temp.jid('finishes')])),
    1::bigint,
    'its handler finishes anyway'
);
SELECT is(pgq.job_status(pg_temp.jid('finishes')), 'succeeded', 'that job ends succeeded');

-- Dependencies: canceling a job cancels the jobs waiting for it, and theirs in turn.
INSERT INTO t_job VALUES ('root', pgq.enqueue('xd', run_at => now() + interval '1 day'));
INSERT INTO t_job VALUES ('child', pgq.enqueue('xd', depends_on => ARRAY[pg_temp.jid('root')]));
INSERT INTO t_job VALUES ('grandchild', pgq.enqueue('xd', priority => 3, depends_on => ARRAY[pg_temp.jid('child')]));
INSERT INTO t_job VALUES ('other_root', pgq.enqueue('xd', run_at => now() + interval '1 day'));
INSERT INTO t_job VALUES ('both', pgq.enqueue('xd', depends_on => ARRAY[pg_temp.jid('other_root'), pg_temp.jid('root')]));
INSERT INTO t_job VALUES ('sibling', pgq.enqueue('xd', depends_on => ARRAY[pg_temp.jid('other_root')]));
SELECT results_eq(
    $$
        SELECT pgq.job_status(t.id) FROM t_job AS t
        WHERE t.label IN ('child', 'grandchild', 'both', 'sibling') ORDER BY t.id
    $$,
    ARRAY['waiting', 'waiting', 'waiting', 'waiting'],
    'the dependents are waiting'
);
SELECT ok(pgq.cancel(ARRAY[pg_temp.jid('root')]) >= 1, 'the root of the chain is canceled');
SELECT results_eq(
    $$
        SELECT t.label, pgq.job_status(t.id) FROM t_job AS t
        WHERE t.label IN ('root', 'child', 'grandchild', 'both', 'other_root', 'sibling') ORDER BY t.id
    $$,
    $$
        VALUES ('root', 'canceled'), ('child', 'canceled'), ('grandchild', 'canceled'), ('other_root', 'queued'),
               ('both', 'canceled'), ('sibling', 'waiting')
    $$,
    'the cancellation cascades through the chain and to a job with several dependencies, not to others'
);
SELECT is(
    (
        SELECT count(*) FROM pgq._jobs AS j
        WHERE j.id IN (pg_temp.jid('root'), pg_temp.jid('child'), pg_temp.jid('grandchild'), pg_temp.jid('both'))
    ),
    0::bigint,
    'the canceled chain leaves the hot table'
);
SELECT results_eq(
    $$
        SELECT t.label, o.outcome, o.priority, o.attempt, o.deliveries, o.error
        FROM pgq.outcomes AS o INNER JOIN t_job AS t ON o.job_id = t.id
        WHERE t.label IN ('root', 'child', 'grandchild', 'both') ORDER BY t.id
    $$,
    $$
        VALUES ('root', 'canceled', 0, 0, 0, 'canceled by pgq.cancel'),
               ('child', 'canceled', 0, 0, 0, 'a dependency was canceled'),
               ('grandchild', 'canceled', 3, 0, 0, 'a dependency was canceled'),
               ('both', 'canceled', 0, 0, 0, 'a dependency was canceled')
    $$,
    'one canceled outcome per job of the chain, the dependents'' with the reason'
);

-- A waiting job can be canceled itself; what it waits for is not touched.
SELECT is(pgq.cancel(ARRAY[pg_temp.jid('sibling')]), 1, 'a waiting job is canceled at once');
SELECT results_eq(
    $$
        SELECT o.outcome, o.error, pgq.job_status(pg_temp.jid('other_root'))
        FROM pgq.outcomes AS o WHERE o.job_id = pg_temp.jid('sibling')
    $$,
    $$ VALUES ('canceled', 'canceled by pgq.cancel', 'queued') $$,
    'the waiting job''s outcome is canceled; its dependency is still queued'
);

-- A running dependency whose cancellation was requested: its dependents are canceled when it
-- ends canceled.
INSERT INTO t_job VALUES ('run_parent', pgq.enqueue('xd'));
INSERT INTO t_job VALUES ('run_child', pgq.enqueue('xd', depends_on => ARRAY[pg_temp.jid('run_parent')]));
SELECT is(
    (SELECT c.id FROM pgq.claim(pg_temp.wid('w1'), ARRAY['xd'], 10) AS c),
    pg_temp.jid('run_parent'),
    'w1 claims the running dependency (the other xd jobs are scheduled later or waiting)'
);
SELECT is(pgq.cancel(ARRAY[pg_temp.jid('run_parent')]), 1, 'its cancellation is requested');
SELECT is(pgq.job_status(pg_temp.jid('run_child')), 'waiting', 'its dependent keeps waiting meanwhile');
SELECT is(pgq.fail(pg_temp.wid('w1'), pg_temp.jid('run_parent'), 'stopped'), 'canceled', 'the dependency ends canceled');
SELECT results_eq(
    $$SELECT o.outcome, o.error FROM pgq.outcomes AS o WHERE o.job_id = pg_temp.jid('run_child')$$,
    format($$ VALUES ('canceled', 'dependency %s was canceled') $$, pg_temp.jid('run_parent')),
    'the dependent is canceled, naming the dependency'
);

-- The same when the worker holding it unregisters.
INSERT INTO t_worker VALUES ('w2', pgq.register_worker('w2', ARRAY['xd']));
INSERT INTO t_job VALUES ('lost_parent', pgq.enqueue('xd'));
INSERT INTO t_job VALUES ('lost_child', pgq.enqueue('xd', depends_on => ARRAY[pg_temp.jid('lost_parent')]));
SELECT is(
    (SELECT c.id FROM pgq.claim(pg_temp.wid('w2'), ARRAY['xd'], 10) AS c),
    pg_temp.jid('lost_parent'),
    'w2 claims another dependency'
);
SELECT is(pgq.cancel(ARRAY[pg_temp.jid('lost_parent')]), 1, 'its cancellation is requested');
SELECT is(pgq.unregister_worker(pg_temp.wid('w2')), 1, 'w2 unregisters before stopping it');
SELECT results_eq(
    $$
        SELECT t.label, o.outcome, o.error FROM pgq.outcomes AS o INNER JOIN t_job AS t ON o.job_id = t.id
        WHERE t.label IN ('lost_parent', 'lost_child') ORDER BY t.id
    $$,
    $$
        VALUES ('lost_parent', 'canceled', 'canceled while its worker was lost'),
               ('lost_child', 'canceled', 'a dependency was canceled')
    $$,
    'the dependency ends canceled and its dependent is canceled'
);

-- Unknown ids and empty arrays.
SELECT is(pgq.cancel(ARRAY[-1, 0]::bigint[]), 0, 'unknown ids are ignored');
SELECT is(pgq.cancel('{}'), 0, 'an empty array cancels nothing');

-- Bad input: PQ001, and nothing changes.
INSERT INTO t_job VALUES ('keep', pgq.enqueue('x'));
SELECT throws_ok($$SELECT pgq.cancel(NULL)$$, 'PQ001', NULL, 'job_ids NULL raises PQ001');
SELECT throws_ok(
    format($$SELECT pgq.cancel(ARRAY[%s, NULL])$$, pg_temp.jid('keep')), 'PQ001', NULL,
    'job_ids containing NULL raise PQ001'
);
SELECT throws_ok(
    format(
        $$SELECT pgq.cancel(array_append(ARRAY(SELECT -g::bigint FROM generate_series(1, 10000) AS g), %s))$$,
        pg_temp.jid('keep')
    ),
    'PQ001', NULL,
    '10001 job ids raise PQ001'
);
SELECT is(pgq.job_status(pg_temp.jid('keep')), 'queued', 'the failed calls canceled nothing');

-- Privileges.
SET ROLE pgq_producer;
SELECT throws_ok(
    format($$SELECT pgq.cancel(ARRAY[%s])$$, pg_temp.jid('keep')), '42501', NULL, 'pgq_producer cannot cancel'
);
RESET ROLE;
SET ROLE pgq_worker;
SELECT throws_ok(
    format($$SELECT pgq.cancel(ARRAY[%s])$$, pg_temp.jid('keep')), '42501', NULL, 'pgq_worker cannot cancel'
);
RESET ROLE;
SET ROLE pgq_admin;
SELECT is(pgq.cancel(ARRAY[pg_temp.jid('keep')]), 1, 'pgq_admin can cancel');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
