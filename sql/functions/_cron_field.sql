-- pgq._cron_field(field_name, expr, low, high, names): parse one field of a 5-field cron
-- expression into the sorted, distinct set of values it allows.
-- Parameters: field_name (for messages: 'minute', 'day-of-week', ...); expr (the field);
--   low, high (the range of numbers); names (optional, lower case, matched case-insensitively: names[1] is low,
--   names[2] is low + 1, ...; a number past the last name wraps to the first, so with
--   low 0, high 7 and sun..sat, 7 is Sunday = 0).
-- Accepts *, numbers, names, ranges a-b, lists a,b,c and steps */n, a-b/n and a/n (a to high).
-- Returns int[]. Raises PQ006 naming the field for anything else (empty, out of range,
-- reversed range, step 0, unknown name, garbage).
CREATE OR REPLACE FUNCTION pgq._cron_field(
    field_name text,
    expr text,
    low integer,
    high integer,
    names text[] DEFAULT NULL
)
RETURNS integer[]
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_item text;
    v_parts text[];
    v_bounds text[];
    v_token text;
    v_first integer;
    v_last integer;
    v_step integer;
    v_value numeric;
    v_problem text;
    v_values integer[] := '{}';
    v_hint text := format(
        'The %s field takes *, a number %s-%s%s, a range a-b, a list a,b,c, or a step */n, a-b/n or a/n, '
        'e.g. ''*/2'', ''%s-%s'', ''%s,%s''%s.',
        field_name, low, high,
        CASE WHEN names IS NOT NULL
            THEN format(' or a name %s-%s', names[1], names[pg_catalog.cardinality(names)])
            ELSE '' END,
        low + 1, low + 4, low, low + 2,
        CASE WHEN names IS NOT NULL THEN format(' or ''%s-%s''', names[2], names[6]) ELSE '' END);
BEGIN
    IF expr IS NULL OR expr = '' THEN
        v_problem := 'is empty';
    ELSE
        <<items>>
        FOREACH v_item IN ARRAY pg_catalog.string_to_array(expr, ',') LOOP
            v_parts := pg_catalog.string_to_array(v_item, '/');
            IF v_item = '' THEN
                v_problem := 'has an empty list item';
                EXIT items;
            ELSIF pg_catalog.cardinality(v_parts) > 2 THEN
                v_problem := format('"%s" has more than one step', v_item);
                EXIT items;
            END IF;

            -- The step, if any.
            v_step := 1;
            IF pg_catalog.cardinality(v_parts) = 2 THEN
                IF v_parts[2] !~ '^[0-9]+$' THEN
                    v_problem := format('step "%s" is not a number', v_parts[2]);
                    EXIT items;
                ELSIF v_parts[2]::numeric < 1 OR v_parts[2]::numeric > high - low + 1 THEN
                    v_problem := format('step %s is out of range 1-%s', v_parts[2], high - low + 1);
                    EXIT items;
                END IF;
                v_step := v_parts[2]::integer;
            END IF;

            -- The base: *, a, or a-b; a with a step means a to high.
            IF v_parts[1] = '*' THEN
                v_bounds := ARRAY[low::text, high::text];
            ELSE
                v_bounds := pg_catalog.string_to_array(v_parts[1], '-');
                IF pg_catalog.cardinality(v_bounds) = 1 AND pg_catalog.cardinality(v_parts) = 2 THEN
                    v_bounds := v_bounds || high::text;
                ELSIF pg_catalog.cardinality(v_bounds) NOT IN (1, 2) THEN
                    v_problem := format('"%s" is not a number, a name or a range a-b', v_parts[1]);
                    EXIT items;
                END IF;
            END IF;

            -- Each bound: a number in range or a name.
            FOR v_i IN 1..pg_catalog.cardinality(v_bounds) LOOP
                v_token := v_bounds[v_i];
                IF v_token ~ '^[0-9]+$' THEN
                    v_value := v_token::numeric;
                    IF v_value < low OR v_value > high THEN
                        v_problem := format('%s is out of range %s-%s', v_token, low, high);
                        EXIT items;
                    END IF;
                ELSIF names IS NOT NULL AND pg_catalog.lower(v_token) = ANY(names) THEN
                    v_value := low + pg_catalog.array_position(names, pg_catalog.lower(v_token)) - 1;
                ELSIF names IS NOT NULL THEN
                    v_problem := format('"%s" is not a number %s-%s or a name %s-%s',
                        v_token, low, high, names[1], names[pg_catalog.cardinality(names)]);
                    EXIT items;
                ELSE
                    v_problem := format('"%s" is not a number %s-%s', v_token, low, high);
                    EXIT items;
                END IF;
                IF v_i = 1 THEN
                    v_first := v_value;
                END IF;
                v_last := v_value;
            END LOOP;

            IF v_first > v_last THEN
                v_problem := format('range %s is reversed', v_parts[1]);
                EXIT items;
            END IF;
            v_values := v_values || ARRAY(SELECT pg_catalog.generate_series(v_first, v_last, v_step));
        END LOOP;
    END IF;

    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'pgq: invalid cron expression: % field "%": %', field_name, expr, v_problem
            USING ERRCODE = 'PQ006', HINT = v_hint;
    END IF;

    -- Numbers past the last name wrap around (day-of-week 7 is Sunday, 0).
    RETURN ARRAY(
        SELECT DISTINCT
            CASE
                WHEN names IS NOT NULL AND v.v >= low + pg_catalog.cardinality(names)
                    THEN v.v - pg_catalog.cardinality(names)
                ELSE v.v
            END AS value
        FROM pg_catalog.unnest(v_values) AS v (v)
        ORDER BY value
    );
END
$$;
