"""Which database to talk to: --dsn, else PGQ_DSN, else libpq's own environment."""

from __future__ import annotations

import os

import psycopg
from psycopg.conninfo import conninfo_to_dict

# What a worker's connections use unless its DSN says otherwise, so that a database gone
# silent (a failover that left the old primary's address unanswered, a dropped NAT
# entry) is found dead within about 30 s. Without them a connection waiting for a reply
# from a silent server is probed only after the system's two hours (a request not yet
# acknowledged is retransmitted for about 15 minutes), and the worker neither works nor
# stops on a first SIGTERM meanwhile. libpq applies all but connect_timeout to TCP
# connections only, and tcp_user_timeout only with keepalives on.
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


def tcp_defaults(dsn: str, *, user_timeout: bool = True) -> dict[str, str]:
    """The TCP_DEFAULTS that `dsn` (and $PGCONNECT_TIMEOUT) leave unset; none when a
    service is named (in the DSN or $PGSERVICE): its file says. Without `user_timeout`
    for connections that handlers use: Linux also drops a connection whose peer keeps its
    receive window closed that long (a COPY into a table that waits for a lock), and
    libpq before 12 does not know the option at all."""
    try:
        given = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return {}  # connecting will say what is wrong with it
    if "service" in given or os.environ.get("PGSERVICE"):
        return {}
    unset = TCP_DEFAULTS.keys() - given.keys()
    if os.environ.get("PGCONNECT_TIMEOUT"):
        unset.discard("connect_timeout")
    if not user_timeout or psycopg.pq.version() < 120000:
        unset.discard("tcp_user_timeout")
    return {key: value for key, value in TCP_DEFAULTS.items() if key in unset}
