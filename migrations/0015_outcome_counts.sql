-- Cumulative counts of finished jobs by entrypoint and outcome, for monitoring (counters that
-- any scrape reads the same and never lower): kept by a statement trigger on pgq._outcomes
-- (sql/functions/_count_outcomes.sql, created by sql/setup.sql), read through the view
-- pgq.outcome_totals. A new table only: workers of the previous release keep running, their
-- outcomes are counted from the upgrade on. The counts start at zero (the outcome log
-- before the upgrade is not replayed: a Prometheus counter may start anywhere).
CREATE TABLE pgq._outcome_counts (
    entrypoint text NOT NULL,
    outcome text NOT NULL,
    shard smallint NOT NULL,
    jobs bigint NOT NULL DEFAULT 0,
    wait_seconds float8 NOT NULL DEFAULT 0,
    run_seconds float8 NOT NULL DEFAULT 0,
    PRIMARY KEY (entrypoint, outcome, shard)
) WITH (fillfactor = 50);
