-- pgq._invalid(argument, problem, hint): raise the project's invalid-argument error (PQ001)
-- with a message that names the argument. Every public function validates through this.
CREATE OR REPLACE FUNCTION pgq._invalid(argument text, problem text, hint text)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'pgq: invalid argument %: %', argument, problem
        USING ERRCODE = 'PQ001', HINT = hint;
END
$$;
