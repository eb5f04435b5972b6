#!/usr/bin/env bash
# The project's own throwaway PostgreSQL cluster: its own data directory, port and socket
# under .pgdata/ in the repo (or $PGQ_PGDATA), pg_cron preloaded, trust auth on loopback only.
# It never touches a system cluster. Usage: scripts/db.sh start|stop|restart|crash|status|dsn
# (restart stops with -m fast; crash stops with -m immediate, as a power cut would, then starts).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
PGQ_PORT=${PGQ_PORT:-54329}
PGVER=${PGVER:-15}
BIN=/usr/lib/postgresql/$PGVER/bin
# PGQ_PGDATA moves the whole cluster (tests that restart PostgreSQL can use one of their own).
base=${PGQ_PGDATA:-$top/.pgdata}
data=$base/data
sock=$base/run
log=$base/server.log
superuser=postgres

# initdb refuses to run as root: then the cluster belongs to the unprivileged `postgres` user.
as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

# The postgres user must be able to reach .pgdata; as root, open the path to it for traversal.
open_path() {
    [ "$(id -u)" = 0 ] || return 0
    local d=$top
    while [ "$d" != / ]; do
        chmod o+x "$d" 2>/dev/null || true
        d=$(dirname "$d")
    done
}

init() {
    [ -f "$data/PG_VERSION" ] && return 0
    mkdir -p "$base" "$sock"
    if [ "$(id -u)" = 0 ]; then
        open_path
        chown -R postgres: "$base"
    fi
    as_owner "$BIN/initdb" -D "$data" -U "$superuser" -A trust -E UTF8 --locale=C.UTF-8 >"$base/initdb.log"
    cat >>"$data/postgresql.conf" <<CONF

# --- pgq development cluster ---
port = $PGQ_PORT
listen_addresses = '127.0.0.1'
unix_socket_directories = '$sock'
shared_preload_libraries = 'pg_cron'
cron.database_name = 'postgres'
cron.use_background_workers = on
max_worker_processes = 32
max_connections = 200
shared_buffers = 512MB
fsync = on
synchronous_commit = on
log_min_messages = warning
log_line_prefix = '%m [%p] %d '
CONF
    # Trust, but only on the loopback address and the project's own socket.
    cat >"$data/pg_hba.conf" <<HBA
local   all all                trust
host    all all 127.0.0.1/32   trust
HBA
}

running() {
    as_owner "$BIN/pg_ctl" -D "$data" status >/dev/null 2>&1
}

start() {
    init
    if running; then
        return 0
    fi
    as_owner "$BIN/pg_ctl" -D "$data" -l "$log" -w -t 60 start >/dev/null
    # pg_cron's own schema lives in cron.database_name.
    "$BIN/psql" -qX -h 127.0.0.1 -p "$PGQ_PORT" -U "$superuser" -d postgres \
        -c 'CREATE EXTENSION IF NOT EXISTS pg_cron' >/dev/null
    echo "PostgreSQL running: $(dsn)"
}

stop() {
    if [ -f "$data/PG_VERSION" ] && running; then
        as_owner "$BIN/pg_ctl" -D "$data" -m fast -w stop >/dev/null
        echo "PostgreSQL stopped"
    fi
}

crash() {
    if [ -f "$data/PG_VERSION" ] && running; then
        as_owner "$BIN/pg_ctl" -D "$data" -m immediate -w stop >/dev/null
    fi
    start
}

dsn() {
    echo "postgresql://$superuser@127.0.0.1:$PGQ_PORT/postgres"
}

case "${1:-start}" in
    start) start ;;
    stop) stop ;;
    restart) stop; start ;;
    crash) crash ;;
    status) if running; then echo "running: $(dsn)"; else echo "stopped"; exit 1; fi ;;
    dsn) dsn ;;
    *) echo "usage: $0 start|stop|restart|crash|status|dsn" >&2; exit 2 ;;
esac
