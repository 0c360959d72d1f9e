#!/usr/bin/env bash
# Installs the Debian packages that tests need (one per line in scripts/system-packages.txt),
# skipping those already there. Without root or apt it says so and leaves the tests to skip.
set -uo pipefail
cd "$(dirname "$0")/.."
list=scripts/system-packages.txt
missing=()
while read -r pkg _; do
  [[ -z "$pkg" || "$pkg" == \#* ]] && continue
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done < "$list"
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "system-deps: cannot install ${missing[*]} (needs root and apt-get); tests that need them will skip" >&2
  exit 0
fi
echo "system-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
  || echo "system-deps: apt-get failed for ${missing[*]}; tests that need them will skip" >&2
exit 0
