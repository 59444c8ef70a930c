#!/usr/bin/env bash
# Builds and runs every test: ./test.sh [dev|asan|tsan]   (default: dev)
# Installs missing Debian packages first. .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")"
preset="${1:-dev}"
scripts/install-deps.sh --test-tools
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)"
ctest --preset "$preset" -j "$(nproc)"
