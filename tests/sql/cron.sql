-- pgq._cron_field, pgq._cron_parse, pgq._cron_matches, pgq._cron_next: fields, names, steps,
-- macros; matching and next run in UTC whatever the session time zone (month ends, Feb 29,
-- the day-of-month OR day-of-week rule, year end, strictly after); bad input raises PQ006.
BEGIN;
SELECT plan(132);

-- Everything is UTC: a session time zone far from it must change nothing.
SET LOCAL timezone = 'Pacific/Kiritimati';

-- Fields.
SELECT is(pgq._cron_field('minute', '*', 0, 59), (SELECT array_agg(g) FROM generate_series(0, 59) AS g), '* is every value');
SELECT is(pgq._cron_field('minute', '*/20', 0, 59), ARRAY[0, 20, 40], '*/n steps from the low end');
SELECT is(pgq._cron_field('minute', '5/20', 0, 59), ARRAY[5, 25, 45], 'a/n steps from a to the high end');
SELECT is(pgq._cron_field('minute', '5-55/10', 0, 59), ARRAY[5, 15, 25, 35, 45, 55], 'a-b/n steps within a range');
SELECT is(pgq._cron_field('hour', '9-11,1-3,2', 0, 23), ARRAY[1, 2, 3, 9, 10, 11], 'lists are sorted and distinct');
SELECT is(
    pgq._cron_field(
        'month', 'JAN,jul-Sep', 1, 12,
        ARRAY['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec']
    ),
    ARRAY[1, 7, 8, 9],
    'names are case-insensitive, in lists and ranges'
);
SELECT is(
    pgq._cron_field('day-of-week', '5-7', 0, 7, ARRAY['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat']),
    ARRAY[0, 5, 6],
    'day-of-week 7 is Sunday, normalised to 0'
);
SELECT is(
    pgq._cron_field('day-of-week', '0,7,sun', 0, 7, ARRAY['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat']),
    ARRAY[0],
    '0, 7 and sun are one Sunday'
);
SELECT results_eq(
    $$SELECT p.days, p.weekdays, p.days_any, p.weekdays_any FROM pgq._cron_parse('0 0 13 * fri') AS p$$,
    $$SELECT ARRAY[13], ARRAY[5], FALSE, FALSE$$,
    '_cron_parse: day-of-month and day-of-week both restricted'
);
SELECT results_eq(
    $$SELECT p.minutes, p.hours, p.weekdays, p.days_any, p.weekdays_any FROM pgq._cron_parse(' @Weekly ') AS p$$,
    $$SELECT ARRAY[0], ARRAY[0], ARRAY[0], TRUE, FALSE$$,
    '_cron_parse: a macro, trimmed and case-insensitive'
);
SELECT results_eq(
    $$SELECT p.minutes, p.hours, p.days_any FROM pgq._cron_parse(E'*/30\t0 \n *  * *') AS p$$,
    $$SELECT ARRAY[0, 30], ARRAY[0], TRUE$$,
    '_cron_parse: fields are separated by any whitespace'
);

