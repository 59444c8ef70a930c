#!/usr/bin/env python3
"""Per-call cost of four calls from Python (timeit) next to the same calls from C++ (Google Benchmark,
bench/python/python_calls_benchmark.cc), and the difference: the binding's overhead.

    python3 bench/python/binding_overhead.py [--build build/bench]

The build tree must hold the Python module (<build>/python) and the benchmark binary
(<build>/bench/python/python_python_calls_benchmark); the `bench` preset builds both:
    cmake --preset bench && cmake --build --preset bench --target spmdsim_python python_python_calls_benchmark
Medians of --repetitions repetitions (default 5) on both sides, in CPU time, so that other processes on a shared
machine inflate neither side: of the calling thread for the first calls (Python: time.thread_time; C++: the
benchmark's cpu_time), of the whole process for run(), which hands the simulation to a worker thread (Python:
time.process_time; C++: the benchmark's process CPU time). Target (issue 14): overhead < 2 us per call.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time
import timeit

ROOT = pathlib.Path(__file__).resolve().parents[2]


def python_us(stmt, setup_globals, number, repetitions, process=False):
    timer = time.process_time if process else time.thread_time
    times = timeit.Timer(stmt, globals=setup_globals, timer=timer).repeat(number=number, repeat=repetitions)
    return statistics.median(times) / number * 1e6


def cpp_us(binary, repetitions):
    out = subprocess.run([str(binary), "--benchmark_format=json", f"--benchmark_repetitions={repetitions}"],
                         capture_output=True, text=True, check=True)
    runs = {}
    for b in json.loads(out.stdout)["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3}[b["time_unit"]]
        runs.setdefault(b["run_name"], []).append(b["cpu_time"] * scale)
    return {name: statistics.median(t) for name, t in runs.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=str(ROOT / "build" / "bench"))
    parser.add_argument("--repetitions", type=int, default=5)
    args = parser.parse_args()
    build = pathlib.Path(args.build)
    sys.path.insert(0, str(build / "python"))
    import spmdsim
    from spmdsim import P

    small = spmdsim.NamedSharding(spmdsim.make_mesh((2, 4), ("data", "model"), topology=spmdsim.Topology("cpu:8")),
                                  P("data", "model"))
    big = spmdsim.NamedSharding(spmdsim.make_mesh((16, 16), ("data", "model"), topology=spmdsim.Topology("tpu-v5e:16x16")),
                                P("data", "model"))
    mesh = spmdsim.Mesh(__import__("numpy").arange(16).reshape(2, 4, 2), ("dp", "fsdp", "tp"))
    spec = P(("dp", "fsdp", "tp"), "sp", "tp")
    rules = tuple(spmdsim.standard_logical_axis_rules(2, 2))
    names = ("batch", "length", "embed")
    scenario = ROOT / "scenarios" / "cpu8-quick.yaml"
    g = dict(spmdsim=spmdsim, small=small, big=big, mesh=mesh, spec=spec, rules=rules, names=names,
             scenario=scenario, shape=(64, 1024), cshape=(8, 1024, 6))

    rows = [
        ("devices_indices_map, 8 devices", "small.devices_indices_map(shape)", 20000, "BM_DevicesIndicesMap/devices:8"),
        ("devices_indices_map, 256 devices", "big.devices_indices_map(shape)", 500, "BM_DevicesIndicesMap/devices:256"),
        ("get_corrected_named_sharding", "spmdsim.get_corrected_named_sharding(cshape, spec, mesh=mesh)", 20000,
         "BM_GetCorrectedNamedSharding"),
        ("logical_to_mesh_axes (rules tuple)", "spmdsim.logical_to_mesh_axes(names, rules)", 50000,
         "BM_LogicalToMeshAxes"),
        ("run(cpu8-quick, abstract=True)", "spmdsim.run(scenario, abstract=True, threads=1)", 20,
         "BM_RunAbstract/process_time/real_time"),
    ]
    binary = build / "bench" / "python" / "python_python_calls_benchmark"
    cpp = cpp_us(binary, args.repetitions) if binary.exists() else {}
    print(f"{'call':38} {'Python [us]':>12} {'C++ [us]':>10} {'overhead [us]':>14}")
    for label, stmt, number, bench in rows:
        py = python_us(stmt, g, number, args.repetitions, process="process_time" in bench)
        c = cpp.get(bench)
        overhead = "" if c is None else f"{py - c:14.2f}"
        print(f"{label:38} {py:12.2f} {'' if c is None else f'{c:10.2f}':>10} {overhead}")
    with spmdsim.logical_axis_rules(rules):
        py = python_us("spmdsim.logical_to_mesh_axes(names)", g, 50000, args.repetitions)
    c = cpp.get("BM_LogicalToMeshAxes")
    print(f"{'logical_to_mesh_axes (context rules)':38} {py:12.2f} {'' if c is None else f'{c:10.2f}':>10} "
          f"{'' if c is None else f'{py - c:14.2f}'}")
    if not cpp:
        print(f"(no C++ figures: {binary} not built)")


if __name__ == "__main__":
    main()
