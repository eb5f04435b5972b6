"""Throwaway databases for tests: a template with pgq installed, built once per test
process, and a clone of it per test (CREATE DATABASE ... TEMPLATE copies files: far faster
than installing).

Every test process (each pytest-xdist worker too) has a run id of its own, part of every
database it creates (`<prefix>_<run>_tpl`, `<prefix>_<run>_<n>`), and holds a session
advisory lock named after it on the admin connection while it runs. Databases of a run
whose lock is free are leftovers of a run that died before dropping them: the next run
drops them. Runs in progress, on this machine or another, are left alone.
"""

from __future__ import annotations

import itertools
import re
import uuid
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from .. import migrate

APPLICATION_NAME = "pgq.testing"
_LOCK = "SELECT pg_advisory_lock(hashtextextended('pgq.testing:' || %s::text, 0))"
_TRY = "SELECT pg_try_advisory_lock(hashtextextended('pgq.testing:' || %s::text, 0)) AS free"
_UNLOCK = "SELECT pg_advisory_unlock(hashtextextended('pgq.testing:' || %s::text, 0))"


class Databases:
    """The databases of one test process on the server of `admin_dsn` (a role that may
    create databases, connected to a database that stays, e.g. postgres)."""

    def __init__(self, admin_dsn: str, prefix: str = "pgqtest") -> None:
        if not prefix.replace("_", "").isalnum() or not prefix.isascii() or len(prefix) > 40:
            raise ValueError(f"database prefix {prefix!r}: use up to 40 letters, digits and _")
        self.admin_dsn = admin_dsn
        self.prefix = prefix
        self.run = uuid.uuid4().hex[:10]
        self.template = f"{prefix}_{self.run}_tpl"
        self._numbers = itertools.count(1)
        self._admin: psycopg.Connection[Any] | None = None

    def dsn(self, name: str) -> str:
        return make_conninfo(self.admin_dsn, dbname=name)

    def open(self) -> None:
        """Take this run's lock, drop the leftovers of dead runs, build the template."""
        self._connect()
        self.drop_leftovers()
        self._execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.template)))
        try:
            migrate.install(self.dsn(self.template), cron=False)
        except BaseException:
            self.drop(self.template)
            raise

    def close(self) -> None:
        if self._admin is None:
            return
        try:
            self.drop_leftovers(run=self.run)
        finally:
            self._admin.close()  # frees the lock
            self._admin = None

    def create(self) -> str:
        """A new database cloned from the template; returns its name."""
        name = f"{self.prefix}_{self.run}_{next(self._numbers)}"
        self._execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(self.template)
            )
        )
        return name

    def drop(self, name: str) -> None:
        self._execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def drop_leftovers(self, run: str | None = None) -> list[str]:
        """Drop the databases of `run` (default: of every run whose lock is free)."""
        names = [
            row[0]
            for row in self._execute(
                "SELECT datname FROM pg_database WHERE left(datname, length(%s)) = %s ORDER BY datname",
                (self.prefix + "_", self.prefix + "_"),
            )
        ]
        ours = re.compile(rf"{re.escape(self.prefix)}_([0-9a-f]{{10}})_(?:tpl|[0-9]+)")
        dropped = []
        for name in names:
            match = ours.fullmatch(name)
            if match is None:  # not made by this module: never touched
                continue
            owner = match.group(1)
            if run is not None and owner != run:
                continue
            if run is None and not self._dead(owner):
                continue
            self.drop(name)
            dropped.append(name)
        return dropped

    def _dead(self, run: str) -> bool:
        if run == self.run:
            return False
        row = self._execute(_TRY, (run,)).fetchone()
        if row is None or not row[0]:
            return False
        self._execute(_UNLOCK, (run,))
        return True

    def _connect(self) -> None:
        # Named, so that a test suite that restarts the server can tell this idle session
        # from a client that would mind (tests/py/support/cluster.py does).
        self._admin = psycopg.connect(self.admin_dsn, autocommit=True, application_name=APPLICATION_NAME)
        self._admin.execute(_LOCK, (self.run,))

    def _execute(self, statement: sql.Composable | str, params: Any = None) -> psycopg.Cursor[Any]:
        assert self._admin is not None
        try:
            return self._admin.execute(statement, params)
        except psycopg.OperationalError:
            if not self._admin.broken:
                raise
            # The server restarted under us (a test of restarts): connect and lock again.
            self._admin.close()
            self._connect()
            return self._admin.execute(statement, params)
