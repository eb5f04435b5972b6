#!/usr/bin/env bash
# The project's own throwaway PostgreSQL cluster: its own data directory, port and socket
# under .pgdata/ in the repo (or $PGQ_PGDATA), pg_cron preloaded, trust auth on loopback only.
# It never touches a system cluster. Usage: scripts/db.sh start|stop|restart|crash|status|dsn
# (restart stops with -m fast; crash stops with -m immediate, as a power cut would, then starts).
# PGQ_PG_MAJOR (default 15, Debian's server with pg_cron) picks another major version: its
# server comes from scripts/pg-servers.sh (.pg/<major>/, no pg_cron), its cluster lives in
# .pgdata-<major>/ unless PGQ_PGDATA says otherwise.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
PGQ_PORT=${PGQ_PORT:-54329}
major=${PGQ_PG_MAJOR:-${PGVER:-15}}
# The client (psql) is always Debian's 15: the npm servers ship none.
PSQL=/usr/lib/postgresql/15/bin/psql
if [ "$major" = 15 ]; then
    BIN=/usr/lib/postgresql/15/bin
    default_base=$top/.pgdata
else
    BIN=$("$top/scripts/pg-servers.sh" bin "$major")
    default_base=$top/.pgdata-$major
    if [ ! -x "$BIN/postgres" ]; then
        echo "PostgreSQL $major is not installed in $(dirname "$BIN"): run make pg-servers" >&2
        exit 1
    fi
fi
# pg_cron only where the server has it (Debian's postgresql-15-cron; no npm server has it).
has_cron() {
    [ -f "$BIN/../lib/pg_cron.so" ] || [ -f "$BIN/../lib/postgresql/pg_cron.so" ]
}
# PGQ_PGDATA moves the whole cluster (tests that restart PostgreSQL can use one of their own).
base=${PGQ_PGDATA:-$default_base}
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
    local cron_conf="# no pg_cron for this server: workers run the sweeps themselves"
    if has_cron; then
        cron_conf="shared_preload_libraries = 'pg_cron'
cron.database_name = 'postgres'
cron.use_background_workers = on"
    fi
    cat >>"$data/postgresql.conf" <<CONF

# --- pgq development cluster (PostgreSQL $major) ---
port = $PGQ_PORT
listen_addresses = '127.0.0.1'
unix_socket_directories = '$sock'
$cron_conf
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
    # A cluster of another major (PGQ_PGDATA reused across PGQ_PG_MAJOR) would not start.
    if [ "$(cat "$data/PG_VERSION")" != "$major" ]; then
        echo "$data holds a PostgreSQL $(cat "$data/PG_VERSION") cluster, not $major:" \
            "set PGQ_PGDATA to another directory" >&2
        exit 1
    fi
    if running; then
        return 0
    fi
    as_owner "$BIN/pg_ctl" -D "$data" -l "$log" -w -t 60 start >/dev/null
    # pg_cron's own schema lives in cron.database_name.
    if grep -q "^shared_preload_libraries = 'pg_cron'" "$data/postgresql.conf"; then
        "$PSQL" -qX -h 127.0.0.1 -p "$PGQ_PORT" -U "$superuser" -d postgres \
            -c 'CREATE EXTENSION IF NOT EXISTS pg_cron' >/dev/null
    fi
    echo "PostgreSQL $major running: $(dsn)"
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
