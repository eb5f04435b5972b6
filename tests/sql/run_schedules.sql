-- pgq.run_schedules(now): enqueues each schedule due at `now` once per minute (a second call
-- for the same minute does nothing; missed runs fire once, for the earliest missed time);
-- the job's payload, dedupe_key and headers (fire time in UTC); a Feb 29 schedule; last_run
-- and next_run in pgq.schedules; NULL now is the current time; infinity raises PQ001;
-- privileges.
BEGIN;
SELECT plan(39);

-- Fire times are UTC: a session time zone with a half-hour offset must change nothing.
SET LOCAL timezone = 'America/St_Johns';

-- Times on a fixed day far ahead (the schedules first catch up to it), in UTC.
CREATE FUNCTION pg_temp.at(hh_mi_ss text) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$ SELECT ('2099-01-01 ' || hh_mi_ss || '+00')::timestamptz $$;
-- The jobs enqueued for a schedule, oldest first.
CREATE FUNCTION pg_temp.fired(schedule text) RETURNS TABLE (entrypoint text, payload jsonb, dedupe_key text, headers jsonb)
LANGUAGE sql STABLE AS $$
    SELECT j.entrypoint, j.payload, j.dedupe_key, j.headers
    FROM pgq._jobs AS j WHERE j.headers ->> 'schedule' = schedule ORDER BY j.id
$$;

SELECT is(pgq.run_schedules(pg_temp.at('00:00:00')), 0, 'with no schedule, nothing fires');

-- A schedule that can only fire on Feb 29 (00:00 UTC).
SELECT isnt(pgq.schedule('leap', '0 0 29 2 *', 'rs_leap', '{"leap": true}'), NULL, 'a 0 0 29 2 * schedule is created');
CREATE TEMP TABLE t_leap AS SELECT s.next_run AS at FROM pgq._schedules AS s WHERE s.name = 'leap';
SELECT is(
    (SELECT to_char(l.at AT TIME ZONE 'UTC', 'MM-DD HH24:MI') FROM t_leap AS l),
    '02-29 00:00',
    'it is due on a Feb 29 at midnight UTC'
);
SELECT is(
    pgq.run_schedules((SELECT l.at - interval '1 minute' FROM t_leap AS l)), 0, 'a minute before, nothing fires'
);
SELECT is(
    pgq.run_schedules((SELECT l.at + interval '30 seconds' FROM t_leap AS l)), 1, 'on Feb 29 at 00:00 it fires once'
);
SELECT results_eq(
    $$SELECT f.entrypoint, f.payload, f.headers ->> 'fire_time' FROM pg_temp.fired('leap') AS f$$,
    $$SELECT 'rs_leap', '{"leap": true}'::jsonb, to_char(l.at AT TIME ZONE 'UTC', 'YYYY-"02-29T00:00Z"') FROM t_leap AS l$$,
    'the job goes to the schedule''s entrypoint with its payload, for Feb 29 00:00 UTC'
);
SELECT results_eq(
    $$SELECT s.last_run, s.next_run FROM pgq.schedules AS s WHERE s.name = 'leap'$$,
    $$SELECT l.at, (l.at AT TIME ZONE 'UTC' + interval '4 years') AT TIME ZONE 'UTC' FROM t_leap AS l$$,
    'pgq.schedules: last run that Feb 29, next run on the Feb 29 four years later'
);
SELECT is(
    pgq.run_schedules((SELECT l.at + interval '1 year' FROM t_leap AS l)), 0,
    'a year later (no Feb 29 in between) nothing fires'
);
SELECT is(pgq.unschedule('leap'), TRUE, 'the leap-day schedule is removed');

-- Every minute and every hour, first due within a minute or an hour of now.
SELECT isnt(pgq.schedule('every', '* * * * *', 'rs', '{"n": 1}'), NULL, 'schedule every: each minute');
SELECT isnt(pgq.schedule('hourly', '0 * * * *', 'rs'), NULL, 'schedule hourly: each hour');
CREATE TEMP TABLE t_first AS
SELECT
    s.name,
    s.next_run
FROM pgq._schedules AS s;
SELECT is(pgq.run_schedules(now() - interval '1 minute'), 0, 'nothing is due before the first next run');

