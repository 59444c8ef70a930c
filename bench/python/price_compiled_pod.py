"""What a compiled module of a pod costs to make and to price: the Llama 2 7B training step (spmdsim.models, FSDP
x tensor parallelism, full remat, AdamW) compiled by libtpu for a 2048-chip TPU v5p pod, then priced by spmdsim.

  PYTHONPATH=build/dev/python build/venv/bin/python bench/python/price_compiled_pod.py [--target tpu-v5p:8x16x16]

Prints the compile time (the compiler's, in its subprocess; a second run is a cache hit), the module's size, and the
wall time of spmdsim's prediction of it (parse, verify, support check, memory estimate, pricing), best of 3.
"""
import argparse
import time

import spmdsim
from spmdsim import models


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--target", default="tpu-v5p:8x16x16")
    p.add_argument("--tensor", type=int, default=4)
    p.add_argument("--batch", type=int, default=2048)
    p.add_argument("--length", type=int, default=4096)
    args = p.parse_args()
    n = spmdsim.resolve_target(args.target).num_devices
    mesh = spmdsim.abstract_mesh(args.target, {"fsdp": n // args.tensor, "tensor": args.tensor})
    cfg = models.DecoderConfig()
    step, step_args = models.train_step_and_args(cfg, mesh, args.batch, args.length)
    start = time.time()
    module = spmdsim.compile_for(step, *step_args, target=args.target)
    print(f"{args.target}: {n} devices; compiled in {module.compile_seconds:.1f} s by the compiler "
          f"({time.time() - start:.1f} s with lowering; cache hit: {module.cache_hit}); module "
          f"{len(module.text) / 1e6:.1f} MB, {module.text.count(chr(10))} lines")
    best = None
    for _ in range(3):
        start = time.time()
        _, report = module.predict()
        seconds = time.time() - start
        best = seconds if best is None else min(best, seconds)
    h = report["hlo"]
    print(f"priced in {best:.2f} s (best of 3): step {report['totals']['predicted_seconds']:.3f} s, HFU {h['hfu']:.0%}, "
          f"{h['instructions']} instructions, {h['executed_ops']} executed; memory {h['peak_bytes'] / 2**30:.2f} GiB "
          f"(compiler: {(module.memory_analysis['argument_size_in_bytes'] + module.memory_analysis['output_size_in_bytes'] + module.memory_analysis['temp_size_in_bytes'] - module.memory_analysis['alias_size_in_bytes']) / 2**30:.2f} GiB)")


if __name__ == "__main__":
    main()
