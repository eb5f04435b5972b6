import pytest

import pgq
from pgq.testing import assert_enqueued, assert_not_enqueued, drain

worker = pgq.Worker()  # the application's worker: its DSN comes from $PGQ_DSN


@worker.entrypoint("signup")
def signup(job: pgq.Job) -> None:
    with pgq.Client() as client:
        client.enqueue("welcome_email", {"to": job.payload["email"], "lang": "en"})


@worker.entrypoint("welcome_email")
async def welcome_email(job: pgq.Job) -> dict:
    return {"sent_to": job.payload["to"]}


@pytest.fixture(autouse=True)
def database(pgq_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGQ_DSN", pgq_dsn)  # the code under test finds the test's database


def test_signup_sends_a_welcome_email(pgq_client: pgq.Client) -> None:
    pgq_client.enqueue("signup", {"email": "a@example.com"})
    assert_enqueued(pgq_client, "signup", payload={"email": "a@example.com"})

    result = drain(worker)  # runs signup, then the email job it enqueued

    assert result.counts == {"succeeded": 2}
    assert_not_enqueued(pgq_client, "welcome_email")
    [email] = pgq_client.outcomes("welcome_email")
    assert email.result == {"sent_to": "a@example.com"}


def test_a_failing_handler_is_retried_until_dead(pgq_client: pgq.Client) -> None:
    job_id = pgq_client.enqueue("welcome_email", {}, max_attempts=2)  # no "to": KeyError

    result = drain(worker, run_future=True, raise_errors=False)

    assert result.failed == 2 and result.dead == [job_id]
    assert isinstance(result.failures[0].exception, KeyError)
