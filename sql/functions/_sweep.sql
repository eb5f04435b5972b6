-- pgq._sweep(with_prune): the periodic maintenance, each task in a subtransaction of its
-- own so that one failing task neither fails the caller nor undoes the others (it is
-- reported as a WARNING): the reap (pgq._reap, thorough when with_prune: heartbeats run
-- the light form, pgq.sweep the whole), pgq.run_schedules (an index lookup when nothing
-- is due), and, when with_prune, pgq.prune if the last prune is over two hours old
-- (pg_cron prunes hourly, so with pg_cron the workers never do).
-- A statement_timeout (or a cancel) that strikes inside a task is caught like any failure
-- (WHEN OTHERS does not catch query_canceled: it is named), so it cannot fail a heartbeat;
-- once the statement is past three quarters of its timeout, the tasks not begun are left
-- to the next call.
-- Returns the number of jobs pgq.reap acted on. with_prune defaults to FALSE: 0.1.0's
-- heartbeat calls pgq._sweep(), and one of its calls under way while an upgrade commits
-- then looks the function up again.
CREATE OR REPLACE FUNCTION pgq._sweep(with_prune boolean DEFAULT FALSE)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_reaped integer := 0;
    v_until timestamptz := pgq._sweep_deadline(0.75);
BEGIN
    BEGIN
        v_reaped := pgq._reap(with_prune);
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        RAISE WARNING 'pgq: reap failed: % (%)', sqlerrm, sqlstate;
    END;
    IF clock_timestamp() >= v_until THEN
        RETURN v_reaped;
    END IF;
    BEGIN
        PERFORM pgq.run_schedules();
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        RAISE WARNING 'pgq: run_schedules failed: % (%)', sqlerrm, sqlstate;
    END;
    IF with_prune AND clock_timestamp() < v_until AND NOT EXISTS (
        SELECT 1 FROM pgq._maintenance AS m
        WHERE m.task = 'prune' AND m.last_run > now() - interval '2 hours'
    ) THEN
        BEGIN
            PERFORM pgq.prune();
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            RAISE WARNING 'pgq: prune failed: % (%)', sqlerrm, sqlstate;
        END;
    END IF;
    RETURN v_reaped;
END
$$;
