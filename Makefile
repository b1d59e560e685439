# Quick start: `make demo` and `make test`. Each creates .venv on first use, with uv (scripts/venv.sh):
# `make demo` with what the demo needs (requirements/demo.txt, from PyPI alone), every other target with
# the whole lock, requirements/lock.txt (`make lock` regenerates both after pyproject.toml changes).
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo
# uv installs without compiling bytecode (compiling all of TensorFlow, PyTorch and Airflow would take about
# a minute): Python writes it into .venv on first import instead, which PYTHONDONTWRITEBYTECODE would
# forbid, leaving every later import of TensorFlow twice as slow.
unexport PYTHONDONTWRITEBYTECODE
# Extra arguments of `uv pip compile` for `make lock`, e.g. LOCK_ARGS=--upgrade to move every pin.
LOCK_ARGS ?=

.PHONY: install lock demo test test-compat lint docs arch-map browser services unit check e2e benchmarks clean

$(STAMP): pyproject.toml requirements/lock.txt scripts/venv.sh
	PYTHON=$(PYTHON) scripts/venv.sh install $(VENV)
	touch $(STAMP)

install: $(STAMP)

# The demo's part of the lock (no PyTorch, XGBoost or test tools), unless .venv has held the whole lock:
# then that is brought up to date instead, and nothing is taken out of it.
$(DEMO_STAMP): pyproject.toml requirements/demo.txt requirements/lock.txt scripts/venv.sh
	if [[ -e $(STAMP) ]]; then $(MAKE) -s --no-print-directory $(STAMP); else PYTHON=$(PYTHON) scripts/venv.sh install-demo $(VENV); fi
	touch $(DEMO_STAMP)

lock:
	PYTHON=$(PYTHON) scripts/venv.sh lock $(LOCK_ARGS)

demo: $(DEMO_STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" scripts/demo.sh

# lint-imports: the walls between the provider's rooms ([tool.importlinter] in pyproject.toml).
lint: $(STAMP)
	$(BIN)/ruff check airflow_tfjob tests example_dags
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

# The documentation site, into build/site (open build/site/index.html). mkdocs.yml sets strict mode:
# any warning fails, a broken link or anchor among them.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --quiet

# The generated parts of docs/architecture.md (its module maps, the signatures it shows), drawn again from
# the code: all a new module needs (tests/unit/test_architecture_doc.py fails until it is run).
arch-map: $(STAMP)
	$(BIN)/python scripts/architecture_map.py

browser:
	scripts/browser.sh

# Debian's PostgreSQL and Redis for the production-shaped deployment test (tests/e2e/test_failover.py).
services:
	scripts/services.sh

# Six pytest workers (pytest-xdist), each taking whole test files (their module fixtures, an Airflow home
# or a cluster, stay shared): most tests wait on processes, clusters and Airflow's start rather than
# compute, so on two cores the workers beyond two fill the gaps the others leave. The files are handed
# out longest first, by their time in a recent run (tests/module_times.json, read by tests/conftest.py;
# --no-loadscope-reorder: xdist's own order, by number of tests, put the long few-test files last). One idle run of the main
# stage here: 530 s with four workers (the cores 123% busy), 456 s with six (167%). TEST_WORKERS=0 runs
# serially.
TEST_WORKERS ?= 6

# Modules marked `alone` run after the parallel suite, one test at a time, with no other test beside them
# but the compatibility lane's (their markers say why they need the machine). The lane runs at the same
# CPU priority: at nice 19 any busy process of normal priority on the machine starved it past its bounds
# (docs/development.md, tenth session), and beside it the alone stage still holds its own bounds. Each
# stage runs through scripts/test_times.py (its JUnit XML and wall time in build/test-times), which
# prints every stage's wall time and the 15 slowest tests at the end, when a stage fails too; a failing
# main stage stops the run, and make test exits with the first failing stage's status. The site
# `make docs` built in this run is the one tests/docs reads (TFJOB_DOCS_SITE; a build older than
# MAKE_STARTED is not this run's).
TIMES := build/test-times
MAKE_STARTED := $(shell date +%s)
STAGE = PATH="$(CURDIR)/$(BIN):$$PATH" TFJOB_DOCS_SITE="$(CURDIR)/build/site" TFJOB_DOCS_SINCE=$(MAKE_STARTED) \
	$(BIN)/python scripts/test_times.py stage $(TIMES)
test: lint docs browser services
	@rm -rf $(TIMES); status=0; \
	$(STAGE) main -- $(BIN)/pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not alone" && \
	$(COMPAT) --build-only && \
	( pids=(); for release in $(COMPAT_RELEASES); do \
		COMPAT_WORKERS=$(COMPAT_WORKERS) $(STAGE) compat-$$release -- $(COMPAT) --no-build $$release & \
		pids+=($$!); \
	done; \
	$(STAGE) alone -- $(BIN)/pytest -q -p no:cacheprovider -m alone; failed=$$?; \
	for pid in "$${pids[@]}"; do wait $$pid; code=$$?; [ $$failed -ne 0 ] || failed=$$code; done; \
	exit $$failed ) || status=$$?; \
	$(BIN)/python scripts/test_times.py report $(TIMES) || echo "make test: no summary of the test times" >&2; \
	[ $$status -eq 0 ] || echo "make test: FAILED: a test stage exited with status $$status (see above)" >&2; \
	exit $$status

# The compatibility lane (scripts/compat.sh): the provider's wheel under each supported Airflow release's
# constraints (requirements/compat/), and there the tests whose outcome depends on the release. make test
# runs it after the main stage, beside the alone stage, one stage per release, side by side, each in one pytest
# process (COMPAT_WORKERS=0: an xdist worker would import and collect everything a second time): a
# release's tests wait on clusters, triggerers and `airflow dags test` about a third of their time, so one
# after the other the releases left a core idle (each stage's output is its release's log, so nothing
# interleaves).
COMPAT := scripts/compat.sh
COMPAT_WORKERS ?= 0
COMPAT_RELEASES ?= $(patsubst requirements/compat/airflow-%.txt,%,$(wildcard requirements/compat/airflow-*.txt))
test-compat: $(STAMP)
	$(COMPAT) $(COMPAT_RELEASES)

# The deployment test alone (make test runs it too, as part of the pytest run: tests/e2e).
e2e: $(STAMP) browser services
	status=0; PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest -q -p no:cacheprovider tests/e2e || status=$$?; \
	echo "e2e: screenshots: $(CURDIR)/build/e2e/log-view.png and links.png, components' logs: $(CURDIR)/build/e2e/logs/"; exit $$status

# The unit tests on two workers (pytest-xdist), each taking whole files: no cluster, no Airflow run.
unit: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest -q -p no:cacheprovider -n 2 --dist loadfile tests/unit

# The fast lane for the inner loop (docs/development.md): lint, types, import contracts, unit tests.
check: lint unit

benchmarks: $(STAMP)
	for b in tests/benchmarks/bench_*.py; do echo "== $$b"; PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python $$b; done

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache
