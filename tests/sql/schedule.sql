-- pgq.schedule: create a periodic job (returns its next run, in UTC whatever the session
-- time zone), replace it (keeps last_run), validation (PQ001 for name and entrypoint, PQ004
-- for the payload, PQ006 naming the cron field), privileges.
BEGIN;
SELECT plan(53);

-- Cron is UTC: a session time zone half an hour off the hour must change nothing.
SET LOCAL timezone = 'Asia/Kolkata';

-- The next minute, hour and day in UTC, computed without the cron code.
CREATE FUNCTION pg_temp.next_utc(unit text) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT (date_trunc(unit, now() AT TIME ZONE 'UTC') + ('1 ' || unit)::interval) AT TIME ZONE 'UTC'
$$;
-- The next multiple of 5 minutes in UTC.
CREATE FUNCTION pg_temp.next_five() RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT (
        date_trunc('hour', now() AT TIME ZONE 'UTC')
        + make_interval(mins => (floor(date_part('minute', now() AT TIME ZONE 'UTC') / 5)::integer + 1) * 5)
    ) AT TIME ZONE 'UTC'
$$;
-- The next Feb 29, 00:00 UTC.
CREATE FUNCTION pg_temp.next_leap_day() RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT min((make_date(y.y, 3, 1) - 1)::timestamp AT TIME ZONE 'UTC')
    FROM generate_series(
        date_part('year', now() AT TIME ZONE 'UTC')::integer, date_part('year', now() AT TIME ZONE 'UTC')::integer + 8
    ) AS y (y)
    WHERE date_part('day', make_date(y.y, 3, 1) - 1) = 29
      AND (make_date(y.y, 3, 1) - 1)::timestamp AT TIME ZONE 'UTC' > now()
$$;

-- Create.
SELECT is(
    pgq.schedule('every-minute', '* * * * *', 'sched', '{"k": 1}'),
    pg_temp.next_utc('minute'),
    'schedule returns the next run: for * * * * *, the next minute'
);
SELECT results_eq(
    $$
        SELECT s.name, s.cron, s.entrypoint, s.payload, s.last_run, s.next_run, s.created_at
        FROM pgq.schedules AS s WHERE s.name = 'every-minute'
    $$,
    $$
        SELECT 'every-minute', '* * * * *', 'sched', '{"k": 1}'::jsonb, NULL::timestamptz,
               pg_temp.next_utc('minute'), now()
    $$,
    'the schedule is stored with its cron, entrypoint and payload, no last run, and its next run'
);
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.entrypoint = 'sched'),
    0::bigint,
    'scheduling enqueues nothing by itself'
);
SELECT is(
    pgq.schedule('hourly', '0 * * * *', 'sched'),
    pg_temp.next_utc('hour'),
    '0 * * * * next runs at the next full hour in UTC, not in the session time zone (+05:30)'
);
SELECT is(
    (SELECT s.payload FROM pgq.schedules AS s WHERE s.name = 'hourly'),
    NULL,
    'payload defaults to NULL'
);
SELECT is(
    pgq.schedule('macro', ' @Daily ', 'sched'),
    pg_temp.next_utc('day'),
    'a macro, case-insensitive and with spaces around: @daily next runs at the next midnight UTC'
);
SELECT is(
    (SELECT s.cron FROM pgq.schedules AS s WHERE s.name = 'macro'),
    '@Daily',
    'the cron text is stored trimmed'
);
SELECT is(
    pgq.schedule('leap', '0 0 29 2 *', 'sched'),
    pg_temp.next_leap_day(),
    '0 0 29 2 * next runs on the next Feb 29, 00:00 UTC'
);
SELECT is(
    pgq.schedule('named', '30 2 * jan-mar mon-fri', 'sched'),
    pgq._cron_next('30 2 * jan-mar mon-fri', now()),
    'month and day names are accepted'
);
SELECT lives_ok(
    format($$SELECT pgq.schedule(%L, '@hourly', %L)$$, repeat('n', 200), repeat('e', 200)),
    'a name and an entrypoint of 200 characters are accepted'
);
SELECT lives_ok(
    $$SELECT pgq.schedule('nightly report (EU)', '@hourly', 'sched')$$,
    'a name with spaces and punctuation inside is accepted'
);

