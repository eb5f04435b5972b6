-- pgq.cancel: queued jobs at once (outcome 'canceled'), dead ones discarded (outcome
-- 'dead'), running ones by request (heartbeat reports it, fail ends it canceled); unknown
-- ids ignored; validation (PQ001); privileges.
BEGIN;
SELECT plan(31);

CREATE TEMP TABLE t_job (label text PRIMARY KEY, id bigint NOT NULL);
CREATE TEMP TABLE t_worker (label text PRIMARY KEY, id uuid NOT NULL);
GRANT SELECT ON t_job, t_worker TO public;
CREATE FUNCTION pg_temp.jid(label text) RETURNS bigint
LANGUAGE sql STABLE AS $$ SELECT t.id FROM pg_temp.t_job AS t WHERE t.label = $1 $$;
CREATE FUNCTION pg_temp.wid(label text) RETURNS uuid
LANGUAGE sql STABLE AS $$ SELECT t.id FROM pg_temp.t_worker AS t WHERE t.label = $1 $$;

INSERT INTO t_worker VALUES ('w1', pgq.register_worker('w1', ARRAY['x']));
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
    $$SELECT o.outcome FROM pgq.outcomes AS o WHERE o.job_id = pg_temp.jid('running') ORDER BY o.outcome DESC$$,
    ARRAY['failed', 'canceled'],
    'a failed outcome for the attempt and a canceled outcome are logged'
);
SELECT is(pgq.cancel(ARRAY[pg_temp.jid('finishes')]), 1, 'cancellation of another running job is requested');
SELECT is(
    (SELECT count(*) FROM pgq.complete(pg_temp.wid('w1'), ARRAY[pg_temp.jid('finishes')])),
    1::bigint,
    'its handler finishes anyway'
);
SELECT is(pgq.job_status(pg_temp.jid('finishes')), 'succeeded', 'that job ends succeeded');

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
