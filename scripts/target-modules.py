#!/usr/bin/env python3
"""Prices every module of tests/hlo/testdata/targets (what libtpu and XLA's CUDA backend compiled, with the compiler's
memory analysis beside each) and prints docs/hlo.md's table: the predicted step, its HFU and exposed communication,
and spmdsim's per-device memory against the compiler's.

  PYTHONPATH=build/dev/python build/venv/bin/python scripts/target-modules.py

Each module runs on the spmdsim topology of its compile, its logical devices laid out as the compile laid them out
(JAX's create_device_mesh over the target's devices, which spmdsim reproduces; for several TPU slices, one slice's
program on the first slice). TPU7x modules have no spmdsim topology and are left out.
"""
import glob
import json
import os
import sys

import numpy as np

import spmdsim

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def topology_of(meta):
    kw = meta["topology_kwargs"]
    if meta["platform"] == "cuda":
        return spmdsim.Topology(f"dgx-h100:{meta['num_devices'] // 8}")
    name = kw["topology_name"]
    if name.startswith("tpu7x"):
        return None
    return spmdsim.Topology(f"tpu-{name}", num_slices=kw.get("num_slices", 1))


def main():
    rows = []
    for path in sorted(glob.glob(os.path.join(ROOT, "tests/hlo/testdata/targets/*.txt"))):
        meta = json.load(open(path[:-4] + ".json"))
        topology = topology_of(meta)
        if topology is None:
            continue
        text = open(path).read()
        partitions = int(text.split("num_partitions=")[1].split(",")[0]) if "num_partitions=" in text else 1
        # One device, or the devices of the module (one slice's on several slices) as create_device_mesh lays them.
        devices = list(topology.devices)[:partitions]
        ids = [0] if partitions == 1 else [d.id for d in np.asarray(spmdsim.create_device_mesh([partitions], devices)).flat]
        _, r = spmdsim.run_hlo(text, topology=topology, device_assignment=list(int(i) for i in ids),
                               mesh={"data": partitions}, abstract=True, name=os.path.basename(path))
        m, h = meta["memory_analysis"], r["hlo"]
        xla = m["argument_size_in_bytes"] + m["output_size_in_bytes"] + m["temp_size_in_bytes"] - m["alias_size_in_bytes"]
        rows.append((os.path.basename(path)[:-4], str(topology), r["totals"]["predicted_seconds"], h["hfu"],
                     h["exposed_comm_seconds"], h["peak_bytes"], xla, h["temp_bytes"], m["temp_size_in_bytes"]))
    print("| module | topology | step | HFU | exposed comm. | memory (spmdsim) | memory (compiler) | difference | "
          "temporaries (spmdsim / compiler) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, topo, step, hfu, exposed, ours, xla, temp, xla_temp in rows:
        print(f"| {name} | {topo} | {step * 1e3:.3f} ms | {hfu:.0%} | {exposed * 1e3:.3f} ms | {ours / 2**20:.2f} MiB | "
              f"{xla / 2**20:.2f} MiB | {(ours - xla) / xla:+.1%} | {temp / 2**20:.2f} / {xla_temp / 2**20:.2f} MiB |")


if __name__ == "__main__":
    sys.exit(main())
