"""pgq.worker: the worker, as parts a maintainer can hold.

What it is for: exporting the public Worker (and run_on, EVENT_LOOPS for the CLI and tests).
Each module has one job: worker (the public Worker), session (one run's parts wired and its
shutdown), protocol (every statement), ledger (what the database may hold as ours),
claimer (slots and claims), executor (runs one delivery), settler (carries out the
settlements), lease (the heartbeat), listener (LISTEN), connection (the heartbeat's own
connection), wakeups (the events between parts).
What it must never do: hold logic of its own.
"""

from .worker import EVENT_LOOPS, Worker, run_on

__all__ = ["EVENT_LOOPS", "Worker", "run_on"]
