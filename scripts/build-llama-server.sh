#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` from the llama.cpp tree vendored in PyPI's llama-cpp-python sdist
# and caches the binary by version, so a machine builds it once (10-18 minutes on 2 cores).
#
#   scripts/build-llama-server.sh          # prints the cached binary's path (builds it if needed)
#
# Environment:
#   TOKENPACE_CACHE          cache folder (default ~/.cache/tokenpace)
#   LLAMA_CPP_PYTHON_VERSION sdist version (default 0.3.36)
#   BUILD_JOBS               parallel compile jobs (default 2)
#   PYTHON                   interpreter whose pip downloads the sdist (default: .venv/bin/python or python3)
#
# Exit status: 0 built or cached (path on stdout), 3 build tools missing (message on stderr; the engine
# tests skip), anything else a failed build (log in the cache folder).
set -euo pipefail

# The compiler's progress lines ("[ 42%] ..." from make, "[123/456] ..." from ninja) with the time so
# far and an ETA at the pace so far appended; other lines dropped. `--progress-filter` runs only this
# on standard input (for tests). $1: the compile's start in $SECONDS.
progress_with_eta() {
  local t0=$1 line pct elapsed left
  while IFS= read -r line; do
    if [[ $line =~ ^\[\ *([0-9]+)%\] ]]; then
      pct=${BASH_REMATCH[1]}
    elif [[ $line =~ ^\[([0-9]+)/([0-9]+)\] ]] && ((BASH_REMATCH[2] > 0)); then
      pct=$((BASH_REMATCH[1] * 100 / BASH_REMATCH[2]))
    else
      continue
    fi
    elapsed=$((SECONDS - t0))
    if ((pct > 0 && pct < 100)); then
      left=$((elapsed * (100 - pct) / pct))
      echo "$line  [${elapsed}s so far, ETA $((left / 60))m$(printf %02d $((left % 60)))s]"
    else
      echo "$line  [${elapsed}s so far]"
    fi
  done
}
if [ "${1:-}" = "--progress-filter" ]; then
  progress_with_eta "$SECONDS"
  exit 0
fi

VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
CACHE="${TOKENPACE_CACHE:-$HOME/.cache/tokenpace}"
JOBS="${BUILD_JOBS:-2}"
DEST="$CACHE/llama-server-$VERSION"
BIN="$DEST/llama-server"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"

if [ -x "$BIN" ]; then
  echo "$BIN"
  exit 0
fi

missing=()
for tool in cmake c++ cc tar; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ -z "${PYTHON:-}" ]; then
  if [ -x "$ROOT/.venv/bin/python" ]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi
"$PYTHON" -m pip --version >/dev/null 2>&1 || missing+=("pip (for $PYTHON)")
if [ ${#missing[@]} -ne 0 ]; then
  echo "build-llama-server: cannot build llama-server, missing: ${missing[*]}" >&2
  exit 3
fi

mkdir -p "$CACHE"
# One build per cache folder at a time; a second caller waits and then finds the binary.
exec 9>"$CACHE/llama-server-$VERSION.lock"
flock 9
if [ -x "$BIN" ]; then
  echo "$BIN"
  exit 0
fi

WORK="$CACHE/build-llama-server-$VERSION"
LOG="$CACHE/build-llama-server-$VERSION.log"
rm -rf "$WORK"
mkdir -p "$WORK"
say() { echo "build-llama-server: $*" >&2; }
fail() {
  say "build failed ($1); last lines of $LOG:"
  tail -n 30 "$LOG" >&2
  exit 1
}
say "building llama-server from llama-cpp-python $VERSION, once per machine (full log: $LOG)"
start=$(date +%s)
: >"$LOG"
sdist="$CACHE/sdist/llama_cpp_python-$VERSION.tar.gz"
if [ ! -f "$sdist" ]; then
  say "step 1/3: downloading the llama-cpp-python sdist (77 MB, about a minute; kept in $CACHE/sdist)"
  "$PYTHON" -m pip download --quiet --no-deps --no-binary :all: \
    --dest "$CACHE/sdist" "llama-cpp-python==$VERSION" >>"$LOG" 2>&1 || fail "download"
else
  say "step 1/3: sdist already downloaded ($sdist)"
fi
tar -xzf "$sdist" -C "$WORK" >>"$LOG" 2>&1 || fail "unpack"
src="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
say "step 2/3: configuring with cmake (under a minute)"
cmake -S "$src" -B "$WORK/build" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_CURL=OFF \
  -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_TOOLS=ON \
  -DLLAMA_BUILD_SERVER=ON >>"$LOG" 2>&1 || fail "cmake configure"
say "step 3/3: compiling with $JOBS jobs: usually 10-18 minutes on 2 cores (5 on 8); the compiler's progress follows"
# Every line to the log; the progress lines ("[ 42%] Building ..." or "[123/456] Building ...") also to
# the screen with an ETA, so a long build is seen moving and its end can be planned for.
compile_start=$SECONDS
cmake --build "$WORK/build" --target llama-server -j "$JOBS" 2>&1 | tee -a "$LOG" |
  { progress_with_eta "$compile_start" >&2 || true; } || fail "compile"

built="$WORK/build/bin/llama-server"
"$built" --version >>"$LOG" 2>&1
mkdir -p "$DEST"
cp "$built" "$BIN.tmp"
mv "$BIN.tmp" "$BIN"
rm -rf "$WORK"
echo "build-llama-server: built in $(($(date +%s) - start)) s" >&2
echo "$BIN"