-- _cron_matches, table-driven: the minute containing `at`, in UTC.
CREATE TEMP TABLE t_matches (id serial PRIMARY KEY, cron text, at timestamptz, expected boolean, why text);
INSERT INTO t_matches (cron, at, expected, why) VALUES
('* * * * *', '2025-06-15 12:34:56+00', TRUE, 'every minute'),
('30 12 * * *', '2025-06-15 12:30:59.999+00', TRUE, 'any second of the minute'),
('30 12 * * *', '2025-06-15 12:31:00+00', FALSE, 'not the next minute'),
('0 12 * * *', '2025-06-15 14:00:00+02', TRUE, 'hours are UTC'),
('0 12 * * *', '2025-06-15 12:00:00+02', FALSE, 'hours are UTC, not the offset of the input'),
('*/15 * * * *', '2025-06-15 12:45:00+00', TRUE, '*/15 at :45'),
('*/15 * * * *', '2025-06-15 12:46:00+00', FALSE, '*/15 not at :46'),
('5-55/10 * * * *', '2025-06-15 12:35:00+00', TRUE, '5-55/10 at :35'),
('5-55/10 * * * *', '2025-06-15 12:40:00+00', FALSE, '5-55/10 not at :40'),
('0 */6 * * *', '2025-06-15 18:00:00+00', TRUE, 'every 6 hours at 18:00'),
('0 */6 * * *', '2025-06-15 03:00:00+00', FALSE, 'every 6 hours not at 03:00'),
('0,30 8,20 * * *', '2025-06-15 20:30:00+00', TRUE, 'lists of minutes and hours'),
('0,30 8,20 * * *', '2025-06-15 20:15:00+00', FALSE, 'lists: a minute not listed'),
('0 0 31 * *', '2025-05-31 00:00:00+00', TRUE, 'the 31st'),
('0 0 29 2 *', '2028-02-29 00:00:00+00', TRUE, 'Feb 29 in a leap year'),
('0 0 29 2 *', '2025-03-01 00:00:00+00', FALSE, 'no Feb 29 in a common year: not March 1'),
('0 0 31 * *', '2025-04-30 00:00:00+00', FALSE, 'the 31st is not the last day of April'),
('0 0 13 * 5', '2025-06-13 00:00:00+00', TRUE, '13th OR Friday: Friday the 13th'),
('0 0 13 * 5', '2025-06-06 00:00:00+00', TRUE, '13th OR Friday: a Friday that is not the 13th'),
('0 0 13 * 5', '2025-07-13 00:00:00+00', TRUE, '13th OR Friday: a 13th that is a Sunday'),
('0 0 13 * 5', '2025-06-07 00:00:00+00', FALSE, '13th OR Friday: neither'),
('0 0 13 * *', '2025-06-06 00:00:00+00', FALSE, 'day-of-week *: only the 13th'),
('0 0 * * 5', '2025-06-13 00:00:00+00', TRUE, 'day-of-month *: a Friday'),
('0 0 * * 5', '2025-06-14 00:00:00+00', FALSE, 'day-of-month *: only Fridays'),
('0 0 13 6 5', '2025-07-04 00:00:00+00', FALSE, '13th OR Friday, but in June only'),
('0 0 */2 * 1', '2025-06-23 00:00:00+00', TRUE, 'day-of-month */2 starts with *: odd day AND Monday'),
('0 0 */2 * 1', '2025-06-16 00:00:00+00', FALSE, 'day-of-month */2 starts with *: a Monday on an even day'),
('0 0 */2 * 1', '2025-06-17 00:00:00+00', FALSE, 'day-of-month */2 starts with *: an odd day not a Monday'),
('0 0 1 * */2', '2025-06-03 00:00:00+00', FALSE, 'day-of-week */2 starts with *: Tuesday the 3rd is not the 1st'),
('0 9 * * MON-FRI', '2025-06-16 09:00:00+00', TRUE, 'MON-FRI on a Monday'),
('0 9 * * MON-FRI', '2025-06-20 09:00:00+00', TRUE, 'MON-FRI on a Friday'),
('0 9 * * MON-FRI', '2025-06-21 09:00:00+00', FALSE, 'MON-FRI not on a Saturday'),
('0 9 * * MON-FRI', '2025-06-15 09:00:00+00', FALSE, 'MON-FRI not on a Sunday'),
('0 0 1 jan,jul *', '2025-07-01 00:00:00+00', TRUE, 'jan,jul in July'),
('0 0 1 jan,jul *', '2025-08-01 00:00:00+00', FALSE, 'jan,jul not in August'),
('0 0 * * 7', '2025-06-15 00:00:00+00', TRUE, '7 is Sunday'),
('0 0 * * 0', '2025-06-15 00:00:00+00', TRUE, '0 is Sunday'),
('0 0 * * 7', '2025-06-16 00:00:00+00', FALSE, '7 is not Monday'),
('0 0 * * 5-7', '2025-06-15 00:00:00+00', TRUE, '5-7 includes Sunday'),
('0 0 * * 5-7', '2025-06-16 00:00:00+00', FALSE, '5-7 excludes Monday'),
('@hourly', '2025-06-15 12:00:00+00', TRUE, '@hourly on the hour'),
('@hourly', '2025-06-15 12:01:00+00', FALSE, '@hourly not past the hour'),
('@daily', '2025-06-15 00:00:00+00', TRUE, '@daily at midnight'),
('@midnight', '2025-06-15 01:00:00+00', FALSE, '@midnight not at 01:00'),
('@weekly', '2025-06-15 00:00:00+00', TRUE, '@weekly on Sunday midnight'),
('@weekly', '2025-06-16 00:00:00+00', FALSE, '@weekly not on Monday'),
('@monthly', '2025-06-01 00:00:00+00', TRUE, '@monthly on the 1st'),
('@yearly', '2025-01-01 00:00:00+00', TRUE, '@yearly on Jan 1'),
('@annually', '2025-02-01 00:00:00+00', FALSE, '@annually not on Feb 1');

