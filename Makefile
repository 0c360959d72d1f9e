# Two entry points that work on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench-accuracy clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

## run: benchmark the built-in simulated engine (no flags needed)
run: $(STAMP)
	$(BIN)/tokenpace bench

$(VENV)/.system-deps: scripts/system-packages.txt scripts/system-deps.sh | $(STAMP)
	scripts/system-deps.sh
	touch $@

## test: lint and run the test suite (installs the system packages tests need, once)
test: $(STAMP) $(VENV)/.system-deps
	$(BIN)/ruff check .
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
