-- pgq._lock_key and pgq._lock_id: the numbers of pgq's advisory locks, the same as the
-- released code holds (its workers run through an upgrade); folded into a constant when a
-- statement is planned; an unknown name raises; and the functions that take the locks
-- take those numbers.
BEGIN;
SELECT plan(14);

SELECT results_eq(
    $$
        SELECT n.name, pgq._lock_key(n.name), pgq._lock_id(n.name)
        FROM (VALUES ('schema'), ('sweep'), ('prune')) AS n (name)
    $$,
    $$ VALUES ('schema', 7366513, 0), ('sweep', 7366513, 1), ('prune', 7366513, 2) $$,
    'the locks with a fixed second key have the numbers of 0.1.0 and 0.2.0'
);
SELECT is(pgq._lock_key('mark'), 7366514, 'the mark lock''s class is that of 0.2.0');
SELECT throws_ok(
    $$ SELECT pgq._lock_key('swep') $$, '22P02', NULL, 'an unknown lock name raises'
);
SELECT throws_ok(
    $$ SELECT pgq._lock_id('mark') $$, '22P02', NULL, 'the mark lock has no fixed second key'
);

-- Inlined and folded: the plan holds the numbers, not a call.
CREATE FUNCTION pg_temp.plan_of(query text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_line text;
    v_plan text := '';
BEGIN
    FOR v_line IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) ' || query LOOP
        v_plan := v_plan || v_line || E'\n';
    END LOOP;
    RETURN v_plan;
END
$$;
SELECT matches(
    pg_temp.plan_of($$ SELECT pg_try_advisory_xact_lock(pgq._lock_key('sweep'), pgq._lock_id('sweep')) $$),
    'pg_try_advisory_xact_lock\(7366513, 1\)',
    'a statement that names a lock is planned with its numbers'
);
SELECT doesnt_match(
    pg_temp.plan_of($$ SELECT pgq._lock_key('mark'), pgq._lock_id('prune') $$),
    '_lock_(key|id)',
    'no call of pgq._lock_key or pgq._lock_id is left in the plan'
);

-- The functions that take the locks take those numbers (held until this test rolls back).
CREATE TEMP VIEW held AS
SELECT
    l.classid::integer AS classid,
    l.objid::integer AS objid,
    l.mode
FROM pg_catalog.pg_locks AS l
WHERE l.locktype = 'advisory' AND l.pid = pg_catalog.pg_backend_pid() AND l.objsubid = 2;
SELECT is(pgq.reap(), 0, 'a sweep');
SELECT ok(
    EXISTS (SELECT 1 FROM held AS h WHERE (h.classid, h.objid, h.mode) = (7366513, 1, 'ExclusiveLock')),
    'the sweep holds (7366513, 1)'
);
SELECT is(pgq.prune(), 0::bigint, 'a prune');
SELECT ok(
    EXISTS (SELECT 1 FROM held AS h WHERE (h.classid, h.objid, h.mode) = (7366513, 2, 'ExclusiveLock')),
    'the prune holds (7366513, 2)'
);
SELECT isnt(pgq.enqueue('locks_test'), NULL, 'an enqueue');
SELECT ok(
    EXISTS (
        SELECT 1 FROM held AS h
        WHERE (h.classid, h.objid, h.mode) = (7366514, hashtext('locks_test'), 'ShareLock')
    ),
    'an enqueue lowering the mark holds (7366514, hashtext(entrypoint)) in share mode'
);
SELECT ok(pgq._raise_mark('locks_raise'), 'a raise of the mark');
SELECT ok(
    EXISTS (
        SELECT 1 FROM held AS h
        WHERE (h.classid, h.objid, h.mode) = (7366514, hashtext('locks_raise'), 'ExclusiveLock')
    ),
    'the raise holds (7366514, hashtext(entrypoint))'
);

SELECT * FROM finish();
ROLLBACK;
