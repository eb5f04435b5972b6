-- pgq.prune: outcome-log retention (default 7 days, per-entrypoint retention shorter or
-- longer); rows in the default partition are deleted, old daily partitions dropped, and
-- both counted; today's and the next three days' partitions are created (rows that fell
-- into the default partition for such a day are moved in); privileges.
BEGIN;
SELECT plan(30);

-- An outcome row finished at a given time (straight into the log, like pgq.complete does).
CREATE PROCEDURE pg_temp.outcome(job_id bigint, entrypoint text, finished_at timestamptz)
LANGUAGE sql AS $$
    INSERT INTO pgq._outcomes (
        job_id, entrypoint, outcome, priority, attempt, deliveries, enqueued_at, started_at, finished_at
    )
    VALUES (job_id, entrypoint, 'succeeded', 0, 0, 1, finished_at - interval '2 seconds',
            finished_at - interval '1 second', finished_at)
$$;
-- The partition that holds a job's outcome.
CREATE FUNCTION pg_temp.partition_of(job_id bigint) RETURNS text
LANGUAGE sql STABLE AS $$ SELECT o.tableoid::regclass::text FROM pgq._outcomes AS o WHERE o.job_id = $1 $$;
-- The name of the daily partition of the UTC day `days` from today.
CREATE FUNCTION pg_temp.day_partition(days integer) RETURNS text
LANGUAGE sql STABLE AS $$ SELECT 'pgq._outcomes_' || to_char((now() AT TIME ZONE 'UTC')::date + days, 'YYYYMMDD') $$;
-- The job ids left in the log.
CREATE FUNCTION pg_temp.left_ids() RETURNS bigint[]
LANGUAGE sql STABLE AS $$ SELECT array_agg(o.job_id ORDER BY o.job_id) FROM pgq._outcomes AS o $$;

-- Nothing to prune.
SELECT is(pgq.prune(), 0::bigint, 'prune of an empty log returns 0');
SELECT is(
    (SELECT m.last_run FROM pgq._maintenance AS m WHERE m.task = 'prune'),
    now(),
    'prune records when it ran (the workers'' sweep reads it)'
);
SELECT results_eq(
    $$SELECT to_regclass(pg_temp.day_partition(d)) IS NOT NULL FROM generate_series(0, 3) AS d ORDER BY d$$,
    ARRAY[TRUE, TRUE, TRUE, TRUE],
    'today''s and the next three days'' partitions exist'
);

-- The default partition: rows older than the default retention (7 days) are deleted.
CALL pg_temp.outcome(1, 'ep', now() - interval '8 days');
CALL pg_temp.outcome(2, 'ep', now() - interval '7 days 1 minute');
CALL pg_temp.outcome(3, 'ep', now() - interval '6 days 23 hours');
CALL pg_temp.outcome(4, 'ep', now() - interval '1 day 1 hour');
SELECT results_eq(
    $$SELECT pg_temp.partition_of(g) FROM generate_series(1, 4) AS g$$,
    ARRAY['pgq._outcomes_default', 'pgq._outcomes_default', 'pgq._outcomes_default', 'pgq._outcomes_default'],
    'rows of days without a partition are in the default partition'
);
SELECT is(pgq.prune(), 2::bigint, 'prune returns the number of outcomes it deleted');
SELECT is(pg_temp.left_ids(), ARRAY[3, 4]::bigint[], 'the rows older than 7 days are gone, the younger ones stay');
SELECT is(pgq.job_status(1), NULL, 'a pruned job''s status is unknown (NULL)');
SELECT is(pgq.prune(), 0::bigint, 'a second prune finds nothing more');

-- Per-entrypoint retention: shorter than the default deletes only that entrypoint's rows;
-- longer keeps its rows past the default.
SELECT lives_ok($$SELECT pgq.configure('short', retention => '1 hour')$$, 'entrypoint short keeps outcomes 1 hour');
SELECT lives_ok($$SELECT pgq.configure('long', retention => '30 days')$$, 'entrypoint long keeps outcomes 30 days');
CALL pg_temp.outcome(10, 'short', now() - interval '2 hours');
CALL pg_temp.outcome(11, 'short', now() - interval '30 minutes');
CALL pg_temp.outcome(12, 'short', now() - interval '3 days');
CALL pg_temp.outcome(13, 'ep', now() - interval '2 hours');
CALL pg_temp.outcome(14, 'ep', now() - interval '3 days');
CALL pg_temp.outcome(15, 'long', now() - interval '12 days');
CALL pg_temp.outcome(16, 'long', now() - interval '31 days');
SELECT is(pgq.prune(), 3::bigint, 'prune deletes 3 rows: two of short, one of long');
SELECT is(
    pg_temp.left_ids(),
    ARRAY[3, 4, 11, 13, 14, 15]::bigint[],
    'short keeps only its last hour; ep its last 7 days; long its last 30 days'
);

