-- pgq._cron_next(cron, after): the first minute strictly after `after` that matches the cron
-- expression, in UTC (see pgq._cron_matches for the day rule).
-- Walks day by day from the minute after `after`, skipping months that cannot match, and
-- takes the first matching hour and minute of the first matching day. The walk spans 8 years
-- and a day: the longest gap of any expression that can match at all is between two Feb 29
-- across a century that is not a leap year (2096-02-29 to 2104-02-29).
-- Returns NULL when the expression never matches (e.g. '0 0 31 2 *'), or when after is NULL
-- or infinite. Raises PQ006 for an invalid expression (see pgq._cron_parse).
CREATE OR REPLACE FUNCTION pgq._cron_next(cron text, after timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_cron record := pgq._cron_parse(cron);
    v_start timestamp;
    v_start_hour integer;
    v_start_minute integer;
    v_day date;
    v_end date;
    v_day_of_month boolean;
    v_day_of_week boolean;
    v_day_matches boolean;
    v_minute_of_day integer;
BEGIN
    IF after IS NULL OR NOT pg_catalog.isfinite(after) THEN
        RETURN NULL;
    END IF;
    v_start := pg_catalog.date_trunc('minute', after AT TIME ZONE 'UTC') + interval '1 minute';
    v_start_hour := pg_catalog.date_part('hour', v_start)::integer;
    v_start_minute := pg_catalog.date_part('minute', v_start)::integer;
    v_day := v_start::date;
    v_end := (v_start + interval '8 years 1 day')::date;

    WHILE v_day <= v_end LOOP
        IF NOT pg_catalog.date_part('month', v_day)::integer = ANY(v_cron.months) THEN
            -- Skip to the first day of the next month.
            v_day := (pg_catalog.date_trunc('month', v_day::timestamp) + interval '1 month')::date;
            CONTINUE;
        END IF;
        v_day_of_month := pg_catalog.date_part('day', v_day)::integer = ANY(v_cron.days);
        v_day_of_week := pg_catalog.date_part('dow', v_day)::integer = ANY(v_cron.weekdays);
        v_day_matches := CASE
            WHEN v_cron.days_any OR v_cron.weekdays_any THEN v_day_of_month AND v_day_of_week
            ELSE v_day_of_month OR v_day_of_week
        END;
        IF v_day_matches THEN
            IF v_day > v_start::date THEN
                v_minute_of_day := v_cron.hours[1] * 60 + v_cron.minutes[1];
            ELSE
                -- On the first day, the first matching minute not before v_start: in its hour,
                -- else the first minute of a later hour.
                v_minute_of_day := NULL;
                IF v_start_hour = ANY(v_cron.hours) THEN
                    SELECT v_start_hour * 60 + min(m.m) INTO v_minute_of_day
                    FROM pg_catalog.unnest(v_cron.minutes) AS m (m)
                    WHERE m.m >= v_start_minute;
                END IF;
                IF v_minute_of_day IS NULL THEN
                    SELECT min(h.h) * 60 + v_cron.minutes[1] INTO v_minute_of_day
                    FROM pg_catalog.unnest(v_cron.hours) AS h (h)
                    WHERE h.h > v_start_hour;
                END IF;
            END IF;
            IF v_minute_of_day IS NOT NULL THEN
                RETURN (v_day + pg_catalog.make_interval(mins => v_minute_of_day)) AT TIME ZONE 'UTC';
            END IF;
        END IF;
        v_day := v_day + 1;
    END LOOP;
    RETURN NULL;
END
$$;
