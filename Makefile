# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv and install first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit proto bench fuzz faults clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/outrigger demo

test: $(STAMP) lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check pluginhost framework clients tests

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider

# Regenerate the Python stubs in pluginhost/_gen from proto/ (a test fails when they are stale).
proto: $(STAMP)
	$(BIN)/python -m pluginhost._genproto

# Every benchmark scenario (framework/bench.py): prints a table, writes bench-results.json (under 10 minutes).
bench: $(STAMP)
	$(BIN)/python -m framework.bench --out bench-results.json

# The fuzz tests with 50 x their `make test` budget and fresh random examples (docs/bad-input.md).
fuzz: $(STAMP)
	OUTRIGGER_FUZZ=long $(BIN)/python -m pytest -q -p no:cacheprovider tests/test_fuzz_parsers.py tests/test_fuzz_services.py

# The full fault harness (tests/fault_harness.py; `make test` runs a short version): a few minutes.
faults: $(STAMP)
	$(BIN)/python tests/fault_harness.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
