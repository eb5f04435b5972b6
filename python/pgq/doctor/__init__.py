"""`pgq doctor`: inspect a live installation; one line per problem, each with its fix.

Every check is a function of a connection (autocommit) that returns the problems it found
as (problem, fix) pairs; `diagnose` runs them all. A check that cannot run (e.g. the role
may not read what it needs) is a problem too, so a clean report means "all checked".

The checks live by area: install.py (versions, stale objects, roles and grants), sweeps.py
(pg_cron and the sweeps), health.py (workers, vacuum, bloat, backlogs, partitions); base.py
holds what they share. Doctor only reads: no check may change anything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import psycopg

from ..preflight import installed_version
from .base import Found, Limits
from .health import (
    check_backlog,
    check_bloat,
    check_index_bloat,
    check_partitions,
    check_workers,
    check_xmin_horizon,
)
from .install import check_roles_and_grants, check_stale_objects, check_version
from .sweeps import check_sweeps

__all__ = ["CHECKS", "Limits", "Problem", "check_roles_and_grants", "diagnose"]


@dataclass(frozen=True)
class Problem:
    check: str
    problem: str
    fix: str

    def __str__(self) -> str:
        return f"{self.check}: {self.problem} -> {self.fix}"


CHECKS: dict[str, Callable[..., Found]] = {
    "version": check_version,
    "stale objects": check_stale_objects,
    "roles and grants": check_roles_and_grants,
    "sweeps": check_sweeps,
    "workers": check_workers,
    "xmin horizon": check_xmin_horizon,
    "bloat": check_bloat,
    "index bloat": check_index_bloat,
    "backlog": check_backlog,
    "partitions": check_partitions,
}


def diagnose(dsn: str, limits: Limits | None = None) -> list[Problem]:
    limits = limits or Limits()
    problems: list[Problem] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name, check in CHECKS.items():
            try:
                found = check(conn, limits, dsn) if check is check_sweeps else check(conn, limits)
            except psycopg.Error as exc:
                found = [
                    (
                        f"could not run: {' '.join(str(exc).split())}",
                        "run `pgq doctor` as pgq's owner or a superuser",
                    )
                ]
            problems += [Problem(name, problem, fix) for problem, fix in found]
            if name == "version" and found and installed_version(conn) is None:
                break
    return problems