-- A daily partition younger than the longest retention: rows past their entrypoint's
-- retention are deleted, the partition stays.
SELECT lives_ok(
    format(
        $$CREATE TABLE %s PARTITION OF pgq._outcomes FOR VALUES FROM (%L) TO (%L)$$,
        pg_temp.day_partition(-10),
        ((now() AT TIME ZONE 'UTC')::date - 10)::timestamp AT TIME ZONE 'UTC',
        ((now() AT TIME ZONE 'UTC')::date - 9)::timestamp AT TIME ZONE 'UTC'
    ),
    'a daily partition for 10 days ago is created'
);
-- As pgq._ensure_partitions would have made it: owned by pgq_owner, as pgq.prune runs.
DO $$ BEGIN EXECUTE format('ALTER TABLE %s OWNER TO pgq_owner', pg_temp.day_partition(-10)); END $$;
CALL pg_temp.outcome(20, 'ep', ((now() AT TIME ZONE 'UTC')::date - 10)::timestamp AT TIME ZONE 'UTC');
CALL pg_temp.outcome(21, 'long', ((now() AT TIME ZONE 'UTC')::date - 10)::timestamp AT TIME ZONE 'UTC');
SELECT results_eq(
    $$SELECT pg_temp.partition_of(20), pg_temp.partition_of(21)$$,
    $$SELECT pg_temp.day_partition(-10), pg_temp.day_partition(-10)$$,
    'its rows are in it'
);
SELECT is(pgq.prune(), 1::bigint, 'prune deletes the row of ep (past 7 days)');
SELECT results_eq(
    $$SELECT to_regclass(pg_temp.day_partition(-10)) IS NOT NULL, pg_temp.partition_of(21)$$,
    $$SELECT TRUE, pg_temp.day_partition(-10)$$,
    'the partition stays (long keeps 30 days), with the row of long'
);

-- An old daily partition (older than the longest retention) is dropped, its rows counted.
CREATE TABLE pgq._outcomes_20200101 PARTITION OF pgq._outcomes
FOR VALUES FROM ('2020-01-01 00:00+00') TO ('2020-01-02 00:00+00');
ALTER TABLE pgq._outcomes_20200101 OWNER TO pgq_owner;
CALL pg_temp.outcome(30, 'ep', '2020-01-01 00:00+00');
CALL pg_temp.outcome(31, 'long', '2020-01-01 12:00+00');
CALL pg_temp.outcome(32, 'short', '2020-01-01 23:59:59.999999+00');
SELECT results_eq(
    $$SELECT pg_temp.partition_of(g) FROM generate_series(30, 32) AS g$$,
    ARRAY['pgq._outcomes_20200101', 'pgq._outcomes_20200101', 'pgq._outcomes_20200101'],
    'the rows of 2020-01-01 are in pgq._outcomes_20200101'
);
SELECT is(pgq.prune(), 3::bigint, 'prune counts the rows of the partition it drops');
SELECT is(to_regclass('pgq._outcomes_20200101'), NULL, 'pgq._outcomes_20200101 is dropped');
SELECT is(
    pg_temp.left_ids(),
    ARRAY[3, 4, 11, 13, 14, 15, 21]::bigint[],
    'the other outcomes are untouched'
);

-- Partitions for the coming days: created when missing; rows that fell into the default
-- partition for such a day are moved into it (and not pruned).
SELECT lives_ok(
    format($$DROP TABLE %s$$, pg_temp.day_partition(3)),
    'the partition of the day after the day after tomorrow is dropped'
);
CALL pg_temp.outcome(40, 'ep', ((now() AT TIME ZONE 'UTC')::date + 3)::timestamp AT TIME ZONE 'UTC' + interval '12 hours');
SELECT is(pg_temp.partition_of(40), 'pgq._outcomes_default', 'a row for that day lands in the default partition');
SELECT is(pgq.prune(), 0::bigint, 'prune removes nothing');
SELECT results_eq(
    $$SELECT to_regclass(pg_temp.day_partition(d)) IS NOT NULL FROM generate_series(0, 3) AS d ORDER BY d$$,
    ARRAY[TRUE, TRUE, TRUE, TRUE],
    'after prune, today''s and the next three days'' partitions exist'
);
SELECT is(pg_temp.partition_of(40), pg_temp.day_partition(3), 'the row was moved into the new partition');
SELECT is(
    (SELECT count(*) FROM pgq._outcomes_default AS o WHERE o.job_id = 40),
    0::bigint,
    'and is no longer in the default partition'
);

-- Privileges.
SET ROLE pgq_producer;
SELECT throws_ok($$SELECT pgq.prune()$$, '42501', NULL, 'pgq_producer cannot prune');
RESET ROLE;
SET ROLE pgq_worker;
SELECT throws_ok($$SELECT pgq.prune()$$, '42501', NULL, 'pgq_worker cannot prune (its heartbeat does)');
RESET ROLE;
SET ROLE pgq_admin;
SELECT is(pgq.prune(), 0::bigint, 'pgq_admin can prune');
SELECT throws_ok($$DELETE FROM pgq._outcomes$$, '42501', NULL, 'pgq_admin cannot delete from the log directly');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
