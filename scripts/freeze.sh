#!/usr/bin/env bash
# Freeze a release for the upgrade ladder (tests/py/lifecycle/test_upgrade.py, test_rolling_upgrade.py):
#   scripts/freeze.sh VERSION [COMMIT]      (or: make freeze VERSION=0.2.0 [COMMIT=...])
# writes tests/fixtures/pgq-VERSION.sql: the schema that release's own `pgq install --no-cron`
# creates (its dated outcome partitions dropped: an upgrade creates those for its own day),
# dumped by `pg_dump --no-owner --schema=pgq`. Without COMMIT it freezes the working tree
# (the release being prepared); with COMMIT it freezes that commit's code and also writes
# tests/fixtures/pgq-VERSION-python.tar.xz, its python/pgq, which the rolling-upgrade test
# runs as the old release's workers (CI clones may be shallow: the code travels as a file),
# and sql/releases/pgq--VERSION.sql, that release as the extension's install script.
# Uses the local cluster of PGQ_PORT (scripts/db.sh start) and the project's .venv.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
version=${1:?usage: scripts/freeze.sh VERSION [COMMIT]}
commit=${2:-}
port=${PGQ_PORT:-54329}
bin=/usr/lib/postgresql/15/bin
admin="postgresql://postgres@127.0.0.1:$port/postgres"
db="pgq_freeze_$$"
dsn="postgresql://postgres@127.0.0.1:$port/$db"
fixtures=$top/tests/fixtures
python=$top/.venv/bin/python

work=$(mktemp -d)
cleanup() {
    "$bin/psql" -X -q -d "$admin" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

if [ -n "$commit" ]; then
    label="commit $(git -C "$top" rev-parse --short "$commit")"
    git -C "$top" archive "$commit" python/pgq sql migrations | tar -x -C "$work"
else
    label="the working tree at $(git -C "$top" rev-parse --short HEAD)"
    mkdir -p "$work/python"
    cp -r "$top/python/pgq" "$work/python/pgq"
    cp -r "$top/sql" "$top/migrations" "$work/"
fi
found=$(cd "$work/python" && "$python" -c 'import pgq; print(pgq.__version__)')
if [ "$found" != "$version" ]; then
    echo "freeze: $label is pgq $found, not $version" >&2
    exit 1
fi

"$bin/psql" -X -q -v ON_ERROR_STOP=1 -d "$admin" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
(cd "$work/python" && "$python" -m pgq install --dsn "$dsn" --no-cron >/dev/null)
"$bin/psql" -X -q -v ON_ERROR_STOP=1 -d "$dsn" <<'SQL'
DO $$
DECLARE
    v_name text;
BEGIN
    FOR v_name IN
        SELECT c.relname FROM pg_catalog.pg_inherits AS i JOIN pg_catalog.pg_class AS c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'pgq._outcomes'::regclass AND c.relname ~ '^_outcomes_[0-9]{8}$'
    LOOP
        EXECUTE format('DROP TABLE pgq.%I', v_name);
    END LOOP;
END
$$;
SQL

out=$fixtures/pgq-$version.sql
{
    echo "-- The pgq schema as released in $version ($label), frozen for the upgrade ladder"
    echo "-- (tests/py/lifecycle/test_upgrade.py, test_rolling_upgrade.py): installed by that code's"
    echo "-- \`pgq install --no-cron\`, its dated outcome partitions dropped (an upgrade creates those"
    echo "-- for its own day), then \`pg_dump --no-owner --schema=pgq\`. Regenerate with"
    echo "-- \`make freeze VERSION=$version${commit:+ COMMIT=$commit}\` (scripts/freeze.sh); once $version is released,"
    echo "-- never edit: it is what $version users have."
    echo "--"
    "$bin/pg_dump" --no-owner --schema=pgq --dbname "$dsn"
} >"$out.tmp"
mv "$out.tmp" "$out"
echo "wrote $out"

if [ -n "$commit" ]; then
    # The release as the extension's install script (pgq sql extension ships it, so that a
    # database created with that release can be updated): the same assembly as today's.
    release=$top/sql/releases/pgq--$version.sql
    mkdir -p "$top/sql/releases"
    (cd "$top/python" && "$python" -c 'import sys; from pathlib import Path; from pgq.scripts import Source, extension_install; sys.stdout.write(extension_install(Source(sys.argv[1], Path(sys.argv[2]))))' "$version" "$work") >"$release.tmp"
    mv "$release.tmp" "$release"
    echo "wrote $release"

    archive=$fixtures/pgq-$version-python.tar.xz
    git -C "$top" archive "$commit" python/pgq | xz -9 >"$archive.tmp"
    mv "$archive.tmp" "$archive"
    echo "wrote $archive"
fi
