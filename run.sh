#!/usr/bin/env bash
# Builds spmdsim (release) if needed and runs it: ./run.sh <spmdsim arguments>
#   ./run.sh mesh --topology tpu-v4:2x2x4 --mesh data=4,model=4
# Installs missing Debian packages first. Build output goes to build/release/build.log and is shown
# only when the build fails. What run.sh itself says goes to stderr: stdout holds only spmdsim's output.
set -euo pipefail
root="$(cd "$(dirname "$0")" && pwd)"
"$root/scripts/install-deps.sh"
mkdir -p "$root/build/release"
log="$root/build/release/build.log"
exe="$root/build/release/cli/spmdsim"
# Say so when there is something to build (always the first time; after an edit, when ninja has work to do).
announce=0
if [ ! -x "$exe" ]; then
  echo "run.sh: building spmdsim (release) — the first build takes ~10 minutes on 2 cores; log: build/release/build.log" >&2
  announce=1
elif ! ninja -C "$root/build/release" -n 2>/dev/null | grep -q "no work to do"; then
  echo "run.sh: rebuilding spmdsim (release); log: build/release/build.log" >&2
  announce=1
fi
start=$SECONDS
if ! (cd "$root" && cmake --preset release && cmake --build --preset release -j "$(nproc)") >"$log" 2>&1; then
  cat "$log" >&2
  echo "run.sh: the build failed (log above, also in $log)" >&2
  exit 1
fi
[ "$announce" -eq 0 ] || echo "run.sh: build done in $((SECONDS - start)) s; running spmdsim" >&2
exec "$exe" "$@"
