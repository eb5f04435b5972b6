"""One meaning of "attempt" everywhere (attempts count from 1), and the reason a handler is
told for each delivery (first, retry, snooze, lost), through real `pgq worker` processes.

The older claim forms keep what their workers were written for: pgq.claim without protocol
(0.1.0) and with protocol => 2 (0.2.0) count failures from 0.
"""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
from click.testing import CliRunner

from pgq.cli.main import main
from support.workers import execute, ledger_lines, scalar, wait_until

EP = "attempts"


def _runs(ledger: Path, job_id: int) -> list[str]:
    """The (attempt, reason) of each run of a job, in order: ["a1:first", "a2:retry", ...]."""
    rows = sorted((r for r in ledger_lines(ledger) if r[0] == job_id), key=lambda r: r[4])
    return [r[3] for r in rows]


def _history(dsn: str, job_id: int) -> list[tuple[str, int]]:
    return [
        (outcome, attempt)
        for outcome, attempt in execute(
            dsn,
            "SELECT outcome, attempt FROM pgq.outcomes WHERE job_id = %s ORDER BY finished_at, attempt",
            (job_id,),
        )
    ]


def test_attempts_count_from_one_everywhere_and_each_delivery_says_why(dsn: str, ledger: Path, spawn) -> None:
    scalar(
        dsn,
        "SELECT pgq.configure(%s, max_attempts => 10, backoff_base => '10 milliseconds',"
        " backoff_max => '50 milliseconds', lease => '2 seconds')",
        (EP,),
    )
    flaky = scalar(dsn, "SELECT pgq.enqueue(%s, '{\"fail_times\": 2}')", (EP,))
    doomed = scalar(dsn, "SELECT pgq.enqueue(%s, '{\"fail_times\": 100}', max_attempts => 3)", (EP,))
    snoozer = scalar(dsn, "SELECT pgq.enqueue(%s, '{\"snooze\": true}')", (EP,))

    # Before any run: the next run is attempt 1, in the view, pgq.job and `pgq job`.
    assert scalar(dsn, "SELECT attempt FROM pgq.jobs WHERE id = %s", (flaky,)) == 1
    assert scalar(dsn, "SELECT (pgq.job(%s) ->> 'attempt')::int", (flaky,)) == 1
    shown = CliRunner().invoke(main, ["job", "--dsn", dsn, str(flaky)])
    assert shown.exit_code == 0, shown.output
    assert re.search(r"attempt +1 of 10\n", shown.output), shown.output

    first = spawn()
    wait_until(
        lambda: (
            scalar(dsn, "SELECT count(*) FROM pgq.jobs WHERE entrypoint = %s", (EP,)) == 1
            and scalar(dsn, "SELECT status FROM pgq.jobs WHERE entrypoint = %s", (EP,)) == "dead"
        ),
        60,
        "the flaky and the snoozing job to succeed, the doomed one to die",
    )

    # Failed twice, then succeeded: attempts 1, 2, 3; the handler, the log and the history agree.
    assert _runs(ledger, flaky) == ["a1:first", "a2:retry", "a3:retry"]
    assert _history(dsn, flaky) == [("failed", 1), ("failed", 2), ("succeeded", 3)]
    story = scalar(dsn, "SELECT pgq.job(%s)", (flaky,))
    assert (story["status"], story["attempt"]) == ("succeeded", 3)
    assert [a["attempt"] for a in story["attempts"]] == [1, 2]

    # max_attempts => 3 is three runs, then dead; a dead job shows its last attempt.
    assert _runs(ledger, doomed) == ["a1:first", "a2:retry", "a3:retry"]
    assert _history(dsn, doomed) == [("failed", 1), ("failed", 2), ("failed", 3)]
    assert execute(dsn, "SELECT status, attempt, max_attempts FROM pgq.jobs WHERE id = %s", (doomed,)) == [
        ("dead", 3, 3)
    ]
    assert scalar(dsn, "SELECT (pgq.job(%s) ->> 'attempt')::int", (doomed,)) == 3
    # pgq.retry starts it again at attempt 1 (read in the retry's transaction: once it
    # commits, the running worker may claim and fail it again at once).
    with psycopg.connect(dsn) as c, c.transaction():
        assert c.execute("SELECT pgq.retry(ARRAY[%s]::bigint[])", (doomed,)).fetchone()[0] == 1
        assert c.execute("SELECT attempt FROM pgq.jobs WHERE id = %s", (doomed,)).fetchone()[0] == 1
    wait_until(lambda: len(_runs(ledger, doomed)) == 4, 30, "the retried job's run")
    assert _runs(ledger, doomed)[3] == "a1:retry"
    scalar(dsn, "SELECT pgq.cancel(ARRAY[%s]::bigint[])", (doomed,))

    # A snooze spends no attempt: both runs are attempt 1, the second one says why.
    assert _runs(ledger, snoozer) == ["a1:first", "a1:snooze"]
    assert _history(dsn, snoozer) == [("snoozed", 1), ("succeeded", 1)]

    # A worker lost while running a job: its next delivery says its handler may have run.
    hung = scalar(dsn, "SELECT pgq.enqueue(%s, '{\"hang\": true}')", (EP,))
    wait_until(lambda: _runs(ledger, hung) == ["a1:first"], 30, "the hanging job's first run")
    first.kill()
    second = spawn()
    wait_until(
        lambda: scalar(dsn, "SELECT pgq.job_status(%s)", (hung,)) == "succeeded", 60, "the re-delivery"
    )
    assert _runs(ledger, hung) == ["a1:first", "a1:lost"]
    assert _history(dsn, hung) == [("succeeded", 1)]
    assert second.terminate() == 0

    # The default log: one line per failure, with the attempt counted from 1; no line for a
    # re-delivery that a failure or a snooze explains; a warning for one after a lost worker.
    log = first.log()
    assert re.search(
        rf"WARNING pgq\.worker\.jobs: job {flaky} \({EP}\) failed \(retried later\) on attempt 1,", log
    )
    assert re.search(rf"job {flaky} \({EP}\) failed \(retried later\) on attempt 2,", log)
    assert re.search(rf"job {doomed} \({EP}\) failed \(dead\) on attempt 3,", log)
    assert not re.search(rf"job ({flaky}|{doomed}|{snoozer}) \({EP}\): delivery", log), log
    assert re.search(
        rf"WARNING pgq\.worker: job {hung} \({EP}\): delivery 2 after a lost delivery", second.log()
    )


