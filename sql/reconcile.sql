-- Run on every install and upgrade after the functions, views and setup, in the same
-- transaction. It makes schema pgq exactly what the code defines:
-- 1. Functions, views and triggers in schema pgq that this transaction did not (re)create
--    are left over from an earlier version (e.g. an old overload that makes calls
--    ambiguous): they are dropped. Objects outside schema pgq are never touched; if one
--    depends on a stale object, the DROP fails and the whole install rolls back.
-- 2. Schema pgq and everything in it is handed to the NOLOGIN role pgq_owner.
-- "Created by this transaction" is read from the catalog row's xmin: CREATE OR REPLACE
-- rewrites the row even when the definition is unchanged. A trigger that the code keeps
-- without re-creating it (that would lock its table) is marked by re-writing its comment.
-- When no function of schema pgq was created by this transaction, the install or upgrade
-- did not run in one (a script through psql without -1): every object would look stale,
-- so nothing is dropped and it raises.
DO $$
DECLARE
    v_xid xid := pg_catalog.pg_current_xact_id()::xid;
    v_stmt text;
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_proc AS p WHERE p.pronamespace = 'pgq'::regnamespace AND p.xmin = v_xid
    ) THEN
        RAISE EXCEPTION USING ERRCODE = 'PQ012',
            MESSAGE = 'pgq: no function of schema pgq was created by this transaction: the install or '
                      'upgrade must run in one transaction; nothing was dropped',
            HINT = 'Run the script of pgq sql install or pgq sql upgrade in one transaction: '
                   'psql -v ON_ERROR_STOP=1 -1 -f FILE.';
    END IF;
    FOR v_stmt IN
        SELECT format('DROP TRIGGER %I ON pgq.%I', t.tgname, c.relname)
        FROM pg_catalog.pg_trigger AS t
        INNER JOIN pg_catalog.pg_class AS c ON t.tgrelid = c.oid
        -- A partition's copy of a trigger of its partitioned table (tgparentid) goes with it.
        WHERE c.relnamespace = 'pgq'::regnamespace AND NOT t.tgisinternal AND t.tgparentid = 0
          AND NOT t.xmin = v_xid
          AND NOT EXISTS (
              SELECT 1 FROM pg_catalog.pg_description AS d
              WHERE d.classoid = 'pg_trigger'::regclass AND d.objoid = t.oid AND d.xmin = v_xid
          )
    LOOP
        EXECUTE v_stmt;
    END LOOP;
    FOR v_stmt IN
        SELECT format('DROP VIEW pgq.%I', c.relname)
        FROM pg_catalog.pg_class AS c
        INNER JOIN pg_catalog.pg_rewrite AS r ON r.ev_class = c.oid AND r.rulename = '_RETURN'
        WHERE c.relnamespace = 'pgq'::regnamespace AND c.relkind IN ('v', 'm') AND NOT r.xmin = v_xid
    LOOP
        EXECUTE v_stmt;
    END LOOP;
    FOR v_stmt IN
        SELECT format(
            'DROP %s pgq.%I(%s)',
            CASE p.prokind WHEN 'a' THEN 'AGGREGATE' WHEN 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END,
            p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid)
        )
        FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = 'pgq'::regnamespace AND NOT p.xmin = v_xid
    LOOP
        EXECUTE v_stmt;
    END LOOP;

    FOR v_stmt IN
        SELECT s.stmt FROM (
            SELECT 1 AS ord, 'ALTER SCHEMA pgq OWNER TO pgq_owner' AS stmt
            FROM pg_catalog.pg_namespace AS n
            WHERE n.nspname = 'pgq' AND n.nspowner <> 'pgq_owner'::regrole
            UNION ALL
            -- Identity sequences and indexes follow their table.
            SELECT 2, format('ALTER TABLE pgq.%I OWNER TO pgq_owner', c.relname)
            FROM pg_catalog.pg_class AS c
            WHERE c.relnamespace = 'pgq'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
              AND c.relowner <> 'pgq_owner'::regrole
            UNION ALL
            SELECT 3, format('ALTER SEQUENCE pgq.%I OWNER TO pgq_owner', c.relname)
            FROM pg_catalog.pg_class AS c
            WHERE c.relnamespace = 'pgq'::regnamespace AND c.relkind = 'S'
              AND c.relowner <> 'pgq_owner'::regrole
              AND NOT EXISTS (
                  SELECT 1 FROM pg_catalog.pg_depend AS d
                  WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i')
              )
            UNION ALL
            SELECT 4, format(
                'ALTER %s pgq.%I(%s) OWNER TO pgq_owner',
                CASE p.prokind WHEN 'a' THEN 'AGGREGATE' WHEN 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END,
                p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid)
            )
            FROM pg_catalog.pg_proc AS p
            WHERE p.pronamespace = 'pgq'::regnamespace AND p.proowner <> 'pgq_owner'::regrole
        ) AS s
        ORDER BY s.ord
    LOOP
        EXECUTE v_stmt;
    END LOOP;
END
$$;
