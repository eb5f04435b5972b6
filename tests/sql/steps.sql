-- pgq.step_result and pgq.record_step: durable steps, fenced per delivery (a stale delivery
-- neither reads nor records); the first record of a name stands; steps outlive a failed
-- attempt and the job's end (pgq.job shows them); pgq.prune removes them with the outcome;
-- bad input raises PQ errors that change nothing; privileges.
BEGIN;
SELECT plan(31);

\ir fixtures/setup.sql

INSERT INTO t_worker VALUES ('w1', pgq.register_worker('w1', ARRAY['st']));
INSERT INTO t_worker VALUES ('w2', pgq.register_worker('w2', ARRAY['st']));
INSERT INTO t_job VALUES ('j', pgq.enqueue('st'));
SELECT is((SELECT count(*) FROM pgq.claim(pg_temp.wid('w1'), ARRAY['st'])), 1::bigint, 'w1 claims the job (delivery 1)');

SELECT is(
    pgq.step_result(pg_temp.wid('w1'), pg_temp.jid('j'), 1, 'charge'), '{"done": false}'::jsonb,
    'a step not recorded yet: done false'
);
SELECT is(
    pgq.record_step(pg_temp.wid('w1'), pg_temp.jid('j'), 1, 'charge', '{"charge_id": "ch_1"}'), TRUE,
    'the holding delivery records a step'
);
SELECT is(
    pgq.step_result(pg_temp.wid('w1'), pg_temp.jid('j'), 1, 'charge'),
    '{"done": true, "result": {"charge_id": "ch_1"}}'::jsonb, 'its result is read back'
);
SELECT is(
    pgq.record_step(pg_temp.wid('w1'), pg_temp.jid('j'), 1, 'charge', '"other"'), FALSE,
    'a second record of the same name is refused'
);
SELECT is(
    pgq.step_result(pg_temp.wid('w1'), pg_temp.jid('j'), 1, 'charge') -> 'result', '{"charge_id": "ch_1"}'::jsonb,
    'the first record stands'
);
SELECT is(pgq.record_step(pg_temp.wid('w1'), pg_temp.jid('j'), 1, 'nothing'), TRUE, 'a NULL result is recorded');
SELECT is(
    pgq.step_result(pg_temp.wid('w1'), pg_temp.jid('j'), 1, 'nothing'), '{"done": true, "result": null}'::jsonb,
    'a NULL result reads as done with result null'
);

-- Fencing: the wrong worker or the wrong delivery neither reads nor records.
SELECT is(pgq.step_result(pg_temp.wid('w2'), pg_temp.jid('j'), 1, 'charge'), NULL, 'another worker reads nothing');
SELECT is(pgq.record_step(pg_temp.wid('w2'), pg_temp.jid('j'), 1, 'ship', '1'), NULL, 'another worker records nothing');
SELECT is(pgq.step_result(pg_temp.wid('w1'), pg_temp.jid('j'), 2, 'charge'), NULL, 'a delivery not yet made reads nothing');

-- The job fails and is claimed again by w2: delivery 1 of w1 is stale.
SELECT is(pgq.fail(pg_temp.wid('w1'), pg_temp.jid('j'), 'boom', retry_in => interval '0'), 'queued', 'the attempt fails');
SELECT is((SELECT c.deliveries FROM pgq.claim(pg_temp.wid('w2'), ARRAY['st']) AS c), 2, 'w2 claims delivery 2');
SELECT is(
    pgq.record_step(pg_temp.wid('w1'), pg_temp.jid('j'), 1, 'ship', '"late"'), NULL,
    'the stale delivery''s record_step returns NULL'
);
SELECT is((SELECT count(*) FROM pgq._steps AS s WHERE s.name = 'ship'), 0::bigint, '... and records nothing');
SELECT is(pgq.step_result(pg_temp.wid('w1'), pg_temp.jid('j'), 1, 'charge'), NULL, 'the stale delivery reads nothing');
SELECT is(
    pgq.step_result(pg_temp.wid('w2'), pg_temp.jid('j'), 2, 'charge') -> 'result', '{"charge_id": "ch_1"}'::jsonb,
    'the new delivery reads the step the first recorded'
);
SELECT is(pgq.record_step(pg_temp.wid('w2'), pg_temp.jid('j'), 2, 'ship', '"parcel"'), TRUE, 'and records its own');

-- The same worker fails it and claims it again (delivery 3): its delivery 2 is stale.
SELECT is(pgq.fail(pg_temp.wid('w2'), pg_temp.jid('j'), 'boom', retry_in => interval '0'), 'queued', 'delivery 2 fails');
SELECT is((SELECT c.deliveries FROM pgq.claim(pg_temp.wid('w2'), ARRAY['st']) AS c), 3, 'w2 claims delivery 3');
SELECT is(
    pgq.record_step(pg_temp.wid('w2'), pg_temp.jid('j'), 2, 'late', '1'), NULL,
    'the same worker''s earlier delivery records nothing'
);
SELECT is(pgq.step_result(pg_temp.wid('w2'), pg_temp.jid('j'), 2, 'charge'), NULL, '... and reads nothing');

-- The job ends: pgq.job shows its steps.
SELECT is((SELECT count(*) FROM pgq.complete(pg_temp.wid('w2'), ARRAY[pg_temp.jid('j')])), 1::bigint, 'the job succeeds');
SELECT is(
    (SELECT jsonb_agg(jsonb_build_array(e ->> 'name', e -> 'result', e -> 'delivery')) FROM jsonb_array_elements(pgq.job(pg_temp.jid('j')) -> 'steps') AS e),
    '[["charge", {"charge_id": "ch_1"}, 1], ["nothing", null, 1], ["ship", "parcel", 2]]'::jsonb,
    'pgq.job lists the finished job''s steps in the order recorded, with their deliveries'
);

-- Bad input: PQ errors, nothing recorded.
SELECT throws_ok($$SELECT pgq.record_step(NULL, 1, 1, 'a')$$, 'PQ001', NULL, 'worker_id NULL raises PQ001');
SELECT throws_ok(
    format('SELECT pgq.record_step(%L, NULL, 1, %L)', pg_temp.wid('w1'), 'a'), 'PQ001', NULL,
    'job_id NULL raises PQ001'
);
SELECT throws_ok(
    format('SELECT pgq.step_result(%L, 1, 0, %L)', pg_temp.wid('w1'), 'a'), 'PQ001', NULL,
    'delivery 0 raises PQ001'
);
SELECT throws_ok(
    format('SELECT pgq.record_step(%L, 1, 1, %L)', pg_temp.wid('w1'), ''), 'PQ001', NULL,
    'an empty name raises PQ001'
);
SELECT throws_ok(
    format('SELECT pgq.record_step(%L, %s, 2, %L, to_jsonb(repeat(%L, 1100000)))', pg_temp.wid('w2'), pg_temp.jid('j'), 'big', 'x'),
    'PQ004', NULL, 'a result over 1 MiB raises PQ004'
);
SELECT is((SELECT count(*) FROM pgq._steps), 3::bigint, 'the bad calls recorded nothing');

-- Privileges: producers may not record steps.
SET ROLE pgq_producer;
SELECT throws_ok(
    format('SELECT pgq.record_step(%L, 1, 1, %L)', pg_temp.wid('w1'), 'a'), '42501', NULL,
    'pgq_producer cannot record steps'
);
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
