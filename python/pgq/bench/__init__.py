"""`pgq bench`: the benchmark, with raw-SQL and PgQueuer baselines in the same run."""
