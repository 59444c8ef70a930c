#!/usr/bin/env bash
# Runs the same Google Benchmark binaries from two build trees, alternating A B A B, and prints each benchmark's
# median real time in both and the ratio NEW/OLD (above 1: NEW is slower). For "no benchmark got slower" checks:
#
#   git worktree add /tmp/old <commit> && (cd /tmp/old && cmake --preset bench && cmake --build --preset bench)
#   cmake --preset bench && cmake --build --preset bench
#   scripts/bench-compare.sh /tmp/old/build/bench build/bench [ROUNDS] [BINARY_FILTER] [BENCHMARK_FILTER]
#
# ROUNDS (default 3) alternations; each run uses --benchmark_min_time=0.2. Binaries are matched by their path
# below bench/ (a benchmark renamed between the trees is listed with only one side). Needs python3.
set -euo pipefail
old="${1:?usage: bench-compare.sh OLD_BUILD_DIR NEW_BUILD_DIR [ROUNDS] [BINARY_FILTER] [BENCHMARK_FILTER]}"
new="${2:?usage: bench-compare.sh OLD_BUILD_DIR NEW_BUILD_DIR [ROUNDS] [BINARY_FILTER] [BENCHMARK_FILTER]}"
rounds="${3:-3}"
binfilter="${4:-.}"
benchfilter="${5:-.}"
out="$(mktemp -d)"
mapfile -t bins < <(cd "$new/bench" && find . -type f -perm -u+x -name '*_benchmark' | sort | grep -E "$binfilter")
for ((r = 0; r < rounds; ++r)); do
  for b in "${bins[@]}"; do
    name="$(basename "$b")"
    for side in old new; do
      dir="$old"; [ "$side" = new ] && dir="$new"
      exe="$(find "$dir/bench" -type f -name "$name" | head -1)"
      [ -n "$exe" ] || continue
      echo "bench-compare: round $((r + 1))/$rounds $side $name" >&2
      "$exe" --benchmark_filter="$benchfilter" --benchmark_min_time=0.2 --benchmark_format=json \
        >"$out/$side.$name.$r.json" 2>/dev/null || echo "bench-compare: $side $name failed" >&2
    done
  done
done
python3 - "$out" <<'PY'
import json, glob, os, statistics, sys, collections
out = sys.argv[1]
times = collections.defaultdict(lambda: {"old": [], "new": []})
for f in glob.glob(os.path.join(out, "*.json")):
    side = os.path.basename(f).split(".")[0]
    try:
        data = json.load(open(f))
    except Exception:
        continue
    for b in data.get("benchmarks", []):
        if b.get("run_type") == "aggregate":
            continue
        unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b.get("time_unit", "ns")]
        times[b["name"]][side].append(b["real_time"] * unit)
def fmt(s):
    return "-" if s is None else (f"{s*1e9:.0f} ns" if s < 1e-6 else f"{s*1e6:.2f} us" if s < 1e-3 else f"{s*1e3:.2f} ms")
print(f"{'benchmark':70s} {'old':>12s} {'new':>12s} {'new/old':>8s}")
for name in sorted(times):
    o = statistics.median(times[name]["old"]) if times[name]["old"] else None
    n = statistics.median(times[name]["new"]) if times[name]["new"] else None
    ratio = f"{n / o:.2f}" if o and n else "-"
    print(f"{name[:70]:70s} {fmt(o):>12s} {fmt(n):>12s} {ratio:>8s}")
PY