-- Replace: same name, new cron, entrypoint and payload; the last run is kept.
UPDATE pgq._schedules SET last_run = '2020-01-01 00:00+00' WHERE name = 'every-minute';
SELECT is(
    pgq.schedule('every-minute', '*/5 * * * *', 'sched2', '{"k": 2}'),
    pg_temp.next_five(),
    'replacing returns the new next run'
);
SELECT results_eq(
    $$
        SELECT s.cron, s.entrypoint, s.payload, s.last_run, s.next_run
        FROM pgq.schedules AS s WHERE s.name = 'every-minute'
    $$,
    $$ SELECT '*/5 * * * *', 'sched2', '{"k": 2}'::jsonb, '2020-01-01 00:00+00'::timestamptz, pg_temp.next_five() $$,
    'replacing changes cron, entrypoint, payload and next run, and keeps the last run'
);
SELECT is(
    (SELECT count(*) FROM pgq._schedules AS s WHERE s.name = 'every-minute'),
    1::bigint,
    'replacing does not duplicate the schedule'
);
SELECT is(
    pgq.schedule('every-minute', '*/5 * * * *', 'sched2'),
    pg_temp.next_five(),
    'replacing without a payload'
);
SELECT is(
    (SELECT s.payload FROM pgq.schedules AS s WHERE s.name = 'every-minute'),
    NULL,
    'a replacement without a payload clears it'
);

-- Bad input: PQ001 (name, entrypoint), PQ004 (payload), PQ006 (cron); nothing changes.
CREATE TEMP TABLE t_before AS
SELECT string_agg(s::text, ';' ORDER BY s.name) AS r FROM pgq._schedules AS s;

SELECT throws_ok($$SELECT pgq.schedule(NULL, '* * * * *', 'sched')$$, 'PQ001', NULL, 'name NULL raises PQ001');
SELECT throws_ok($$SELECT pgq.schedule('', '* * * * *', 'sched')$$, 'PQ001', NULL, 'an empty name raises PQ001');
SELECT throws_ok($$SELECT pgq.schedule('   ', '* * * * *', 'sched')$$, 'PQ001', NULL, 'a blank name raises PQ001');
SELECT throws_ok(
    format($$SELECT pgq.schedule(%L, '* * * * *', 'sched')$$, repeat('n', 201)), 'PQ001', NULL,
    'a name of 201 characters raises PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.schedule(E'every\nminute', '* * * * *', 'sched')$$, 'PQ001',
    'pgq: invalid argument name: must be 1 to 200 printable characters',
    'a name with a control character raises PQ001 naming the argument'
);
SELECT throws_ok(
    $$SELECT pgq.schedule('every-minute', '* * * * *', NULL)$$, 'PQ001',
    'pgq: invalid argument entrypoint: must not be NULL or empty',
    'entrypoint NULL raises PQ001 naming the argument'
);
SELECT throws_ok(
    $$SELECT pgq.schedule('every-minute', '* * * * *', '')$$, 'PQ001', NULL, 'an empty entrypoint raises PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.schedule('every-minute', '* * * * *', ' sched')$$, 'PQ001', NULL,
    'an entrypoint with a leading space raises PQ001'
);
SELECT throws_ok(
    $$SELECT pgq.schedule('every-minute', '* * * * *', E'sc\thed')$$, 'PQ001', NULL,
    'an entrypoint with a control character raises PQ001'
);
SELECT throws_ok(
    format($$SELECT pgq.schedule('every-minute', '* * * * *', %L)$$, repeat('e', 201)), 'PQ001', NULL,
    'an entrypoint of 201 characters raises PQ001'
);
SELECT throws_ok(
    $$
        SELECT pgq.schedule(
            'every-minute', '* * * * *', 'sched',
            jsonb_build_object('x', (SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 60000)))
        )
    $$,
    'PQ004', NULL,
    'a payload over 1 MiB raises PQ004'
);
SELECT throws_ok(
    $$SELECT pgq.schedule('every-minute', NULL, 'sched')$$, 'PQ006',
    'pgq: invalid cron expression: must not be NULL',
    'cron NULL raises PQ006'
);
SELECT throws_ok(
    $$SELECT pgq.schedule('every-minute', '', 'sched')$$, 'PQ006',
    'pgq: invalid cron expression: "" has 0 fields, expected 5',
    'an empty cron raises PQ006'
);
SELECT throws_ok(
    $$SELECT pgq.schedule('every-minute', '* * * *', 'sched')$$, 'PQ006',
    'pgq: invalid cron expression: "* * * *" has 4 fields, expected 5',
    'a cron of 4 fields raises PQ006'
);
SELECT throws_ok(
    $$SELECT pgq.schedule('every-minute', '0 * * * * *', 'sched')$$, 'PQ006',
    'pgq: invalid cron expression: "0 * * * * *" has 6 fields, expected 5',
    'a cron of 6 fields (seconds) raises PQ006'
);
SELECT throws_ok(
    $$SELECT pgq.schedule('every-minute', '@often', 'sched')$$, 'PQ006',
    'pgq: invalid cron expression: unknown macro "@often"',
    'an unknown macro raises PQ006'
);
SELECT throws_ok(
    $$SELECT pgq.schedule('every-minute', '60 * * * *', 'sched')$$, 'PQ006',
    'pgq: invalid cron expression: minute field "60": 60 is out of range 0-59',
    'minute 60 raises PQ006 naming the minute field'
);
SELECT throws_ok(
    $$SELECT pgq.schedule('every-minute', '0 24 * * *', 'sched')$$, 'PQ006',
    'pgq: invalid cron expression: hour field "24": 24 is out of range 0-23',
    'hour 24 raises PQ006 naming the hour field'
);
SELECT throws_ok(
    $$SELECT pgq.schedule('every-minute', '0 0 0 * *', 'sched')$$, 'PQ006',
    'pgq: invalid cron expression: day-of-month field "0": 0 is out of range 1-31',
    'day-of-month 0 raises PQ006 naming the day-of-month field'
);
SELECT throws_ok(
    $$SELECT pgq.schedule('every-minute', '0 0 1 13 *', 'sched')$$, 'PQ006',
    'pgq: invalid cron expression: month field "13": 13 is out of range 1-12',
    'month 13 raises PQ006 naming the month field'
);
SELECT throws_ok(
    $$SELECT pgq.schedule('every-minute', '0 0 * * 8', 'sched')$$, 'PQ006',
    'pgq: invalid cron expression: day-of-week field "8": 8 is out of range 0-7',
    'day-of-week 8 raises PQ006 naming the day-of-week field'
);
SELECT throws_ok(
    $$SELECT pgq.schedule('every-minute', '*/0 * * * *', 'sched')$$, 'PQ006',
    'pgq: invalid cron expression: minute field "*/0": step 0 is out of range 1-60',
    'a step of 0 raises PQ006'
);
SELECT throws_ok(
    $$SELECT pgq.schedule('every-minute', '0 0 * foo *', 'sched')$$, 'PQ006', NULL,
    'an unknown month name raises PQ006'
);
SELECT throws_ok(
    $$SELECT pgq.schedule('every-minute', '0 5-1 * * *', 'sched')$$, 'PQ006', NULL,
    'a reversed range raises PQ006'
);
SELECT throws_ok(
    $$SELECT pgq.schedule('every-minute', 'a b c d e', 'sched')$$, 'PQ006', NULL,
    'garbage raises PQ006'
);
SELECT throws_ok(
    $$SELECT pgq.schedule(NULL, '60 * * * *', NULL)$$, 'PQ001', NULL,
    'with several bad arguments, the name is reported first'
);
SELECT is(
    (SELECT string_agg(s::text, ';' ORDER BY s.name) FROM pgq._schedules AS s),
    (SELECT b.r FROM t_before AS b),
    'the failed calls changed no schedule'
);

