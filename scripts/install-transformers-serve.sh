#!/usr/bin/env bash
# Installs Hugging Face `transformers serve` (continuous batching on CPU) into its own virtual
# environment in the cache folder, keyed by the pinned versions, so a machine installs it once; the
# engine tests start it on the tiny model's hf/ folder (tests/engines/test_transformers_serve*.py).
#
#   scripts/install-transformers-serve.sh   # prints the venv's python (installs it if needed)
#
# What was found (2026-12-04, this project's 2-core machine, Python 3.11):
# - PyPI's torch wheel for Linux x86_64 is a CUDA build: 2.14.1 is a 555 MB wheel that names ~3 GB of
#   nvidia-*/cuda-toolkit wheels. `pip install torch --no-deps` does not work on CPU: libtorch_cuda.so
#   is linked against libcudnn, libcublas, libnccl ... and `import torch` fails ("libcudnn.so.9:
#   cannot open shared object file").
# - The project's machines carry a CPU build of torch 2.13.0 for Python 3.11 as a local wheel that pip
#   takes for `torch==2.13.0` (the machine's pip config; no CUDA libraries). Pinned here for that: the
#   whole venv is 1.2 GB and installs in ~45 s. Elsewhere the same pin takes PyPI's CUDA build (several
#   GB, once); it runs on CPU all the same.
# - transformers 5.17.0 (the version of the GPU records in shared/engines) has `transformers serve
#   --continuous-batching` (paged KV cache; --cb-* flags) and serves a local folder given as the
#   positional FORCE_MODEL argument; a request's "model" must then be that same path (else HTTP 400).
#   Its `transformers` command imports `requests` (for `transformers chat`), which the serving extra
#   lacks, hence the extra package.
# - It answers /health about 4 s after starting with the tiny model, and ~5 s more for the first
#   requests (warm-up), then ~4 ms per output token at one user.
#
# Environment: TOKENPACE_CACHE (default ~/.cache/tokenpace), PYTHON (interpreter for the new venv,
# default python3), TRANSFORMERS_SERVE_TORCH / TRANSFORMERS_SERVE_VERSION (the pins).
#
# Exit status: 0 installed or cached (the python's path on stdout), 3 cannot be installed here (no
# venv/pip for $PYTHON, or the package registry unreachable: the reason on stderr; the engine tests
# skip), anything else a failed install (log in the cache folder).
set -euo pipefail

TORCH="${TRANSFORMERS_SERVE_TORCH:-2.13.0}"
TRANSFORMERS="${TRANSFORMERS_SERVE_VERSION:-5.17.0}"
CACHE="${TOKENPACE_CACHE:-$HOME/.cache/tokenpace}"
PY="${PYTHON:-python3}"
KEY="transformers-$TRANSFORMERS-torch-$TORCH"
VENV="$CACHE/transformers-serve-$KEY"
STAMP="$VENV/.installed"
LOG="$CACHE/install-transformers-serve-$KEY.log"
say() { echo "install-transformers-serve: $*" >&2; }

if [ -f "$STAMP" ] && [ -x "$VENV/bin/python" ]; then
  echo "$VENV/bin/python"
  exit 0
fi

if ! "$PY" -c "import venv, ensurepip" >/dev/null 2>&1; then
  say "cannot install transformers serve: $PY lacks venv/ensurepip"
  exit 3
fi

mkdir -p "$CACHE"
# One install per cache folder at a time; a second caller waits and then finds it done.
exec 9>"$VENV.lock"
flock 9
if [ -f "$STAMP" ] && [ -x "$VENV/bin/python" ]; then
  echo "$VENV/bin/python"
  exit 0
fi

say "installing torch $TORCH and transformers[serving] $TRANSFORMERS into $VENV (once per machine; log: $LOG)"
start=$(date +%s)
: >"$LOG"
rm -rf "$VENV"
"$PY" -m venv "$VENV" >>"$LOG" 2>&1 || { say "cannot create a venv with $PY"; rm -rf "$VENV"; exit 3; }
if ! "$VENV/bin/pip" download --quiet --no-deps --dest "$VENV/.probe" "requests" >>"$LOG" 2>&1; then
  say "cannot install transformers serve: the package registry is not reachable (see $LOG)"
  rm -rf "$VENV"
  exit 3
fi
rm -rf "$VENV/.probe"
if ! "$VENV/bin/pip" install --quiet "torch==$TORCH" "transformers[serving]==$TRANSFORMERS" requests \
  >>"$LOG" 2>&1; then
  say "install failed; last lines of $LOG:"
  tail -n 30 "$LOG" >&2
  rm -rf "$VENV"
  exit 1
fi
# The CLI must load (it imports torch, fastapi, uvicorn) before the install counts as done.
if ! HF_HUB_OFFLINE=1 HF_HUB_DISABLE_UPDATE_CHECK=1 "$VENV/bin/transformers" serve --help >>"$LOG" 2>&1; then
  say "installed, but \`transformers serve --help\` fails; last lines of $LOG:"
  tail -n 30 "$LOG" >&2
  rm -rf "$VENV"
  exit 1
fi
echo "$KEY" >"$STAMP"
say "installed in $(($(date +%s) - start)) s ($(du -sh "$VENV" | cut -f1))"
echo "$VENV/bin/python"