SELECT is(pgq._cron_matches(m.cron, m.at), m.expected, format('_cron_matches(%L, %s UTC): %s', m.cron, m.at AT TIME ZONE 'UTC', m.why))
FROM t_matches AS m
ORDER BY m.id;
SELECT is(pgq._cron_matches('* * * * *', NULL), NULL, '_cron_matches of NULL is NULL');

-- _cron_next, table-driven: the first matching minute strictly after `after`, in UTC.
CREATE TEMP TABLE t_next (id serial PRIMARY KEY, cron text, after timestamptz, expected timestamptz, why text);
INSERT INTO t_next (cron, after, expected, why) VALUES
('* * * * *', '2025-06-15 12:34:56+00', '2025-06-15 12:35:00+00', 'every minute: the next minute'),
('* * * * *', '2025-06-15 12:34:00+00', '2025-06-15 12:35:00+00', 'strictly after an exactly matching minute'),
('0 * * * *', '2025-06-15 12:00:00+00', '2025-06-15 13:00:00+00', 'strictly after: the next hour'),
('0 12 * * *', '2025-06-15 13:00:00+02', '2025-06-15 12:00:00+00', 'UTC: 11:00 UTC is before 12:00 UTC'),
('*/15 * * * *', '2025-06-15 12:07:00+00', '2025-06-15 12:15:00+00', '*/15'),
('*/15 * * * *', '2025-12-31 23:59:30+00', '2026-01-01 00:00:00+00', '*/15 across year end'),
('5-55/10 * * * *', '2025-06-15 12:55:00+00', '2025-06-15 13:05:00+00', '5-55/10 wraps to the next hour'),
('0 */6 * * *', '2025-06-15 18:00:00+00', '2025-06-16 00:00:00+00', 'every 6 hours wraps to the next day'),
('15,45 10,14 * * *', '2025-06-15 10:50:00+00', '2025-06-15 14:15:00+00', 'lists: the next listed hour'),
('59 23 * * *', '2025-06-15 23:58:59+00', '2025-06-15 23:59:00+00', 'the last minute of the day'),
('0 0 * * *', '2025-12-31 12:00:00+00', '2026-01-01 00:00:00+00', 'daily across year end'),
('30 23 31 12 *', '2025-12-31 23:30:00+00', '2026-12-31 23:30:00+00', 'yearly on Dec 31: strictly after'),
('0 0 31 * *', '2025-04-01 00:00:00+00', '2025-05-31 00:00:00+00', '31st: April has 30 days'),
('0 0 31 * *', '2025-05-31 00:00:00+00', '2025-07-31 00:00:00+00', '31st: June has 30 days'),
('0 0 30 * *', '2025-01-31 00:00:00+00', '2025-03-30 00:00:00+00', '30th: February has none'),
('0 0 1 3 *', '2024-02-29 12:00:00+00', '2024-03-01 00:00:00+00', 'March 1 after Feb 29 in a leap year'),
('0 0 1 3 *', '2025-02-28 12:00:00+00', '2025-03-01 00:00:00+00', 'March 1 after Feb 28 in a common year'),
('0 0 28 2 *', '2025-02-28 00:00:00+00', '2026-02-28 00:00:00+00', 'Feb 28: next year'),
('0 0 29 2 *', '2024-01-01 00:00:00+00', '2024-02-29 00:00:00+00', 'Feb 29 in a leap year'),
('0 0 29 2 *', '2025-03-01 00:00:00+00', '2028-02-29 00:00:00+00', 'Feb 29: three years ahead'),
('0 0 29 2 *', '2096-03-01 00:00:00+00', '2104-02-29 00:00:00+00', 'Feb 29: 2100 is not a leap year'),
('0 0 31 2 *', '2025-01-01 00:00:00+00', NULL, 'Feb 31 never comes: NULL'),
('0 0 30 2 *', '2025-01-01 00:00:00+00', NULL, 'Feb 30 never comes: NULL'),
('0 0 13 * 5', '2025-06-01 00:00:00+00', '2025-06-06 00:00:00+00', '13th OR Friday: a Friday first'),
('0 0 13 * 5', '2025-06-06 00:00:00+00', '2025-06-13 00:00:00+00', '13th OR Friday: Friday the 13th'),
('0 0 13 * 5', '2025-07-11 00:00:00+00', '2025-07-13 00:00:00+00', '13th OR Friday: a 13th that is a Sunday'),
('0 0 13 * *', '2025-06-14 00:00:00+00', '2025-07-13 00:00:00+00', 'day-of-week *: only the 13th'),
('0 0 */2 * 1', '2025-06-16 00:00:00+00', '2025-06-23 00:00:00+00', 'day-of-month */2: the next odd Monday'),
('0 9 * * MON-FRI', '2025-06-13 09:00:00+00', '2025-06-16 09:00:00+00', 'MON-FRI skips the weekend'),
('0 0 1 jan,jul *', '2025-01-01 00:00:00+00', '2025-07-01 00:00:00+00', 'jan,jul: July after January'),
('0 0 1 jan,jul *', '2025-07-01 00:00:00+00', '2026-01-01 00:00:00+00', 'jan,jul: January across year end'),
('0 0 * * 7', '2025-06-16 00:00:00+00', '2025-06-22 00:00:00+00', '7 is Sunday'),
('@hourly', '2025-12-31 23:30:00+00', '2026-01-01 00:00:00+00', '@hourly across year end'),
('@daily', '2025-06-15 00:00:00+00', '2025-06-16 00:00:00+00', '@daily strictly after midnight'),
('@weekly', '2025-06-15 00:00:00+00', '2025-06-22 00:00:00+00', '@weekly: the next Sunday'),
('@monthly', '2025-01-31 10:00:00+00', '2025-02-01 00:00:00+00', '@monthly: the next 1st'),
('@yearly', '2025-01-01 00:00:00+00', '2026-01-01 00:00:00+00', '@yearly: the next Jan 1');

