#!/usr/bin/env python3
"""Per-call cost of four calls from Python (timeit) next to the same calls from C++ (Google Benchmark,
bench/python/python_calls_benchmark.cc), and the difference: the binding's overhead.

    python3 bench/python/binding_overhead.py [--build build/bench]

The build tree must hold the Python module (<build>/python) and the benchmark binary
(<build>/bench/python/python_python_calls_benchmark); the `bench` preset builds both:
    cmake --preset bench && cmake --build --preset bench --target spmdsim_python python_python_calls_benchmark
Both sides are measured in CPU time, so that other processes on a shared machine inflate neither: of the calling
thread for the first calls (Python: time.thread_time; C++: the benchmark's cpu_time), of the whole process for
run(), which hands the simulation to a worker thread (Python: time.process_time; C++: the benchmark's process CPU
time). --rounds rounds (default 5) alternate the two sides (one C++ benchmark run, then one timeit repeat of each
Python call), so that a change of load hits both; the table gives the medians over the rounds.
Target (issue 14): overhead < 2 us per call.

run() takes ~2 ms, and on a shared 2-core machine its time moves by more than any binding cost, so
--instructions also counts the instructions each side executes per run() (all threads), under
`valgrind --tool=callgrind`: each side runs twice with a different number of calls, and the difference in
instructions over the difference in calls (both counted as calls of spmdsim::LoadScenario) is the per-call count,
free of start-up costs and of the machine's load. It takes about a minute.
"""
import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time
import timeit

ROOT = pathlib.Path(__file__).resolve().parents[2]


def python_us(stmt, setup_globals, number, process=False):
    timer = time.process_time if process else time.thread_time
    return timeit.Timer(stmt, globals=setup_globals, timer=timer).timeit(number=number) / number * 1e6


def cpp_us(binary):
    """{benchmark run name: CPU time per call [us]} of one run of the benchmark binary."""
    out = subprocess.run([str(binary), "--benchmark_format=json"], capture_output=True, text=True, check=True)
    runs = {}
    for b in json.loads(out.stdout)["benchmarks"]:
        scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3}[b["time_unit"]]
        runs[b["run_name"]] = b["cpu_time"] * scale
    return runs


def callgrind_per_call(command_for, counts):
    """Instructions per call of `command_for(n)` (a command making about n calls), from two callgrind runs."""
    totals = []
    for n in counts:
        with tempfile.TemporaryDirectory() as tmp:
            out = pathlib.Path(tmp) / "callgrind.out"
            subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command_for(n)],
                           check=True, capture_output=True)
            totals.append(callgrind_totals(out.read_text()))
    (i0, c0), (i1, c1) = totals
    return (i1 - i0) / (c1 - c0)


def callgrind_totals(text):
    """(instructions executed, calls of spmdsim::LoadScenario) from a callgrind output file."""
    names, calls, instructions = {}, 0, 0
    current_cfn, summary = None, re.search(r"^(?:summary|totals): (\d+)", text, re.M)
    instructions = int(summary.group(1))
    for line in text.splitlines():
        m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line)
        if m:
            if m.group(2):
                names[m.group(1)] = m.group(2)
            if line.startswith("cfn="):
                current_cfn = names.get(m.group(1), "")
            continue
        if line.startswith("calls=") and current_cfn and current_cfn.startswith("spmdsim::LoadScenario("):
            calls += int(line.split("=")[1].split()[0])
    return instructions, calls


def instruction_counts(build, binary, scenario):
    """Per-call instructions of run(scenario, abstract=True, threads=1) from Python and of BM_RunAbstract."""
    loop = ("import sys; sys.path.insert(0, sys.argv[1]); import spmdsim\n"
            "for _ in range(int(sys.argv[3])): spmdsim.run(sys.argv[2], abstract=True, threads=1)")
    py = callgrind_per_call(lambda n: [sys.executable, "-c", loop, str(build / "python"), str(scenario), str(n)],
                            (10, 30))
    cpp = callgrind_per_call(lambda t: [str(binary), "--benchmark_filter=BM_RunAbstract", f"--benchmark_min_time={t}"],
                             (0.5, 3))
    print(f"run(cpu8-quick, abstract=True), instructions per call (callgrind, all threads): Python {py / 1e6:.3f} M, "
          f"C++ {cpp / 1e6:.3f} M, overhead {(py - cpp) / 1e3:+.1f} k ({(py - cpp) / cpp:+.2%})")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=str(ROOT / "build" / "bench"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--instructions", action="store_true",
                        help="also count run()'s instructions per call on both sides (callgrind)")
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
        # The maps are cached per (sharding, shape) as in JAX; the first call builds the dict.
        ("devices_indices_map, 8 devices, first call", "spmdsim.clear_caches(); small.devices_indices_map(shape)",
         20000, "BM_DevicesIndicesMap/devices:8"),
        ("devices_indices_map, 256 devices, first call", "spmdsim.clear_caches(); big.devices_indices_map(shape)",
         500, "BM_DevicesIndicesMap/devices:256"),
        ("get_corrected_named_sharding", "spmdsim.get_corrected_named_sharding(cshape, spec, mesh=mesh)", 20000,
         "BM_GetCorrectedNamedSharding"),
        ("logical_to_mesh_axes (rules tuple)", "spmdsim.logical_to_mesh_axes(names, rules)", 50000,
         "BM_LogicalToMeshAxes"),
        ("run(cpu8-quick, abstract=True)", "spmdsim.run(scenario, abstract=True, threads=1)", 20,
         "BM_RunAbstract/process_time/real_time"),
    ]
    rows.append(("logical_to_mesh_axes (context rules)", "spmdsim.logical_to_mesh_axes(names)", 50000,
                 "BM_LogicalToMeshAxes"))
    binary = build / "bench" / "python" / "python_python_calls_benchmark"
    cpp_runs, py_runs = [], {label: [] for label, *_ in rows}
    for label, stmt, number, bench in rows:  # warm-up: first-call costs (caches, the thread pool) are not per call
        python_us(stmt, g, 1)
    for _ in range(args.rounds):
        if binary.exists():
            cpp_runs.append(cpp_us(binary))
        for label, stmt, number, bench in rows:
            if "context rules" in label:
                with spmdsim.logical_axis_rules(rules):
                    py_runs[label].append(python_us(stmt, g, number))
            else:
                py_runs[label].append(python_us(stmt, g, number, process="process_time" in bench))
    print(f"{'call':46} {'Python [us]':>12} {'C++ [us]':>10} {'overhead [us]':>14}")
    for label, stmt, number, bench in rows:
        py = statistics.median(py_runs[label])
        c = statistics.median(r[bench] for r in cpp_runs) if cpp_runs else None
        print(f"{label:46} {py:12.2f} {'' if c is None else f'{c:10.2f}':>10} {'' if c is None else f'{py - c:14.2f}'}")
    if not cpp_runs:
        print(f"(no C++ figures: {binary} not built)")
    print(f"(medians of {args.rounds} alternating rounds)")
    if args.instructions and binary.exists():
        instruction_counts(build, binary, scenario)


if __name__ == "__main__":
    main()
