# tidelog developer entry points. `make run` and `make test` work on a fresh clone (they create .venv).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PYTEST_ARGS ?=
# `make test` runs the suite in TEST_WORKERS pytest-xdist processes, a test module per worker at a time (module
# brokers stay shared): most tests wait on clients and brokers, so two workers take ~12 min on a 2-core machine
# where one process takes ~24. TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 2
ARGS   ?=

.PHONY: install run test lint docs bench java-client check-tools clean pyc

# The venv is (re)built when pyproject.toml, setup.py, a C accelerator or this file's install recipe changes (pip
# builds the extensions in place); the stamp files record what was installed. editable_mode=compat installs a .pth
# naming the checkout: setuptools' default editable finder is imported by every interpreter start (`python -c pass`
# here: 30 ms with it, 10 ms without).
EDITABLE := --config-settings editable_mode=compat
BUILD_INPUTS := pyproject.toml setup.py Makefile $(wildcard tidelog/protocol/*.c)

$(VENV)/.installed-base: $(BUILD_INPUTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet $(EDITABLE) -e .
	touch $@

$(VENV)/.installed-test: $(BUILD_INPUTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet $(EDITABLE) -e '.[test,spark]'
	touch $@ $(VENV)/.installed-base

# Byte-compiled modules, as an installed wheel has them: the broker then starts in ~0.1 s instead of ~0.2 s
# even where PYTHONDONTWRITEBYTECODE is set (only changed files are compiled again).
pyc:
	@$(BIN)/python -m compileall -q tidelog

install: $(VENV)/.installed-test

# Broker on localhost:9092 with data in ./data (tidelog's defaults); extra flags via ARGS="...".
run: $(VENV)/.installed-base pyc
	$(BIN)/tidelog serve $(ARGS)

java-client:
	PYTHON=$(BIN)/python ./scripts/fetch_java_client.sh

check-tools:
	./scripts/check_tools.sh

test: $(VENV)/.installed-test java-client check-tools
	$(BIN)/python -m pytest $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile) $(PYTEST_ARGS)

# ruff everywhere; mypy (strict on protocol/storage/cleaner/coordinator/broker/config, see pyproject.toml); the
# package layers (import-linter, [tool.importlinter] in pyproject.toml).
lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# docs/APIS.md from the code (API_TABLE, each API module's NOTES) and docs/APIS.template.md; tests/test_apis_doc.py
# fails when the committed file is stale.
docs: $(VENV)/.installed-base
	$(BIN)/python scripts/gen_apis_doc.py

# Every bench/*.py script prints its figures; none of them passes or fails. The headline comes first:
# bench/compare.py, tidelog against librdkafka's mock cluster in one interleaved run (ratios).
bench: $(VENV)/.installed-test pyc
	@set -e; for script in bench/compare.py $(filter-out bench/compare.py,$(wildcard bench/*.py)); do \
		echo "== $$script"; $(BIN)/python $$script; done

clean:
	rm -rf $(VENV) .cache build *.egg-info .pytest_cache .ruff_cache
