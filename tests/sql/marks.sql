-- The claim's low-water mark (pgq._marks, pgq._raise_mark, pgq._lower_mark): every path
-- that makes a job queued keeps the mark at or below it; claims start at the lesser of the
-- mark and its lows (pgq._mark_lows), from the front without a mark; a raise moves it to
-- the first queued job (trailing by a second) and takes in the lows, and a verifying raise
-- repairs a mark found above a queued job.
-- Races between writers and raises: tests/py/sql/test_claim_marks.py.
BEGIN;
SELECT plan(58);

\ir fixtures/setup.sql

-- A mark in force after every job of priority 0 and below: set only while the entrypoint
-- has none queued (else it would break the invariant these tests check).
CREATE FUNCTION pg_temp.mark_ahead(ep text) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO pgq._marks AS m (entrypoint, neg_priority, run_at, id, raised_at, verified_at)
    VALUES (ep, 0, 'infinity', 0, clock_timestamp(), clock_timestamp())
    ON CONFLICT (entrypoint) DO UPDATE
    SET neg_priority = 0, run_at = 'infinity', id = 0, raised_at = excluded.raised_at,
        verified_at = excluded.verified_at
$$;
-- Queued jobs that sort before their entrypoint's mark and all of its lows: the invariant
-- says none.
CREATE FUNCTION pg_temp.stranded() RETURNS bigint
LANGUAGE sql AS $$
    SELECT count(*) FROM pgq._jobs AS j
    INNER JOIN pgq._marks AS m ON j.entrypoint = m.entrypoint
    WHERE
        j.status = 'queued' AND ROW(-j.priority::bigint, j.run_at, j.id) < ROW(m.neg_priority, m.run_at, m.id)
        AND NOT EXISTS (
            SELECT 1 FROM pgq._mark_lows AS l
            WHERE l.entrypoint = j.entrypoint AND ROW(l.neg_priority, l.run_at, l.id) <= ROW(-j.priority::bigint, j.run_at, j.id)
        )
$$;
CREATE FUNCTION pg_temp.mark_of(ep text) RETURNS text
LANGUAGE sql AS $$
    SELECT format('%s/%s', m.neg_priority, m.id) FROM pgq._marks AS m WHERE m.entrypoint = ep
$$;

SELECT pgq.register_worker('w', string_to_array('p1 p2 p3 p4 p5 p6 p7 p8 p9 p10 p11 p12 r v', ' ')) AS w \gset

-- Writers ----------------------------------------------------------------------------------

-- 1. pgq.enqueue below the mark lowers it in place (the mark stays in force).
SELECT pg_temp.mark_ahead('p1');
INSERT INTO t_job VALUES ('p1', pgq.enqueue('p1', '{}'));
SELECT is(pg_temp.stranded(), 0::bigint, 'enqueue: no queued job below a mark in force');
SELECT is(pg_temp.mark_of('p1'), format('0/%s', pg_temp.jid('p1')), 'enqueue: the mark is lowered to the job, in place');

-- 2. A higher priority sorts first: below a mark of priority 0.
INSERT INTO t_job VALUES ('p2-low', pgq.enqueue('p2', '{}'));
SELECT pgq._raise_mark('p2');
INSERT INTO t_job VALUES ('p2-high', pgq.enqueue('p2', '{}', priority => 5));
SELECT is(pg_temp.mark_of('p2'), format('-5/%s', pg_temp.jid('p2-high')), 'a higher priority lowers the mark to it');
SELECT is(pg_temp.stranded(), 0::bigint, 'higher priority: nothing stranded');