SELECT
    is(
        pgq._cron_next(n.cron, n.after),
        n.expected,
        format('_cron_next(%L, %s UTC): %s', n.cron, n.after AT TIME ZONE 'UTC', n.why)
    )
FROM t_next AS n
ORDER BY n.id;
SELECT is(pgq._cron_next('* * * * *', NULL), NULL, '_cron_next after NULL is NULL');
SELECT is(pgq._cron_next('* * * * *', 'infinity'), NULL, '_cron_next after infinity is NULL');
SELECT is(
    (SELECT count(*) FROM t_next AS n WHERE n.expected IS NOT NULL AND NOT pgq._cron_matches(n.cron, n.expected)),
    0::bigint,
    'every next run found matches'
);
SELECT is(
    (
        SELECT count(*)
        FROM t_next AS n
        CROSS JOIN
            LATERAL generate_series(
                date_trunc('minute', n.after) + interval '1 minute', n.expected - interval '1 minute', interval '1 minute'
            ) AS g (at)
        WHERE n.expected - n.after < interval '3 days' AND pgq._cron_matches(n.cron, g.at)
    ),
    0::bigint,
    'no minute between after and the next run found matches (gaps under 3 days)'
);

-- Bad input: PQ006, naming the field.
SELECT throws_ok(
    $$SELECT pgq._cron_next('* * * *', now())$$, 'PQ006',
    'pgq: invalid cron expression: "* * * *" has 4 fields, expected 5',
    '4 fields raise PQ006 naming the count'
);
SELECT throws_ok(
    $$SELECT pgq._cron_next('* * * * * *', now())$$, 'PQ006',
    'pgq: invalid cron expression: "* * * * * *" has 6 fields, expected 5',
    '6 fields raise PQ006 naming the count'
);
SELECT throws_ok(
    $$SELECT pgq._cron_next('* * 32 * *', now())$$, 'PQ006',
    'pgq: invalid cron expression: day-of-month field "32": 32 is out of range 1-31',
    'day-of-month 32 raises PQ006 naming the field'
);
SELECT throws_ok(
    $$SELECT pgq._cron_next('60 * * * *', now())$$, 'PQ006',
    'pgq: invalid cron expression: minute field "60": 60 is out of range 0-59',
    'minute 60 raises PQ006'
);
SELECT throws_ok($$SELECT pgq._cron_next('* 24 * * *', now())$$, 'PQ006', NULL, 'hour 24 raises PQ006');
SELECT throws_ok($$SELECT pgq._cron_next('* * 0 * *', now())$$, 'PQ006', NULL, 'day-of-month 0 raises PQ006');
SELECT throws_ok($$SELECT pgq._cron_next('* * * 13 *', now())$$, 'PQ006', NULL, 'month 13 raises PQ006');
SELECT throws_ok($$SELECT pgq._cron_next('* * * 0 *', now())$$, 'PQ006', NULL, 'month 0 raises PQ006');
SELECT throws_ok($$SELECT pgq._cron_next('* * * * 8', now())$$, 'PQ006', NULL, 'day-of-week 8 raises PQ006');
SELECT throws_ok(
    $$SELECT pgq._cron_next('5-1 * * * *', now())$$, 'PQ006',
    'pgq: invalid cron expression: minute field "5-1": range 5-1 is reversed',
    'a reversed range raises PQ006'
);
SELECT throws_ok($$SELECT pgq._cron_next('* * * * fri-mon', now())$$, 'PQ006', NULL, 'a reversed range of names raises PQ006');
SELECT throws_ok(
    $$SELECT pgq._cron_next('*/0 * * * *', now())$$, 'PQ006',
    'pgq: invalid cron expression: minute field "*/0": step 0 is out of range 1-60',
    'step 0 raises PQ006'
);
SELECT throws_ok($$SELECT pgq._cron_next('*/x * * * *', now())$$, 'PQ006', NULL, 'a step that is not a number raises PQ006');
SELECT throws_ok($$SELECT pgq._cron_next('*/2/3 * * * *', now())$$, 'PQ006', NULL, 'two steps raise PQ006');
SELECT throws_ok(
    $$SELECT pgq._cron_next('a * * * *', now())$$, 'PQ006',
    'pgq: invalid cron expression: minute field "a": "a" is not a number 0-59',
    'garbage raises PQ006'
);
SELECT throws_ok($$SELECT pgq._cron_next('-1 * * * *', now())$$, 'PQ006', NULL, 'a negative number raises PQ006');
SELECT throws_ok($$SELECT pgq._cron_next('1-2-3 * * * *', now())$$, 'PQ006', NULL, 'a range of three raises PQ006');
SELECT throws_ok($$SELECT pgq._cron_next('1,,2 * * * *', now())$$, 'PQ006', NULL, 'an empty list item raises PQ006');
SELECT throws_ok($$SELECT pgq._cron_next('jan * * * *', now())$$, 'PQ006', NULL, 'a name in a numeric field raises PQ006');
SELECT throws_ok(
    $$SELECT pgq._cron_next('* * * foo *', now())$$, 'PQ006',
    'pgq: invalid cron expression: month field "foo": "foo" is not a number 1-12 or a name jan-dec',
    'an unknown month name raises PQ006'
);
SELECT throws_ok($$SELECT pgq._cron_next('* * * * funday', now())$$, 'PQ006', NULL, 'an unknown day name raises PQ006');
SELECT throws_ok(
    $$SELECT pgq._cron_next('99999999999 * * * *', now())$$, 'PQ006', NULL, 'a huge number raises PQ006'
);
SELECT throws_ok(
    $$SELECT pgq._cron_next('', now())$$, 'PQ006',
    'pgq: invalid cron expression: "" has 0 fields, expected 5',
    'an empty string raises PQ006'
);
SELECT throws_ok($$SELECT pgq._cron_next('   ', now())$$, 'PQ006', NULL, 'blanks raise PQ006');
SELECT throws_ok(
    $$SELECT pgq._cron_next(NULL, now())$$, 'PQ006',
    'pgq: invalid cron expression: must not be NULL',
    'NULL raises PQ006'
);
SELECT throws_ok(
    $$SELECT pgq._cron_next('@reboot', now())$$, 'PQ006',
    'pgq: invalid cron expression: unknown macro "@reboot"',
    'an unknown macro raises PQ006'
);
SELECT throws_ok($$SELECT pgq._cron_matches('* * * 13 *', now())$$, 'PQ006', NULL, '_cron_matches raises PQ006 too');
SELECT throws_ok($$SELECT pgq._cron_field('hour', NULL, 0, 23)$$, 'PQ006', NULL, '_cron_field of NULL raises PQ006');

-- The HINT shows the expected form.
CREATE FUNCTION pg_temp.hint_of(cron text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_hint text;
BEGIN
    PERFORM pgq._cron_parse(cron);
    RETURN NULL;
EXCEPTION WHEN SQLSTATE 'PQ006' THEN
    GET STACKED DIAGNOSTICS v_hint = PG_EXCEPTION_HINT;
    RETURN v_hint;
END
$$;
SELECT is(
    pg_temp.hint_of('* * * * 8'),
    'The day-of-week field takes *, a number 0-7 or a name sun-sat, a range a-b, a list a,b,c, '
    'or a step */n, a-b/n or a/n, e.g. ''*/2'', ''1-4'', ''0,2'' or ''mon-fri''.',
    'a field error hints at the form of that field'
);
SELECT matches(
    pg_temp.hint_of('* * * *'),
    '^Write five fields separated by spaces: minute \(0-59\) hour \(0-23\) day-of-month',
    'a count error hints at the five fields'
);

SELECT * FROM finish();
ROLLBACK;