-- Catching up from now to 2099: however many runs were missed, each schedule fires once,
-- for its earliest missed time.
SELECT is(pgq.run_schedules(pg_temp.at('00:00:30')), 2, 'after years without a sweep, each schedule fires once');
SELECT results_eq(
    $$
        SELECT f.headers ->> 'fire_time'
        FROM pg_temp.fired('every') AS f
    $$,
    $$
        SELECT to_char(t.next_run AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI"Z"')
        FROM t_first AS t WHERE t.name = 'every'
    $$,
    'the catch-up job is for the earliest missed minute'
);
SELECT results_eq(
    $$SELECT s.name, s.last_run, s.next_run FROM pgq.schedules AS s ORDER BY s.name$$,
    $$
        SELECT 'every', (SELECT t.next_run FROM t_first AS t WHERE t.name = 'every'), pg_temp.at('00:01:00')
        UNION ALL
        SELECT 'hourly', (SELECT t.next_run FROM t_first AS t WHERE t.name = 'hourly'), pg_temp.at('01:00:00')
    $$,
    'pgq.schedules: last run is the time fired for, next run the first one after now'
);

-- Once per schedule and minute.
SELECT is(pgq.run_schedules(pg_temp.at('00:00:59')), 0, 'a second call within the same minute does nothing');
SELECT is(pgq.run_schedules(pg_temp.at('00:00:30')), 0, 'a call with the very same now does nothing');
SELECT is(pgq.run_schedules(pg_temp.at('00:01:00')), 1, 'the next minute, every fires');
SELECT is(pgq.run_schedules(pg_temp.at('00:01:00')), 0, 'calling again for that minute does nothing');
SELECT is(pgq.run_schedules(pg_temp.at('00:01:59.999')), 0, 'nor at the end of that minute');
SELECT is(pgq.run_schedules(pg_temp.at('00:00:00')), 0, 'nor with an earlier now');
SELECT results_eq(
    $$SELECT f.entrypoint, f.payload, f.dedupe_key, f.headers FROM pg_temp.fired('every') AS f OFFSET 1$$,
    $$
        VALUES ('rs', '{"n": 1}'::jsonb, 'schedule:every:2099-01-01T00:01Z',
                '{"schedule": "every", "fire_time": "2099-01-01T00:01Z"}'::jsonb)
    $$,
    'the job: the schedule''s entrypoint and payload, dedupe_key schedule:<name>:<fire time>, headers name both'
);

-- A missed hour: every fires once (for its earliest missed minute), hourly once.
SELECT is(pgq.run_schedules(pg_temp.at('01:02:10')), 2, 'after a missed hour, each due schedule fires once');
SELECT results_eq(
    $$SELECT f.headers ->> 'fire_time' FROM pg_temp.fired('every') AS f OFFSET 2$$,
    ARRAY['2099-01-01T00:02Z'],
    'every fires once, for 00:02, not once per missed minute'
);
SELECT results_eq(
    $$SELECT f.dedupe_key FROM pg_temp.fired('hourly') AS f OFFSET 1$$,
    ARRAY['schedule:hourly:2099-01-01T01:00Z'],
    'hourly fires for 01:00'
);
SELECT results_eq(
    $$SELECT s.name, s.last_run, s.next_run FROM pgq.schedules AS s ORDER BY s.name$$,
    $$
        VALUES ('every', pg_temp.at('00:02:00'), pg_temp.at('01:03:00')),
               ('hourly', pg_temp.at('01:00:00'), pg_temp.at('02:00:00'))
    $$,
    'pgq.schedules: last run and next run after the missed hour'
);
SELECT is(pgq.run_schedules(pg_temp.at('01:02:50')), 0, 'the missed hour is not fired again');
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.entrypoint = 'rs'),
    5::bigint,
    'five jobs in all: three of every, two of hourly'
);

-- A schedule moved back to a minute it already fired for is deduplicated while the job lives.
UPDATE pgq._schedules SET next_run = pg_temp.at('00:02:00') WHERE name = 'every';
SELECT is(pgq.run_schedules(pg_temp.at('00:02:30')), 1, 'the rewound schedule is due again');
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.dedupe_key = 'schedule:every:2099-01-01T00:02Z'),
    1::bigint,
    'but the live job for that minute is not duplicated'
);

-- now => NULL (the default) is the current time.
SELECT isnt(pgq.schedule('due', '* * * * *', 'rs_now'), NULL, 'schedule due: each minute');
UPDATE pgq._schedules SET next_run = date_trunc('minute', now()) - interval '1 minute' WHERE name = 'due';
SELECT is(pgq.run_schedules(NULL), 1, 'now => NULL: the schedule due a minute ago fires');
SELECT is(pgq.run_schedules(), 0, 'called again without now: nothing more');
SELECT results_eq(
    $$SELECT s.next_run FROM pgq.schedules AS s WHERE s.name = 'due'$$,
    $$SELECT date_trunc('minute', now()) + interval '1 minute'$$,
    'its next run is the minute after the current time'
);

-- Bad input.
SELECT throws_ok(
    $$SELECT pgq.run_schedules('infinity')$$, 'PQ001', 'pgq: invalid argument now: infinity is out of range',
    'now => infinity raises PQ001 naming the argument'
);
SELECT throws_ok($$SELECT pgq.run_schedules('-infinity')$$, 'PQ001', NULL, 'now => -infinity raises PQ001');

-- Privileges.
SET ROLE pgq_producer;
SELECT throws_ok($$SELECT pgq.run_schedules()$$, '42501', NULL, 'pgq_producer cannot run the schedules');
RESET ROLE;
SET ROLE pgq_worker;
SELECT throws_ok($$SELECT pgq.run_schedules()$$, '42501', NULL, 'pgq_worker cannot call run_schedules (heartbeat does)');
RESET ROLE;
SET ROLE pgq_admin;
SELECT is(pgq.run_schedules(pg_temp.at('01:03:00')), 2, 'pgq_admin can run the schedules (every and due fire)');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
