-- pgq.trigger_schedule: enqueues the schedule's job now with the headers of a scheduled
-- run plus manual; the schedule's last and next run stay; a second trigger while that job
-- is live returns it; validation (PQ001) changes nothing; privileges.
BEGIN;
SELECT plan(11);

SELECT isnt(pgq.schedule('nightly', '0 3 * * *', 'report', '{"kind": "daily"}'), NULL, 'a schedule');
CREATE TEMP TABLE t_before AS SELECT
    s.last_run,
    s.next_run
FROM pgq.schedules AS s WHERE s.name = 'nightly';
CREATE TEMP TABLE t_job AS SELECT pgq.trigger_schedule('nightly') AS id;

SELECT results_eq(
    $$SELECT j.entrypoint, j.payload, j.status, j.run_at <= now() FROM pgq._jobs AS j
      WHERE j.id = (SELECT t.id FROM t_job AS t)$$,
    $$VALUES ('report'::text, '{"kind": "daily"}'::jsonb, 'queued'::text, TRUE)$$,
    'the schedule''s job is queued and due now'
);
SELECT is(
    (SELECT j.headers FROM pgq._jobs AS j WHERE j.id = (SELECT t.id FROM t_job AS t)),
    jsonb_build_object(
        'schedule', 'nightly', 'manual', TRUE,
        'fire_time', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI"Z"')
    ),
    'its headers name the schedule, the minute, and that it was triggered by hand'
);
SELECT results_eq(
    $$SELECT s.last_run, s.next_run FROM pgq.schedules AS s WHERE s.name = 'nightly'$$,
    $$SELECT b.last_run, b.next_run FROM t_before AS b$$,
    'the schedule''s last and next run stay'
);
SELECT is(pgq.trigger_schedule('nightly'), (SELECT t.id FROM t_job AS t), 'a second trigger returns the live job');
SELECT is((SELECT count(*) FROM pgq._jobs AS j WHERE j.entrypoint = 'report'), 1::bigint, 'one job only');
SELECT is(pgq.run_schedules((SELECT b.next_run FROM t_before AS b)), 1, 'the cron time still fires');

-- Bad input: PQ001 naming the argument, and nothing changes.
SELECT throws_ok(
    $$SELECT pgq.trigger_schedule(NULL)$$, 'PQ001', 'pgq: invalid argument name: must not be NULL',
    'name NULL raises PQ001 naming the argument'
);
SELECT throws_ok(
    $$SELECT pgq.trigger_schedule('weekly')$$, 'PQ001', 'pgq: invalid argument name: no schedule is named ''weekly''',
    'an unknown name raises PQ001'
);

-- Privileges.
SET ROLE pgq_worker;
SELECT throws_ok($$SELECT pgq.trigger_schedule('nightly')$$, '42501', NULL, 'pgq_worker cannot trigger');
RESET ROLE;
SET ROLE pgq_admin;
SELECT isnt(pgq.trigger_schedule('nightly'), NULL, 'pgq_admin can');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