def test_the_older_claim_forms_keep_counting_failures_from_zero(dsn: str) -> None:
    """0.1.0 and 0.2.0 workers run against this schema during an upgrade: their claim rows
    keep the attempt they were written for (failures so far); pgq.claim_v3 counts from 1."""
    ep = "old_forms"
    with psycopg.connect(dsn, autocommit=True) as conn:
        worker = conn.execute("SELECT pgq.register_worker('old-forms', ARRAY[%s])", (ep,)).fetchone()[0]
        forms = {
            "0.1.0": "SELECT id, attempt, deliveries FROM pgq.claim(%s, ARRAY[%s])",
            "0.2.0": "SELECT id, attempt, deliveries FROM pgq.claim(%s, ARRAY[%s], 1, protocol => 2)",
            "0.3.0": "SELECT id, attempt, deliveries FROM pgq.claim_v3(%s, ARRAY[%s])",
        }
        seen = {}
        for release, query in forms.items():
            job_id = conn.execute("SELECT pgq.enqueue(%s)", (ep,)).fetchone()[0]
            runs = []
            for _ in range(2):
                (claimed, attempt, deliveries) = conn.execute(query, (worker, ep)).fetchone()
                assert claimed == job_id
                runs.append((attempt, deliveries))
                if len(runs) == 1:
                    conn.execute("SELECT pgq.fail(%s, %s, 'boom', retry_in => '0 seconds')", (worker, job_id))
            conn.execute("SELECT pgq.complete(%s, ARRAY[%s]::bigint[])", (worker, job_id))
            seen[release] = runs
        assert seen == {"0.1.0": [(0, 1), (1, 2)], "0.2.0": [(0, 1), (1, 2)], "0.3.0": [(1, 1), (2, 2)]}
