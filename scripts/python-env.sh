#!/usr/bin/env bash
# Makes the test suite's Python environment: a virtual environment of Debian's /usr/bin/python3 holding exactly the
# pinned packages of python/requirements-test.txt (the peers and pytest) and python/requirements-target.txt (the TPU
# and GPU compilers of spmdsim.compile_for), from the Python package index.
#   scripts/python-env.sh [VENV]        (default: build/venv)
# Does nothing when VENV already holds both lists (a stamp records the hash of the two files). Where the index
# cannot be reached, or a package cannot be installed, it says so in one line on stderr and exits 1: the suite
# needs the peers and never skips them. ./test.sh calls this; docs/testing.md, "The peers".
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:-$root/build/venv}"
requirements="$root/python/requirements-test.txt"
target_requirements="$root/python/requirements-target.txt"
want="$(cat "$requirements" "$target_requirements" | sha256sum | cut -d' ' -f1)"
stamp="$venv/.requirements-sha256"
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
log="$venv.log"
mkdir -p "$(dirname "$venv")"
rm -rf "$venv"
echo "python-env: making $venv with the pinned packages of python/requirements-test.txt and requirements-target.txt (about 2.5 GB; log: $log)" >&2
if ! /usr/bin/python3 -m venv "$venv" >"$log" 2>&1; then
  echo "python-env: /usr/bin/python3 -m venv failed (install python3-venv: scripts/install-deps.sh); log: $log" >&2
  exit 1
fi
if ! "$venv/bin/python" -m pip install --no-deps --disable-pip-version-check --no-input \
       -r "$requirements" >>"$log" 2>&1; then
  why="$(grep -E '^(ERROR|  ERROR)|Could not|Failed to establish|NewConnectionError|Temporary failure' "$log" | tail -1)"
  rm -rf "$venv"
  echo "python-env: cannot install python/requirements-test.txt from the Python package index (is it reachable? pip: ${why:-see the log}); log: $log" >&2
  exit 1
fi
if ! "$venv/bin/python" -m pip install --no-deps --disable-pip-version-check --no-input \
       -r "$target_requirements" >>"$log" 2>&1; then
  why="$(grep -E '^(ERROR|  ERROR)|Could not|Failed to establish|NewConnectionError|Temporary failure' "$log" | tail -1)"
  rm -rf "$venv"
  echo "python-env: cannot install python/requirements-target.txt from the Python package index (is it reachable? pip: ${why:-see the log}); log: $log" >&2
  exit 1
fi
echo "$want" >"$stamp"
