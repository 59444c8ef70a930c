#!/usr/bin/env bash
# Runs the peers that cannot live in our benchmark binary (Open MPI needs its own processes) next to
# spmdsim's runtime benchmark, and prints the figures side by side with their ratios.
#
#   scripts/bench-peers.sh            # installs Open MPI if missing, builds, runs (~3 minutes on 2 cores)
#
# Peers: bench/peers/*.cpp (or $SPMDSIM_PEERS), built into build/peers/.
# Ours:  build/bench/bench/sim/sim_runtime_benchmark (preset `bench`; built here if missing).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
peers_src="${SPMDSIM_PEERS:-${root}/bench/peers}"
out="${root}/build/peers"
mkdir -p "${out}"

if ! command -v mpicxx >/dev/null || ! command -v mpirun >/dev/null; then
  echo "bench-peers: installing Open MPI (libopenmpi-dev openmpi-bin)" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq libopenmpi-dev openmpi-bin >&2
fi

# Boost.Fiber: the barrier peer here and in sim_runtime_benchmark (BM_BoostFiberBarrier, built when found).
if [ ! -e /usr/lib/x86_64-linux-gnu/libboost_fiber.so ] && command -v apt-get >/dev/null; then
  echo "bench-peers: installing Boost.Fiber (libboost-fiber-dev)" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq libboost-fiber-dev >&2 ||
    echo "bench-peers: could not install libboost-fiber-dev; the fiber peers are skipped" >&2
  [ -d "${root}/build/bench" ] && rm -f "${root}/build/bench/CMakeCache.txt"  # let CMake find it
fi

echo "== building peers into ${out}" >&2
mpicxx -O2 "${peers_src}/mpi_allreduce.cpp" -o "${out}/mpi_allreduce"
g++ -O2 -std=c++20 "${peers_src}/ctx_barrier.cpp" -lboost_context -o "${out}/ctx_barrier"
# Boost.Fiber is optional (libboost-fiber-dev): its headers can be present without the library.
g++ -O2 -std=c++20 "${peers_src}/fiber_barrier.cpp" -lboost_fiber -lboost_context -o "${out}/fiber_barrier" 2>/dev/null ||
  echo "bench-peers: Boost.Fiber library not installed; skipping the fiber_barrier peer" >&2
g++ -O2 -std=c++20 "${peers_src}/tbb_suspend_barrier.cpp" -ltbb -o "${out}/tbb_suspend_barrier"

bench="${root}/build/bench/bench/sim/sim_runtime_benchmark"
(cd "${root}" && cmake --preset bench >/dev/null && cmake --build --preset bench -j2 --target sim_runtime_benchmark >&2)

mpirun_flags=(--allow-run-as-root --oversubscribe)
for np in 2 4 8; do
  echo "== mpi_allreduce np=${np}" >&2
  mpirun "${mpirun_flags[@]}" -np "${np}" "${out}/mpi_allreduce" | tee "${out}/mpi_np${np}.txt"
done
echo "== raw boost::context round-robin (one thread)" >&2
"${out}/ctx_barrier" | tee "${out}/ctx_barrier.txt"

echo "== spmdsim runtime benchmark" >&2
"${bench}" --benchmark_filter='BM_RuntimeBarrier|BM_RuntimePsum|BM_StdBarrier|BM_BoostFiber|BM_Memcpy' --benchmark_min_time=0.2 \
  --benchmark_format=json --benchmark_out="${out}/spmdsim.json" --benchmark_out_format=json >/dev/null

/usr/bin/python3 - "${out}" <<'PY'
import json, re, sys, glob, os
out = sys.argv[1]
mpi = {}       # (np, bytes) -> us
mpi_barrier = {}
for path in glob.glob(os.path.join(out, "mpi_np*.txt")):
    for line in open(path):
        m = re.match(r"np=(\d+) bytes=(\d+) median_us=([\d.]+)", line)
        if m: mpi[(int(m[1]), int(m[2]))] = float(m[3])
        m = re.match(r"np=(\d+) barrier_us=([\d.]+)", line)
        if m: mpi_barrier[int(m[1])] = float(m[2])
ours = {}
for b in json.load(open(os.path.join(out, "spmdsim.json")))["benchmarks"]:
    name = b["name"]
    m = re.match(r"BM_RuntimePsum/devices:(\d+)/bytes:(\d+)", name)
    if m: ours[("psum", int(m[1]), int(m[2]))] = b["episode"] * 1e6
    m = re.match(r"BM_RuntimeBarrier/devices:(\d+)/workers:0", name)
    if m: ours[("barrier", int(m[1]))] = b["episode"] * 1e6
    m = re.match(r"BM_(StdBarrierThreads|BoostFiberBarrier)/devices:(\d+)", name)
    if m: ours[(m[1], int(m[2]))] = b["episode"] * 1e6
    m = re.match(r"BM_RuntimePsum/devices:(\d+)/bytes:(\d+)", name)
    if m: ours[("moved", int(m[1]), int(m[2]))] = b["moved"] / 1e9
    m = re.match(r"BM_MemcpyReference/bytes:(\d+)", name)
    if m: ours[("memcpy", int(m[1]))] = b["moved"] / 1e9
print("\nall-reduce of float32 (median us per call; MPI's smallest message is 8 B = 2 floats, ours 4 B)")
print(f"{'devices':>7} {'bytes':>9} {'spmdsim us':>11} {'MPI us':>9} {'MPI/spmdsim':>11} {'spmdsim algbw GB/s':>19} {'MPI algbw GB/s':>15}")
for (np_, size), mpi_us in sorted(mpi.items()):
    our_size = 4 if size == 8 else size
    key = ("psum", np_, our_size)
    if key not in ours: continue
    us = ours[key]
    print(f"{np_:>7} {our_size:>9} {us:>11.2f} {mpi_us:>9.2f} {mpi_us/us:>11.1f}x {our_size/us/1e3:>19.3f} {size/mpi_us/1e3:>15.3f}")
raw = {}  # the raw boost::context round-robin peer (one thread)
for line in open(os.path.join(out, "ctx_barrier.txt")):
    m = re.match(r"raw fibers n=(\d+) per-episode ([\d.]+) us", line)
    if m: raw[int(m[1])] = float(m[2])
def cell(v, us):
    return f"{v:.3f} ({v/us:.1f}x)" if v else "-"
print("\nbarrier episode, us (xN = how many times spmdsim's time)")
print(f"{'devices':>7} {'spmdsim':>9} {'MPI_Barrier':>16} {'std::barrier threads':>21} {'Boost.Fiber':>16} {'raw ctx 1 thread':>17}")
for n in (2, 4, 8, 64, 512, 4096):
    if ("barrier", n) not in ours: continue
    us = ours[("barrier", n)]
    print(f"{n:>7} {us:>9.3f} {cell(mpi_barrier.get(n), us):>16} {cell(ours.get(('StdBarrierThreads', n)), us):>21} "
          f"{cell(ours.get(('BoostFiberBarrier', n)), us):>16} {cell(raw.get(n), us):>17}")
print("\n16 MiB psum: bytes the algorithm must move ((n+1) * 16 MiB) per second vs memcpy moving as many bytes (GB/s)")
for n, copy in ((2, 24 << 20), (8, 72 << 20)):
    moved, ref = ours.get(("moved", n, 16 << 20)), ours.get(("memcpy", copy))
    if moved and ref: print(f"{n:>7} devices: {moved:.1f} vs memcpy {ref:.1f} = {100 * moved / ref:.0f}%")
PY