-- A cron expression that can never match would be a schedule that never fires.
SELECT throws_ok(
    $$SELECT pgq.schedule('never', '0 0 31 2 *', 'sched')$$, 'PQ006',
    'pgq: invalid cron expression: 0 0 31 2 * matches no date',
    'a cron that can never match (0 0 31 2 *) raises PQ006'
);
SELECT is(
    (SELECT count(*) FROM pgq._schedules AS s WHERE s.name = 'never'), 0::bigint, 'and stores no schedule'
);

-- Privileges.
SET ROLE pgq_producer;
SELECT throws_ok(
    $$SELECT pgq.schedule('by-producer', '@hourly', 'sched')$$, '42501', NULL, 'pgq_producer cannot schedule'
);
SELECT throws_ok($$SELECT * FROM pgq.schedules$$, '42501', NULL, 'pgq_producer cannot read pgq.schedules');
RESET ROLE;
SET ROLE pgq_worker;
SELECT throws_ok(
    $$SELECT pgq.schedule('by-worker', '@hourly', 'sched')$$, '42501', NULL, 'pgq_worker cannot schedule'
);
SELECT throws_ok($$SELECT * FROM pgq.schedules$$, '42501', NULL, 'pgq_worker cannot read pgq.schedules');
SELECT throws_ok($$SELECT * FROM pgq._schedules$$, '42501', NULL, 'pgq_worker cannot read pgq._schedules');
RESET ROLE;
SET ROLE pgq_admin;
SELECT is(
    pgq.schedule('by-admin', '@hourly', 'sched'), pg_temp.next_utc('hour'), 'pgq_admin can schedule'
);
SELECT results_eq(
    $$SELECT s.cron, s.entrypoint FROM pgq.schedules AS s WHERE s.name = 'by-admin'$$,
    $$ VALUES ('@hourly', 'sched') $$,
    'pgq_admin reads it in pgq.schedules'
);
SELECT throws_ok(
    $$INSERT INTO pgq._schedules (name, cron, entrypoint) VALUES ('direct', '@hourly', 'sched')$$, '42501', NULL,
    'pgq_admin cannot write pgq._schedules directly'
);
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
