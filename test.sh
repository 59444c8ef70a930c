#!/usr/bin/env bash
# Builds and runs every test: ./test.sh [dev|asan|tsan|clang]   (default: dev)
# Installs missing Debian packages first, then the Python test environment build/venv (the peers, pinned, from the
# Python package index: scripts/python-env.sh; it fails in one line when the index cannot be reached).
# .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")"
preset="${1:-dev}"
scripts/install-deps.sh
scripts/python-env.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)"
ctest --preset "$preset" -j "$(nproc)"
