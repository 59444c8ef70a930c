#!/usr/bin/env bash
# Runs the collectives sweep (bench/sim/collectives_benchmark.cc) with every benchmark in its own process and
# prints the markdown table of docs/runtime.md, "Collectives sweep (algbw/busbw)": every figure is the median
# of 3 repetitions (~3 minutes on 2 cores).
#
#   scripts/collectives-sweep.sh [extra benchmark flags...]      # e.g. --benchmark_repetitions=1
#
# Why one process per benchmark: a fresh process per point is the analogue of nccl-tests' buffers allocated
# once, makes BM_Scale4096's peak_rss_MiB its own, and keeps the runtime's process-wide pool of freed buffers
# (sim/array.cc) from carrying one point's buffers into the next. The pool used to keep stale sizes for ever,
# which made all_to_all_rows at N=8, 64 MiB take 105 ms at the end of a one-process sweep instead of 35 ms;
# it now evicts the least recently returned sizes (docs/runtime.md), and that point takes the same time after
# other sizes as alone.
# Output: the table on stdout; the merged JSON in build/bench/collectives-sweep.json.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bench="${root}/build/bench/bench/sim/sim_collectives_benchmark"
if [ ! -x "${bench}" ]; then
  (cd "${root}" && cmake --preset bench >/dev/null && cmake --build --preset bench -j2 --target sim_collectives_benchmark >&2)
fi
out="$(mktemp -d)"
trap 'rm -rf "${out}"' EXIT
i=0
while read -r name; do
  i=$((i + 1))
  echo "== ${name}" >&2
  # Benchmark names hold no regex metacharacters but '.', which only matches itself here.
  "${bench}" --benchmark_filter="^${name}\$" --benchmark_repetitions=3 --benchmark_format=json \
    --benchmark_out="${out}/$(printf %03d "${i}").json" --benchmark_out_format=json "$@" >/dev/null
done < <("${bench}" --benchmark_list_tests)

/usr/bin/python3 - "${out}" "${root}/build/bench/collectives-sweep.json" <<'PY'
import glob, json, os, re, sys
runs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(sys.argv[1], "*.json")))]
# The median of the repetitions (every counter is a median too), or the single run with one repetition.
def pick(r):
    medians = [b for b in r["benchmarks"] if b.get("aggregate_name") == "median"]
    return medians or [b for b in r["benchmarks"] if b.get("run_type") != "aggregate"]
merged = {"context": runs[0]["context"], "benchmarks": [b for r in runs for b in pick(r)]}
merged["context"]["load_avg_per_run"] = [r["context"].get("load_avg") for r in runs]
json.dump(merged, open(sys.argv[2], "w"), indent=1)

def human(b):
    b = int(b)
    for unit, f in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= f and b % f == 0:
            return f"{b // f} {unit}"
    return f"{b} B"

def us(sec):
    v = sec * 1e6
    return f"{v:.3g}" if v < 1000 else f"{v:,.0f}"

def gbs(v):
    v /= 1e9
    return f"{v:.3g}" if v < 1000 else f"{v:,.0f}"

memcpy = {}
for b in merged["benchmarks"]:
    if b["name"].startswith("BM_Memcpy"):
        memcpy[int(b["size"])] = b["algbw"]
        print(f"memcpy {human(b['size'])}: {b['real_time']:.3f} ms, {gbs(b['algbw'])} GB/s")
    elif b["name"].startswith("BM_Scale4096"):
        print(f"BM_Scale4096 (64x64 mesh, psum over x + all_gather over y of 1 KiB per device): "
              f"{b['episode'] * 1e3:.2f} ms per psum + all_gather, peak RSS {b['peak_rss_MiB']:.1f} MiB")
print()
print("| collective | N | size S | in / out per device | time per collective (us) | algbw (GB/s) | busbw (GB/s) |")
print("|---|---|---|---|---|---|---|")
for b in merged["benchmarks"]:
    m = re.match(r"BM_Collective/(\w+)/devices:(\d+)/bytes:(\d+)", b["name"])
    if not m:
        continue
    print(f"| {m[1]} | {m[2]} | {human(b['size'])} | {human(b['in_per_rank'])} / {human(b['out_per_rank'])} | "
          f"{us(b['episode'])} | {gbs(b['algbw'])} | {gbs(b['busbw'])} |")
loads = [l for l in merged["context"]["load_avg_per_run"] if l]
if loads:
    print(f"\nload average (1 min) during the runs: {min(l[0] for l in loads):.2f} - {max(l[0] for l in loads):.2f}")
PY
