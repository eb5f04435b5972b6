-- pgq.unschedule: removes a periodic job and returns whether it existed; the jobs it
-- already enqueued stay; validation (PQ001); privileges.
BEGIN;
SELECT plan(17);

SELECT isnt(pgq.schedule('keep', '* * * * *', 'us'), NULL, 'schedule keep exists');
SELECT isnt(pgq.schedule('drop', '* * * * *', 'us', '{"from": "drop"}'), NULL, 'schedule drop exists');

-- The schedule fires once before it is removed.
CREATE TEMP TABLE t_fire AS
SELECT s.next_run AS at FROM pgq._schedules AS s WHERE s.name = 'drop';
SELECT is(
    pgq.run_schedules((SELECT f.at FROM t_fire AS f)),
    2,
    'both schedules fire at their next run'
);

SELECT is(pgq.unschedule('drop'), TRUE, 'unschedule returns true for an existing schedule');
SELECT results_eq(
    $$SELECT s.name FROM pgq.schedules AS s$$,
    ARRAY['keep'],
    'the schedule is gone from pgq.schedules; the other one stays'
);
SELECT is(pgq.unschedule('drop'), FALSE, 'unscheduling it again returns false');
SELECT is(pgq.unschedule('never-existed'), FALSE, 'an unknown name returns false');
SELECT is(pgq.unschedule(''), FALSE, 'an empty name matches nothing: false');
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.payload = '{"from": "drop"}'),
    1::bigint,
    'the job the schedule already enqueued is not touched'
);
SELECT is(
    pgq.run_schedules((SELECT f.at + interval '1 minute' FROM t_fire AS f)),
    1,
    'a minute later only the remaining schedule fires'
);
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.payload = '{"from": "drop"}'),
    1::bigint,
    'the removed schedule enqueued nothing more'
);

-- The name can be used again: a new schedule, without the old one's last run.
SELECT isnt(pgq.schedule('drop', '@hourly', 'us'), NULL, 'a schedule of the same name is created again');
SELECT results_eq(
    $$SELECT s.cron, s.last_run FROM pgq.schedules AS s WHERE s.name = 'drop'$$,
    $$ VALUES ('@hourly', NULL::timestamptz) $$,
    'the new schedule has no last run'
);

-- Bad input.
SELECT throws_ok(
    $$SELECT pgq.unschedule(NULL)$$, 'PQ001', 'pgq: invalid argument name: must not be NULL',
    'name NULL raises PQ001 naming the argument'
);

-- Privileges.
SET ROLE pgq_producer;
SELECT throws_ok($$SELECT pgq.unschedule('keep')$$, '42501', NULL, 'pgq_producer cannot unschedule');
RESET ROLE;
SET ROLE pgq_worker;
SELECT throws_ok($$SELECT pgq.unschedule('keep')$$, '42501', NULL, 'pgq_worker cannot unschedule');
RESET ROLE;
SET ROLE pgq_admin;
SELECT is(pgq.unschedule('keep'), TRUE, 'pgq_admin can unschedule');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
