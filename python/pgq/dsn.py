"""Which database to talk to: --dsn, else PGQ_DSN, else libpq's own environment."""

from __future__ import annotations

import os

import psycopg
from psycopg.conninfo import conninfo_to_dict

# What a worker's connections use unless its DSN (or a service file) says otherwise, so
# that a database gone silent (a failover that left the old primary's address
# unanswered, a dropped NAT entry) is found dead within about 30 s. Without them libpq
# probes an idle connection after the system's two hours, and a statement in flight
# waits until TCP gives up (about 15 minutes on Linux), the worker neither working nor
# stopping on a first SIGTERM meanwhile. libpq applies them to TCP connections only.
TCP_DEFAULTS = {
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
    "tcp_user_timeout": "30000",  # ms that sent data may stay unacknowledged
    "connect_timeout": "10",
}


def resolve_dsn(dsn: str | None = None) -> str:
    """An explicit DSN wins, then $PGQ_DSN; an empty string lets libpq read PGHOST etc."""
    if dsn:
        return dsn
    return os.environ.get("PGQ_DSN", "")


def tcp_defaults(dsn: str) -> dict[str, str]:
    """The TCP_DEFAULTS that `dsn` (and $PGCONNECT_TIMEOUT) leave unset; none for a DSN
    that names a service, whose file may set them."""
    try:
        given = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return {}  # connecting will say what is wrong with it
    if "service" in given or os.environ.get("PGSERVICE"):
        return {}
    if os.environ.get("PGCONNECT_TIMEOUT"):
        given["connect_timeout"] = os.environ["PGCONNECT_TIMEOUT"]
    return {key: value for key, value in TCP_DEFAULTS.items() if key not in given}
