# Quick start: `make demo` and `make test`. Each creates .venv on first use.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Airflow and its Kubernetes provider are pinned to the versions the project is tested with;
# pyproject.toml states the supported ranges.
PINS := "apache-airflow==3.3.2" "apache-airflow-providers-cncf-kubernetes==10.25.0"
STAMP := $(VENV)/.installed

.PHONY: install demo test lint unit benchmarks clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --disable-pip-version-check -q -e ".[test,examples]" $(PINS)
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" scripts/demo.sh

lint: $(STAMP)
	$(BIN)/ruff check airflow_tfjob tests example_dags
	$(BIN)/mypy

test: lint
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest -q -p no:cacheprovider

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

benchmarks: $(STAMP)
	for b in tests/benchmarks/bench_*.py; do echo "== $$b"; PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python $$b; done

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache
