#!/usr/bin/env bash
# Builds spmdsim (release) if needed and runs it: ./run.sh <spmdsim arguments>
#   ./run.sh mesh --topology tpu-v4:2x2x4 --mesh data=4,model=4
# Installs missing Debian packages first. Build output goes to build/release/build.log and is shown
# only when the build fails.
set -euo pipefail
root="$(cd "$(dirname "$0")" && pwd)"
"$root/scripts/install-deps.sh"
mkdir -p "$root/build/release"
log="$root/build/release/build.log"
if ! (cd "$root" && cmake --preset release && cmake --build --preset release -j "$(nproc)") >"$log" 2>&1; then
  cat "$log" >&2
  echo "run.sh: the build failed (log above, also in $log)" >&2
  exit 1
fi
exec "$root/build/release/cli/spmdsim" "$@"
