"""A PgBouncer of a test's own: transaction pooling on a free loopback port, in front of
the test cluster, with the admin console (PAUSE, RESUME) open to postgres."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict

from conftest import ADMIN_DSN
from support.workers import wait_until

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


@contextlib.contextmanager
def pgbouncer() -> Iterator[int]:
    """Run a PgBouncer until the block ends; yields its port."""
    if not os.path.exists(PGBOUNCER):
        pytest.fail("pgbouncer is not installed (make deps installs it)")
    server = conninfo_to_dict(ADMIN_DSN)
    # Not under pytest's private tmp: as root, pgbouncer runs as the postgres user.
    work = Path(tempfile.mkdtemp(prefix="pgq-pgbouncer-"))
    work.chmod(0o777)
    port = free_port()
    (work / "userlist.txt").write_text('"postgres" ""\n')
    (work / "pgbouncer.ini").write_text(
        f"""[databases]
* = host={server.get("host", "127.0.0.1")} port={server.get("port", 5432)}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {work}/userlist.txt
admin_users = postgres
pool_mode = transaction
max_client_conn = 200
default_pool_size = 20
ignore_startup_parameters = extra_float_digits,options
logfile = {work}/pgbouncer.log
pidfile = {work}/pgbouncer.pid
"""
    )
    for f in work.iterdir():
        f.chmod(0o666)
    cmd = [PGBOUNCER, str(work / "pgbouncer.ini")]
    if os.geteuid() == 0:
        cmd[1:1] = ["-u", "postgres"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: accepts(port), 15, "pgbouncer to listen")
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)
