"""Which database to talk to: --dsn, else PGQ_DSN, else libpq's own environment."""

from __future__ import annotations

import os


def resolve_dsn(dsn: str | None = None) -> str:
    """An explicit DSN wins, then $PGQ_DSN; an empty string lets libpq read PGHOST etc."""
    if dsn:
        return dsn
    return os.environ.get("PGQ_DSN", "")
