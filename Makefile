# pgq: make demo | make test | make lint | make bench | make db | make db-stop | make deps
SHELL := /bin/bash
.DEFAULT_GOAL := help

PGQ_PORT ?= 54329
export PGQ_PORT
ADMIN_DSN := postgresql://postgres@127.0.0.1:$(PGQ_PORT)/postgres
TAP_DSN := postgresql://postgres@127.0.0.1:$(PGQ_PORT)/pgq_tap
VENV := .venv
PY := $(VENV)/bin/python
PGQ := $(VENV)/bin/pgq
PSQL := psql -X -q -v ON_ERROR_STOP=1
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PKGS := postgresql-15 postgresql-15-cron postgresql-15-pgtap libtap-parser-sourcehandler-pgtap-perl pgbouncer chromium chromium-driver iproute2

.PHONY: help deps apt venv db db-stop lint test tap pytest demo bench soak freeze clean

help:
	@echo "make demo     run a real workload on a local throwaway database"
	@echo "make test     lint, pgTAP and pytest against the local cluster"
	@echo "make lint     sqlfluff + ruff"
	@echo "make bench    the benchmark"
	@echo "make soak     the chaos soak (MINUTES=10; restarts the cluster)"
	@echo "make db       start the local cluster (make db-stop stops it)"
	@echo "make freeze   freeze a release for the upgrade ladder (VERSION=x.y.z [COMMIT=...])"
	@echo "make deps     install what is missing (Debian packages, virtualenv)"

deps: apt venv

# Debian packages, only those that are missing.
apt:
	@missing=$$(for p in $(APT_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $@

db: apt
	@scripts/db.sh start

db-stop:
	@scripts/db.sh stop

lint: venv
	$(VENV)/bin/sqlfluff lint --processes 2 sql migrations tests/sql
	$(VENV)/bin/ruff check python tests/py
	$(VENV)/bin/ruff format --check python tests/py

# pgTAP on a fresh database.
tap: deps db
	$(PSQL) -d $(ADMIN_DSN) -c 'DROP DATABASE IF EXISTS pgq_tap WITH (FORCE)' -c 'CREATE DATABASE pgq_tap'
	$(PGQ) install --dsn $(TAP_DSN) --no-cron >/dev/null
	$(PSQL) -d $(TAP_DSN) -c 'CREATE EXTENSION pgtap'
	pg_prove --dbname pgq_tap --host 127.0.0.1 --port $(PGQ_PORT) --username postgres tests/sql/*.sql

pytest: deps db
	PGQ_TEST_DSN=$(ADMIN_DSN) $(VENV)/bin/pytest tests/py

test: deps db lint tap pytest

demo: deps db
	PGQ_DEMO_DSN=$(ADMIN_DSN) $(PY) -m pgq.cli.demo

bench: deps db
	$(PGQ) bench --dsn $(ADMIN_DSN)

# The chaos soak, long form: `make soak MINUTES=10`. It restarts the cluster of PGQ_PORT /
# PGQ_PGDATA (both passed on to scripts/db.sh), so point those at a cluster of your own.
MINUTES ?= 10
soak: deps db
	$(PY) tests/py/soak.py --dsn $(ADMIN_DSN) --minutes $(MINUTES)

# The upgrade ladder's fixtures: `make freeze VERSION=0.2.0` writes tests/fixtures/pgq-0.2.0.sql,
# the schema this checkout installs; with COMMIT=<the release's commit> it freezes that
# commit instead, and its python/pgq too (tests/fixtures/pgq-VERSION-python.tar.xz).
freeze: venv db
	scripts/freeze.sh $(VERSION) $(COMMIT)

clean: db-stop
	rm -rf .pgdata $(VENV)
