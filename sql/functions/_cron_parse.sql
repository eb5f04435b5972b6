-- pgq._cron_parse(cron): parse a standard 5-field cron expression
-- (minute hour day-of-month month day-of-week, separated by whitespace) or a macro
-- (@hourly, @daily, @midnight, @weekly, @monthly, @yearly, @annually).
-- Returns the allowed values of each field (see pgq._cron_field; months and days of week
-- also by name, jan..dec and sun..sat; day of week 0 and 7 are Sunday, returned as 0), and
-- whether day-of-month and day-of-week start with * (days_any, weekdays_any: `*` or a step
-- such as `*/2`, as in Vixie cron): when neither does,
-- a day matches if either field matches.
-- Raises PQ006 for NULL, a count of fields other than 5, an unknown macro or an invalid field.
CREATE OR REPLACE FUNCTION pgq._cron_parse(
    cron text,
    OUT minutes integer[],
    OUT hours integer[],
    OUT days integer[],
    OUT months integer[],
    OUT weekdays integer[],
    OUT days_any boolean,
    OUT weekdays_any boolean
)
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_hint constant text :=
        'Write five fields separated by spaces: minute (0-59) hour (0-23) day-of-month (1-31) '
        'month (1-12 or jan-dec) day-of-week (0-7 or sun-sat, 0 and 7 are Sunday), '
        'e.g. ''*/15 * * * *'' or ''0 3 * * mon-fri'', or a macro: '
        '@hourly, @daily, @midnight, @weekly, @monthly, @yearly, @annually.';
    v_text text := pg_catalog.btrim(cron, E' \t\n\r');
    v_fields text[];
BEGIN
    IF cron IS NULL THEN
        RAISE EXCEPTION 'pgq: invalid cron expression: must not be NULL'
            USING ERRCODE = 'PQ006', HINT = v_hint;
    END IF;

    IF v_text LIKE '@%' THEN
        v_text := CASE pg_catalog.lower(v_text)
            WHEN '@hourly' THEN '0 * * * *'
            WHEN '@daily' THEN '0 0 * * *'
            WHEN '@midnight' THEN '0 0 * * *'
            WHEN '@weekly' THEN '0 0 * * 0'
            WHEN '@monthly' THEN '0 0 1 * *'
            WHEN '@yearly' THEN '0 0 1 1 *'
            WHEN '@annually' THEN '0 0 1 1 *'
        END;
        IF v_text IS NULL THEN
            RAISE EXCEPTION 'pgq: invalid cron expression: unknown macro "%"', pg_catalog.btrim(cron)
                USING ERRCODE = 'PQ006', HINT = v_hint;
        END IF;
    END IF;

    v_fields := CASE WHEN v_text = '' THEN '{}'::text[]
        ELSE pg_catalog.regexp_split_to_array(v_text, '\s+') END;
    IF pg_catalog.cardinality(v_fields) <> 5 THEN
        RAISE EXCEPTION 'pgq: invalid cron expression: "%" has % field%, expected 5',
            cron, pg_catalog.cardinality(v_fields),
            CASE WHEN pg_catalog.cardinality(v_fields) = 1 THEN '' ELSE 's' END
            USING ERRCODE = 'PQ006', HINT = v_hint;
    END IF;

    minutes := pgq._cron_field('minute', v_fields[1], 0, 59);
    hours := pgq._cron_field('hour', v_fields[2], 0, 23);
    days := pgq._cron_field('day-of-month', v_fields[3], 1, 31);
    months := pgq._cron_field('month', v_fields[4], 1, 12,
        ARRAY['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec']);
    weekdays := pgq._cron_field('day-of-week', v_fields[5], 0, 7,
        ARRAY['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat']);
    days_any := v_fields[3] LIKE '*%';
    weekdays_any := v_fields[5] LIKE '*%';
END
$$;
