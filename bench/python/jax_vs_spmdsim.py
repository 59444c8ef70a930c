"""One shard_map program, both engines, one run: a matmul, a psum and an all_gather over a mesh of N devices, run by
JAX on N host CPU devices (--xla_force_host_platform_device_count=N) and by spmdsim's ShardMap on a cpu:N topology,
for N = 8, 64, 512. Each (engine, N) runs in a fresh process, so that its peak resident memory is its own; the table
gives the first call (JAX: trace + compile + run; spmdsim: build + run), the median of the next calls, and the peak
RSS of the process (Python, numpy and the engine included; `import-only` is the same process before the first call).

    build/venv/bin/python bench/python/jax_vs_spmdsim.py --build build/dev [--devices 8,64,512] [--calls 5]

The program (per device): y = psum(x_block @ w, 'x'); z = all_gather(x_block @ w, 'x', tiled=True), with x [4N, 64]
split over 'x' (a [4, 64] block per device) and w [64, 64] replicated; both outputs replicated (out_specs P()), with
check_vma=False on both sides (neither counts all_gather's result as replicated by type).
"""
import argparse
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import time

BLOCK_ROWS, FEATURES = 4, 64


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def inputs(n):
    import numpy as np
    rng = np.random.default_rng(0)
    x = rng.integers(-4, 5, size=(BLOCK_ROWS * n, FEATURES)).astype(np.float32)
    w = rng.integers(-4, 5, size=(FEATURES, FEATURES)).astype(np.float32)
    return x, w


def run_jax(n, calls):
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={n}"
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax
    import numpy as np
    from jax.sharding import Mesh, PartitionSpec as P
    x, w = inputs(n)
    rss_import = peak_rss_mib()
    mesh = Mesh(np.array(jax.devices()[:n]), ("x",))

    def body(xb, wb):
        h = xb @ wb
        return jax.lax.psum(h, "x"), jax.lax.all_gather(h, "x", tiled=True)

    # check_vma=False on both sides: neither JAX 0.10.2's type system nor spmdsim's replication check counts
    # all_gather's result as replicated; the computation is the same.
    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P("x", None), P()), out_specs=(P(), P()), check_vma=False))
    t0 = time.perf_counter()
    y, z = f(x, w)
    jax.block_until_ready((y, z))
    first = time.perf_counter() - t0
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        jax.block_until_ready(f(x, w))
        times.append(time.perf_counter() - t0)
    return {"first_s": first, "median_s": statistics.median(times), "rss_import_mib": rss_import,
            "rss_mib": peak_rss_mib(), "check": float(np.asarray(y).sum()), "z_shape": list(np.asarray(z).shape)}


def run_spmdsim(n, calls):
    import numpy as np
    import spmdsim
    x, w = inputs(n)
    rss_import = peak_rss_mib()
    mesh = spmdsim.Mesh(np.arange(n), ("x",), topology=spmdsim.Topology(f"cpu:{n}"))
    p = spmdsim.Program()
    xb, wb = p.input("x"), p.input("w")
    h = p.matmul(xb, wb)
    p.returns(p.psum(h, "x"), p.all_gather(h, "x", tiled=True))
    f = spmdsim.ShardMap(p, mesh, in_specs=(spmdsim.P("x", None), spmdsim.P()), out_specs=(spmdsim.P(), spmdsim.P()),
                         check_vma=False)
    t0 = time.perf_counter()
    (y, z), _ = f(x, w, check=False)
    first = time.perf_counter() - t0
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        f(x, w, check=False)
        times.append(time.perf_counter() - t0)
    return {"first_s": first, "median_s": statistics.median(times), "rss_import_mib": rss_import,
            "rss_mib": peak_rss_mib(), "check": float(np.asarray(y).sum()), "z_shape": list(np.asarray(z).shape)}


def child(engine, n, calls):
    result = (run_jax if engine == "jax" else run_spmdsim)(n, calls)
    print(json.dumps(result))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build/dev", help="build tree whose python/ holds the spmdsim module")
    parser.add_argument("--devices", default="8,64,512")
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--child", nargs=2, metavar=("ENGINE", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.calls)
        return
    env = dict(os.environ)
    env["PYTHONPATH"] = str(pathlib.Path(args.build).resolve() / "python")
    rows = []
    for n in [int(v) for v in args.devices.split(",")]:
        results = {}
        for engine in ("jax", "spmdsim"):
            p = subprocess.run([sys.executable, __file__, "--child", engine, str(n), "--calls", str(args.calls)],
                               capture_output=True, text=True, env=env)
            if p.returncode != 0:
                sys.exit(f"{engine} on {n} devices failed:\n{p.stderr}")
            results[engine] = json.loads(p.stdout.strip().splitlines()[-1])
        j, s = results["jax"], results["spmdsim"]
        assert j["check"] == s["check"] and j["z_shape"] == s["z_shape"], (j, s)
        rows.append((n, j, s))
    print("| devices | JAX first call [s] | spmdsim first call [s] | JAX per call [ms] | spmdsim per call [ms] | "
          "JAX peak RSS [MiB] (import) | spmdsim peak RSS [MiB] (import) |")
    print("|---|---|---|---|---|---|---|")
    for n, j, s in rows:
        print(f"| {n} | {j['first_s']:.2f} | {s['first_s']:.3f} | {j['median_s'] * 1e3:.2f} | "
              f"{s['median_s'] * 1e3:.2f} | {j['rss_mib']:.0f} ({j['rss_import_mib']:.0f}) | "
              f"{s['rss_mib']:.0f} ({s['rss_import_mib']:.0f}) |")


if __name__ == "__main__":
    main()
