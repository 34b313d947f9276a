# crawlfleet — two commands do everything on a bare Debian machine: `make demo` and `make test`.
# Both install what is missing first (Debian packages as root, then a .venv with the project), quickly when present.

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench
PYTEST_ARGS ?=
# `make test` runs the suite in this many processes (pytest-xdist), each with its own local services, a test file
# whole in one of them: most tests wait on services and crawls, so two share two cores well (1: one process)
TEST_PROCESSES ?= 2

.PHONY: all install install-deps venv demo test test-unit test-integration lint bench services-up services-down readme k8s clean

all: test

install: install-deps venv

install-deps:
	@bash deploy/install-deps.sh

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	@$(PY) -m pip install -q --disable-pip-version-check -e '.[test]'
	@touch $(STAMP)

$(BENCH_STAMP): $(STAMP)
	@$(PY) -m pip install -q --disable-pip-version-check -e '.[test,bench]'
	@touch $(BENCH_STAMP)

demo: install
	@$(VENV)/bin/crawlfleet demo

test: install
	@$(PY) -m pytest -n $(TEST_PROCESSES) --dist loadfile $(PYTEST_ARGS)

test-unit: venv
	@$(PY) -m pytest -m unit $(PYTEST_ARGS)

test-integration: install
	@$(PY) -m pytest -m "integration or e2e" $(PYTEST_ARGS)

# the quick check before a commit (about half a minute): lint, and the unit tests on every core (pytest-xdist)
check: venv
	@status=0; $(MAKE) -s lint || status=1; $(PY) -m pytest -m unit -q -n auto -p no:cacheprovider $(PYTEST_ARGS) || status=1; \
	exit $$status

# ruff, the floors (pyproject [tool.importlinter]: an import up a floor fails), then the types (pyproject [tool.mypy]:
# strict on messaging, frontier, master and spiders/worker, mypy's defaults on the rest of spiders, the manager and
# deploy); all run, any fails the target
lint: venv
	@status=0; $(VENV)/bin/ruff check . || status=1; $(VENV)/bin/lint-imports --no-cache || status=1; \
	$(VENV)/bin/mypy || status=1; exit $$status

bench: install $(BENCH_STAMP)
	@bash deploy/install-bench-deps.sh
	@$(PY) -m bench

services-up: install
	@$(VENV)/bin/crawlfleet services up

services-down: venv
	@$(VENV)/bin/crawlfleet services down

readme: venv
	@$(PY) -m deploy.readme docs/settings.md docs/architecture.md

# deploy/k8s/base/workers.yaml: a worker Deployment and a KEDA ScaledObject per spider type (messaging/spider_types.py)
k8s: venv
	@$(PY) -m deploy.k8s_workers

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
