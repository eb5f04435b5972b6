"""The claim mark's invariant (pgq._raise_mark, docs/held-snapshot.md) as one query, for the
tests that check it: the ids of queued jobs that sort before both their entrypoint's mark
and all of its lows (NULL when none, as it must be; claims would pass them over). Keyed
entrypoints are left out: their claims ignore the mark (one may be left from before)."""

BELOW_MARK = (
    "SELECT array_agg(j.id ORDER BY j.id) FROM pgq._jobs AS j"
    " JOIN pgq._marks AS m ON m.entrypoint = j.entrypoint"
    " LEFT JOIN pgq._queues AS q ON q.entrypoint = j.entrypoint"
    " WHERE j.status = 'queued' AND NOT coalesce(q.keyed, FALSE)"
    " AND ROW(-j.priority::bigint, j.run_at, j.id) < ROW(m.neg_priority, m.run_at, m.id)"
    " AND NOT EXISTS (SELECT 1 FROM pgq._mark_lows AS l WHERE l.entrypoint = j.entrypoint"
    " AND ROW(l.neg_priority, l.run_at, l.id) <= ROW(-j.priority::bigint, j.run_at, j.id))"
)
