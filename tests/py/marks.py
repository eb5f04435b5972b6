"""The claim mark's invariant (pgq._raise_mark, docs/held-snapshot.md) as one query, for the
tests that check it: the ids of queued jobs that sort before their entrypoint's mark in
force (NULL when none, as it must be; a claim would pass them over)."""

BELOW_MARK = (
    "SELECT array_agg(j.id ORDER BY j.id) FROM pgq._jobs AS j"
    " JOIN pgq._marks AS m ON m.entrypoint = j.entrypoint AND m.epoch = pgq._mark_epoch()"
    " WHERE j.status = 'queued'"
    " AND ROW(-j.priority::bigint, j.run_at, j.id) < ROW(m.neg_priority, m.run_at, m.id)"
)