-- 3. A job made due earlier (as a test's time travel does): any UPDATE that moves a queued
-- job earlier in claim order.
INSERT INTO t_job VALUES ('p3', pgq.enqueue('p3', '{}'));
SELECT ok(pgq._raise_mark('p3'), 'raised');
UPDATE pgq._jobs SET run_at = run_at - interval '1 day' WHERE id = pg_temp.jid('p3');
SELECT is(pg_temp.mark_of('p3'), format('0/%s', pg_temp.jid('p3')), 'an earlier run_at lowers the mark');

-- 4. pgq.enqueue_batch: one check for the statement, at its first job in claim order.
SELECT pg_temp.mark_ahead('p4');
INSERT INTO t_job VALUES ('p4', (SELECT min(b.id) FROM pgq.enqueue_batch('p4', ARRAY['{}', '{}', '{}']::jsonb[]) AS b (id)));
SELECT is(pg_temp.mark_of('p4'), format('0/%s', pg_temp.jid('p4')), 'enqueue_batch lowers the mark to its first job');
SELECT is(pg_temp.stranded(), 0::bigint, 'enqueue_batch: nothing stranded');

-- 5. A failure with a retry re-queues the job.
INSERT INTO t_job VALUES ('p5', pgq.enqueue('p5', '{}'));
SELECT is((SELECT c.id FROM pgq.claim(:'w', ARRAY['p5']) AS c), pg_temp.jid('p5'), 'p5 claimed');
SELECT pg_temp.mark_ahead('p5');
SELECT is(pgq.fail(:'w', pg_temp.jid('p5'), 'boom', retry_in => interval '0'), 'queued', 'p5 failed, to be retried');
SELECT is(pg_temp.stranded(), 0::bigint, 'fail with a retry: nothing stranded');
SELECT is((SELECT c.id FROM pgq.claim(:'w', ARRAY['p5']) AS c), pg_temp.jid('p5'), 'the retry is claimed');

-- 6. A snooze.
SELECT pg_temp.mark_ahead('p5');
SELECT is(pgq.snooze(:'w', pg_temp.jid('p5'), interval '0'), 'snoozed', 'p5 snoozed');
SELECT is(pg_temp.stranded(), 0::bigint, 'snooze: nothing stranded');
SELECT is((SELECT c.id FROM pgq.claim(:'w', ARRAY['p5']) AS c), pg_temp.jid('p5'), 'the snoozed job is claimed');

-- 7. A heartbeat that does not name a held job releases it.
SELECT pg_temp.mark_ahead('p5');
SELECT is((SELECT count(*) FROM pgq.heartbeat(:'w', ARRAY[]::bigint[])), 0::bigint, 'heartbeat naming nothing');
SELECT is((SELECT j.status FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('p5')), 'queued', 'p5 released');
SELECT is(pg_temp.stranded(), 0::bigint, 'release by heartbeat: nothing stranded');

-- 8. pgq.release.
SELECT is((SELECT c.id FROM pgq.claim(:'w', ARRAY['p5']) AS c), pg_temp.jid('p5'), 'p5 claimed again');
SELECT pg_temp.mark_ahead('p5');
SELECT is(pgq.release(:'w', '{}'), 1, 'pgq.release gives it back');
SELECT is(pg_temp.stranded(), 0::bigint, 'pgq.release: nothing stranded');

-- 9. A reaped worker's job.
SELECT pgq.register_worker('lost', ARRAY['p6']) AS lost \gset
INSERT INTO t_job VALUES ('p6', pgq.enqueue('p6', '{}'));
SELECT is((SELECT c.id FROM pgq.claim(:'lost', ARRAY['p6']) AS c), pg_temp.jid('p6'), 'p6 claimed by a worker about to be lost');
SELECT pg_temp.mark_ahead('p6');
UPDATE pgq._workers SET heartbeat_at = heartbeat_at - interval '1 day' WHERE id = :'lost';
SELECT cmp_ok(pgq.reap(), '>=', 1, 'the lost worker is reaped');
SELECT is(pg_temp.stranded(), 0::bigint, 'reap: nothing stranded');

-- 10. Unregistering a worker releases its jobs.
SELECT pgq.register_worker('leaving', ARRAY['p7']) AS leaving \gset
INSERT INTO t_job VALUES ('p7', pgq.enqueue('p7', '{}'));
SELECT is((SELECT c.id FROM pgq.claim(:'leaving', ARRAY['p7']) AS c), pg_temp.jid('p7'), 'p7 claimed');
SELECT pg_temp.mark_ahead('p7');
SELECT is(pgq.unregister_worker(:'leaving'), 1, 'unregister releases p7');
SELECT is(pg_temp.stranded(), 0::bigint, 'unregister: nothing stranded');

-- 11. pgq.retry of a dead job.
INSERT INTO t_job VALUES ('p8', pgq.enqueue('p8', '{}', max_attempts => 1));
SELECT is((SELECT c.id FROM pgq.claim(:'w', ARRAY['p8']) AS c), pg_temp.jid('p8'), 'p8 claimed');
SELECT is(pgq.fail(:'w', pg_temp.jid('p8'), 'fatal'), 'dead', 'p8 dead');
SELECT pg_temp.mark_ahead('p8');
SELECT is(pgq.retry(ARRAY[pg_temp.jid('p8')]), 1, 'p8 retried');
SELECT is(pg_temp.stranded(), 0::bigint, 'retry of a dead job: nothing stranded');

-- 12. A waiting job whose dependency succeeded: queued with its old run_at.
INSERT INTO t_job VALUES ('p9-first', pgq.enqueue('p9-first', '{}'));
INSERT INTO t_job VALUES ('p9', pgq.enqueue('p9', '{}', depends_on => ARRAY[pg_temp.jid('p9-first')]));
SET CONSTRAINTS ALL IMMEDIATE;
SELECT pgq.register_worker('dep', ARRAY['p9-first']) AS dep \gset
SELECT is((SELECT c.id FROM pgq.claim(:'dep', ARRAY['p9-first']) AS c), pg_temp.jid('p9-first'), 'the dependency claimed');
SELECT pg_temp.mark_ahead('p9');
SELECT is((SELECT count(*) FROM pgq.complete(:'dep', ARRAY[pg_temp.jid('p9-first')])), 1::bigint, 'the dependency succeeded');
SELECT is((SELECT j.status FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('p9')), 'queued', 'p9 released');
SELECT is(pg_temp.stranded(), 0::bigint, 'a released dependent: nothing stranded');

-- 13. dedupe_mode 'replace' raising the priority of a queued job moves it earlier.
INSERT INTO t_job VALUES ('p10', pgq.enqueue('p10', '{}', dedupe_key => 'k'));
UPDATE pgq._jobs SET run_at = run_at - interval '1 hour' WHERE id = pg_temp.jid('p10');
SELECT ok(pgq._raise_mark('p10'), 'raised onto p10');
SELECT is(pg_temp.mark_of('p10'), format('0/%s', pg_temp.jid('p10')), 'the mark is at p10');
SELECT is(pgq.enqueue('p10', '{}', dedupe_key => 'k', priority => 3, dedupe_mode => 'replace'), pg_temp.jid('p10'), 'replaced');
SELECT is(pg_temp.mark_of('p10'), format('-3/%s', pg_temp.jid('p10')), 'replace to a higher priority lowers the mark');

-- 14. An UPDATE that raises the priority of a queued job.
INSERT INTO t_job VALUES ('p11', pgq.enqueue('p11', '{}'));
SELECT ok(pgq._raise_mark('p11'), 'raised');
UPDATE pgq._jobs SET priority = 7 WHERE id = pg_temp.jid('p11');
SELECT is(pg_temp.mark_of('p11'), format('-7/%s', pg_temp.jid('p11')), 'a higher priority lowers the mark');

-- Claims and raises -------------------------------------------------------------------------

-- 15. The claim starts at the mark: a job below it (planted with the triggers off) is not
-- claimed; a low at the job (what a producer records when it cannot lower the mark) lets
-- the claim start there, and the next raise takes the low in.
ALTER TABLE pgq._jobs DISABLE TRIGGER _jobs_marks_insert_trg;
SELECT pg_temp.mark_ahead('v');
INSERT INTO t_job VALUES ('v', pgq.enqueue('v', '{}'));
ALTER TABLE pgq._jobs ENABLE ALWAYS TRIGGER _jobs_marks_insert_trg;
SELECT is((SELECT count(*) FROM pgq.claim(:'w', ARRAY['v'])), 0::bigint, 'the claim does not walk below the mark');
INSERT INTO pgq._mark_lows (entrypoint, neg_priority, run_at, id)
SELECT
    j.entrypoint,
    -j.priority AS neg_priority,
    j.run_at,
    j.id
FROM pgq._jobs AS j WHERE j.id = pg_temp.jid('v');
SELECT is(pg_temp.stranded(), 0::bigint, 'a low covers the job');
SELECT ok(pgq._raise_mark('v'), 'raised');
SELECT is((SELECT count(*) FROM pgq._mark_lows AS l WHERE l.entrypoint = 'v'), 0::bigint, 'the raise took the low in');
SELECT is(pg_temp.stranded(), 0::bigint, 'the mark is at or below the job');
SELECT is((SELECT c.id FROM pgq.claim(:'w', ARRAY['v']) AS c), pg_temp.jid('v'), 'the job is claimed');

-- 16. A raise moves the mark to the first queued job, or to a second ago when that job is
-- more recent (producers whose transactions overlap land above it).
INSERT INTO t_job VALUES ('r-old', pgq.enqueue('r', '{}'));
UPDATE pgq._jobs SET run_at = run_at - interval '1 hour' WHERE id = pg_temp.jid('r-old');
INSERT INTO t_job VALUES ('r-new', pgq.enqueue('r', '{}'));
SELECT ok(pgq._raise_mark('r'), 'raised');
SELECT is(pg_temp.mark_of('r'), format('0/%s', pg_temp.jid('r-old')), 'the mark is the first queued job');
SELECT is((SELECT c.id FROM pgq.claim(:'w', ARRAY['r']) AS c), pg_temp.jid('r-old'), 'r-old claimed');
-- r-new as recent as the clock (this transaction's now() may be more than a second old).
UPDATE pgq._jobs SET run_at = clock_timestamp() WHERE id = pg_temp.jid('r-new');
SELECT ok(pgq._raise_mark('r'), 'raised again');
SELECT ok(
    (
        SELECT
            m.id = 0
            AND m.run_at <= clock_timestamp() - interval '1 second'
            AND m.run_at > clock_timestamp() - interval '1 minute'
        FROM pgq._marks AS m WHERE m.entrypoint = 'r'
    ),
    'a recent first job: the mark trails by a second'
);
SELECT is(pg_temp.stranded(), 0::bigint, 'raises: nothing stranded');

-- 17. A verification (pgq.claim runs it every 30 s) walks from the front: a queued job below
-- the mark and its lows (which no producer leaves; planted here with the triggers off) gets
-- a low, with a warning.
ALTER TABLE pgq._jobs DISABLE TRIGGER _jobs_marks_insert_trg;
SELECT pg_temp.mark_ahead('p12');
INSERT INTO t_job VALUES ('p12', pgq.enqueue('p12', '{}'));
ALTER TABLE pgq._jobs DISABLE TRIGGER _jobs_marks_update_trg;
UPDATE pgq._jobs SET run_at = run_at - interval '1 hour' WHERE id = pg_temp.jid('p12');
ALTER TABLE pgq._jobs ENABLE ALWAYS TRIGGER _jobs_marks_update_trg;
ALTER TABLE pgq._jobs ENABLE ALWAYS TRIGGER _jobs_marks_insert_trg;
SELECT ok(pgq._raise_mark('p12'), 'a raise from the mark');
SELECT is(pg_temp.stranded(), 1::bigint, 'a raise from the mark does not look below it');
SET client_min_messages = error;  -- the WARNING (asserted in tests/py/sql/test_claim_marks.py)
SELECT lives_ok($$SELECT pgq._verify_mark('p12')$$, 'a verification');
RESET client_min_messages;
SELECT is(pg_temp.stranded(), 0::bigint, 'the verification repaired it');
SELECT is(
    (SELECT array_agg(l.id) FROM pgq._mark_lows AS l WHERE l.entrypoint = 'p12'),
    ARRAY[pg_temp.jid('p12')],
    'with a low at the job'
);

SELECT * FROM finish();
ROLLBACK;
