#!/usr/bin/env bash
# Builds and runs every test: ./test.sh [dev|asan|tsan|clang]   (default: dev)
# Installs missing Debian packages first, then the Python test environment build/venv (the peers, pinned, from the
# Python package index: scripts/python-env.sh; it fails in one line when the index cannot be reached).
# .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")"
preset="${1:-dev}"
scripts/install-deps.sh --test-tools
scripts/python-env.sh
# ccache keys that do not depend on the build folder, so that the wheel test's build (build/wheel) reuses build/dev's.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)"
# The differential tests against the peers first, then their case counts per peer, then everything else (so that
# ctest's summary stays the last line).
rc=0
peer_tests="$(ctest --preset "$preset" -N -L peers 2>/dev/null || true)"  # no pipe into grep -q: pipefail + SIGPIPE
if grep -q "Test *#" <<<"$peer_tests"; then
  rm -rf "build/$preset/tests/peers/counts"
  ctest --preset "$preset" -j "$(nproc)" -L peers || rc=$?
  echo "Differential cases compared with the peers:"
  cat "build/$preset/tests/peers/counts/"*.txt 2>/dev/null | sed 's/^/  /' || echo "  (no counts written)"
  ctest --preset "$preset" -j "$(nproc)" -LE peers || rc=$?
else
  ctest --preset "$preset" -j "$(nproc)" || rc=$?
fi
exit "$rc"
