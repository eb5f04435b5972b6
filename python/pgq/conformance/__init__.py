"""The worker-protocol conformance suite: `pgq conformance --worker "CMD"`.

It starts the worker under test as CMD (environment PGQ_DSN and PGQ_ENTRYPOINTS), drives it
through the scenarios of docs/protocol.md on entrypoints of its own, audits the database
after each, prints one line per scenario and cleans up. The handler contract (payload
`op`s) is in ops.py; handlers.py implements it for `pgq worker`.

Modules: ops (the handler contract), harness (worker processes, the database, waiting),
audit (what the database must show), scenarios (the scenarios), runner (running them).
"""

from .runner import run_suite

__all__ = ["run_suite"]
