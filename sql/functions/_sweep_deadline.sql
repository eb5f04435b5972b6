-- pgq._sweep_deadline(share): the time after which maintenance running inside the current
-- statement starts no new batch: the statement's start plus share of its statement_timeout
-- (a DBA's or a managed service's setting, often on the role), or the transaction's start
-- plus share of its transaction_timeout (PostgreSQL 17 and newer: it ends the session, which
-- no subtransaction can catch), whichever comes first; infinity when neither is set. Keeps the rest of the statement (a heartbeat's own work, a sweep's other tasks)
-- inside the timeout, so that maintenance that is due never cancels its caller.
CREATE OR REPLACE FUNCTION pgq._sweep_deadline(share double precision)
RETURNS timestamptz
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT least(
        CASE WHEN s.span > interval '0' THEN statement_timestamp() + s.span * share ELSE 'infinity' END,
        CASE WHEN t.span > interval '0' THEN transaction_timestamp() + t.span * share ELSE 'infinity' END
    )
    FROM (SELECT current_setting('statement_timeout')::interval AS span) AS s,
        -- NULL before PostgreSQL 17, which has no transaction_timeout.
        (SELECT coalesce(current_setting('transaction_timeout', TRUE), '0')::interval AS span) AS t
$$;

COMMENT ON FUNCTION pgq._sweep_deadline(double precision) IS
'Internal: when maintenance inside this statement must stop starting batches (a share of statement_timeout or transaction_timeout).';
