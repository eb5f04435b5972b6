"""Helpers of the test suite, imported as `support.<module>` (tests/py, the directory above,
is on sys.path: pytest puts the root conftest.py's directory there).

Some of them run in child processes with tests/py on their PYTHONPATH: `pgq worker
support.worker_app:worker` (workers.py), `support.soak_app:worker` (soak.py),
`support.upgrade_app:worker` (test_rolling_upgrade.py, also under the pgq of older releases),
and conformance_broken.py by its path. This file imports nothing, so that a worker of any
release can import them.
"""
