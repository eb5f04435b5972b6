-- pgq._cron_matches(cron, at): whether the minute containing at, in UTC, matches the cron
-- expression. Days follow Vixie cron: when neither day-of-month nor day-of-week starts with
-- * (as `*` and `*/2` do), a day matches if either matches; otherwise both must match.
-- Returns NULL when at is NULL. Raises PQ006 for an invalid expression (see pgq._cron_parse).
CREATE OR REPLACE FUNCTION pgq._cron_matches(cron text, at timestamptz)
RETURNS boolean
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_cron record := pgq._cron_parse(cron);
    v_at timestamp := at AT TIME ZONE 'UTC';
    v_day_of_month boolean;
    v_day_of_week boolean;
BEGIN
    IF at IS NULL OR NOT pg_catalog.isfinite(at) THEN
        RETURN NULL;
    END IF;
    v_day_of_month := pg_catalog.date_part('day', v_at)::integer = ANY(v_cron.days);
    v_day_of_week := pg_catalog.date_part('dow', v_at)::integer = ANY(v_cron.weekdays);
    RETURN pg_catalog.date_part('minute', v_at)::integer = ANY(v_cron.minutes)
        AND pg_catalog.date_part('hour', v_at)::integer = ANY(v_cron.hours)
        AND pg_catalog.date_part('month', v_at)::integer = ANY(v_cron.months)
        AND CASE
            WHEN v_cron.days_any OR v_cron.weekdays_any THEN v_day_of_month AND v_day_of_week
            ELSE v_day_of_month OR v_day_of_week
        END;
END
$$;
