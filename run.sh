#!/usr/bin/env bash
# Builds spmdsim (release) if needed and runs it: ./run.sh <spmdsim arguments>
#   ./run.sh mesh --topology tpu-v4:2x2x4 --mesh data=4,model=4
# Installs missing Debian packages first. The build's output goes to build/release/build.log; run.sh shows its
# progress (a line every 10% of the build steps) and the number of compiler warnings, and the whole log when the
# build fails. What run.sh itself says goes to stderr: stdout holds only spmdsim's output.
# Warnings are not errors in this build (the `release` preset): a compiler newer or older than the one CI uses may
# warn where ours does not, and that must not stop a user. CI (.ci/run) fails on any warning in it.
set -euo pipefail
root="$(cd "$(dirname "$0")" && pwd)"
"$root/scripts/install-deps.sh"
mkdir -p "$root/build/release"
log="$root/build/release/build.log"
exe="$root/build/release/cli/spmdsim"
# Say so when there is something to build (always the first time; after an edit, when ninja has work to do).
announce=0
if [ ! -x "$exe" ]; then
  echo "run.sh: building spmdsim (release) — the first build takes 5-15 minutes on 2 cores; log: build/release/build.log" >&2
  announce=1
elif ! ninja -C "$root/build/release" -n 2>/dev/null | grep -q "no work to do"; then
  echo "run.sh: rebuilding spmdsim (release); log: build/release/build.log" >&2
  announce=1
fi
start=$SECONDS
# Ninja prints "[done/total] ..." per step when its output is not a terminal; awk copies everything to the log and
# says on stderr when another tenth of the steps is done.
progress() {
  awk -v logfile="$log" -v show="$announce" '
    { print > logfile; fflush(logfile) }
    show && match($0, /^\[[0-9]+\/[0-9]+\]/) {
      split(substr($0, 2, RLENGTH - 2), n, "/")
      tenth = int(10 * n[1] / n[2])
      if (tenth > last) { last = tenth; printf "run.sh: build %d%% (%d of %d steps)\n", 10 * tenth, n[1], n[2] > "/dev/stderr" }
    }'
}
if ! (cd "$root" && cmake --preset release && cmake --build --preset release -j "$(nproc)") 2>&1 | progress; then
  cat "$log" >&2
  echo "run.sh: the build failed (log above, also in $log)" >&2
  exit 1
fi
warnings=$(grep -c 'warning:' "$log" || true)
[ "$warnings" -eq 0 ] || echo "run.sh: the compiler printed $warnings warning(s); they are in $log" >&2
[ "$announce" -eq 0 ] || echo "run.sh: build done in $((SECONDS - start)) s; running spmdsim" >&2
exec "$exe" "$@"
