#!/usr/bin/env python3
"""Published JAX runs on TPU, predicted through the compiled-program route and through the model workload.

For each row: MaxText's decoder as it was when the row was measured (spmdsim.models.DecoderConfig, style
"maxtext-2023"), its batch, remat policy, FSDP x tensor mesh and the LIBTPU_INIT_ARGS of the row's script, compiled
for the row's slice with libtpu (spmdsim.compile_for; cached, so re-pricing after a cost-model change takes
seconds), priced abstractly (run_hlo), and the same row through `spmdsim run --abstract` of a model scenario.
Writes one JSON per row under --out and, with --table, docs/target-validation.md's table from them.

Run outside the suite (each row compiles for minutes on a small machine):
  PYTHONPATH=build/dev/python build/venv/bin/python scripts/target-validation.py --out build/target-validation
  PYTHONPATH=build/dev/python build/venv/bin/python scripts/target-validation.py --out build/target-validation \
      --table > docs/target-validation.table.md
Rows: --list; one row: --only v5e-16b-1. Sources and the decoder of each row: docs/target-validation.md.
"""
import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
import time

# MaxText's scripts of late 2023 (MaxText/configs/v5e/*.sh of 2023-10-27, configs/v5p/*.sh of 2023-12-15).
V5E_FLAGS = ("--xla_tpu_enable_data_parallel_all_reduce_opt=true --xla_tpu_data_parallel_opt_different_sized_ops=true "
             "--xla_tpu_enable_async_collective_fusion=true --xla_tpu_enable_async_collective_fusion_fuse_all_gather=true "
             "--xla_tpu_enable_async_collective_fusion_multiple_steps=true --xla_tpu_overlap_compute_collective_tc=true "
             "--xla_enable_async_all_gather=true")
V5P_FLAGS = ("--xla_tpu_megacore_fusion_allow_ags=false --xla_enable_async_collective_permute=true "
             "--xla_tpu_enable_ag_backward_pipelining=true --xla_tpu_enable_data_parallel_all_reduce_opt=true "
             "--xla_tpu_data_parallel_opt_different_sized_ops=true --xla_tpu_enable_async_collective_fusion=true "
             "--xla_tpu_enable_async_collective_fusion_multiple_steps=true --xla_tpu_overlap_compute_collective_tc=true "
             "--xla_enable_async_all_gather=true")


@dataclasses.dataclass(frozen=True)
class Row:
    """One published measurement. scale: MaxText's global_parameter_scale of the late-2023 decoder (base 2560
    wide, 8 heads of 256, MLP 8192, 16 layers, vocab 32768, ReLU, attention and MLP in parallel, tied
    embeddings); tflops: the published TFLOP/s per chip; causal: whether MaxText halved the attention FLOPs in
    that TFLOP/s (from 2023-11-08)."""
    key: str
    label: str
    source: str
    topology: str           # one slice, spmdsim's preset name
    slices: int
    scale: int
    batch: int              # per device
    tensor: int
    remat: str              # MaxText's remat_policy
    tflops: float
    causal: bool
    flags: str


def _scales(scale):
    """MaxText's get_individual_scales: (embed, heads, mlp, layers) doublings of a power-of-two scale."""
    log2 = int(math.log2(scale))
    base, rem = divmod(log2, 3)
    heads = base + int(rem > 0)
    return base + int(rem > 1), heads, heads, base


def decoder_dims(scale):
    e, h, m, layers = _scales(scale)
    return {"d_model": 2560 << e, "n_heads": 8 << h, "d_ff": 8192 << m, "n_layers": 16 << layers,
            "head_dim": 256, "vocab": 32768}


def rows():
    out = []
    v5e = {16: (6, [120, 117, 117, 115, 111, 108]), 32: (4, [132, 128, 126, 125, 123, 119]),
           64: (2, [118, 112, 110, 108, 105, 99]), 128: (1, [110, 110, 108, 104, 100, 91])}
    for scale, (batch, tflops) in v5e.items():
        for i, t in enumerate(tflops):
            out.append(Row(f"v5e-{scale}b-{1 << i}", f"MaxText {scale}B on {1 << i} x v5e-256",
                           "MaxText/configs/v5e/README.md (2023-10-27)", "tpu-v5e:16x16", 1 << i, scale, batch,
                           16 if scale == 128 else 1, "full", t, False, V5E_FLAGS))
    v5p = [(32, 8, 4, "minimal", "tpu-v5p:4x4x4", "v5p-128", [328, 319]),
           (64, 4, 4, "minimal", "tpu-v5p:4x4x4", "v5p-128", [323, 309]),
           (128, 2, 8, "minimal", "tpu-v5p:4x4x8", "v5p-256", [315, 305]),
           (128, 2, 8, "minimal", "tpu-v5p:4x8x8", "v5p-512", [316, 274]),
           (256, 2, 8, "minimal", "tpu-v5p:8x8x8", "v5p-1024", [308, 289]),
           (512, 2, 16, "full", "tpu-v5p:8x8x8", "v5p-1024", [294, 282])]
    for scale, batch, tensor, remat, topo, name, tflops in v5p:
        for i, t in enumerate(tflops):
            out.append(Row(f"v5p-{scale}b-{name[4:]}-{1 << i}", f"MaxText {scale}B on {1 << i} x {name}",
                           "MaxText/configs/v5p/README.md (2023-12-15)", topo, 1 << i, scale, batch, tensor, remat,
                           t, True, V5P_FLAGS))
    return out


def maxtext_flops_per_device(row):
    """MaxText's calculate_training_tflops of the row's date: 6 x parameters x tokens plus the attention."""
    d = decoder_dims(row.scale)
    per_layer = 4 * d["d_model"] * d["n_heads"] * d["head_dim"] + 2 * d["d_model"] * d["d_ff"] + d["d_model"]
    params = d["n_layers"] * per_layer + d["vocab"] * d["d_model"] + d["d_model"]
    tokens = 2048 * row.batch
    attention = 12 * d["n_heads"] * d["n_layers"] * d["head_dim"] * 2048 * tokens
    return 6 * params * tokens + (attention / 2 if row.causal else attention), params


def _remat_name(remat):
    return {"full": "full", "minimal": "checkpoint_dots_with_no_batch_dims", "none": "none"}[remat]


def compiled_route(row, timeout, attention):
    import spmdsim
    from spmdsim.models import DecoderConfig, logical_rules, train_step_and_args
    chips = spmdsim.resolve_target(row.topology).num_devices
    cfg = DecoderConfig(style="maxtext-2023", n_kv_heads=decoder_dims(row.scale)["n_heads"],
                        remat=_remat_name(row.remat), attention=attention, **decoder_dims(row.scale))
    axes = {"data": row.slices, "fsdp": chips // row.tensor}
    if row.tensor > 1:
        axes["tensor"] = row.tensor
    mesh = spmdsim.target_mesh(row.topology, slices=row.slices, **axes)
    rules = logical_rules(tuple(axes), embed_activations_over_tensor=True)  # MaxText's activation_embed rule
    step, args = train_step_and_args(cfg, mesh, batch=row.batch * chips * row.slices, length=2048, rules=rules)
    flops, _ = maxtext_flops_per_device(row)
    started = time.time()
    result = spmdsim.from_jax(step, *args, target=row.topology, slices=row.slices, libtpu_init_args=row.flags,
                              dcn_axes={"data": row.slices}, timeout=timeout,
                              # a multi-slice module is one slice's program: its FLOPs and tokens
                              model_flops_per_step=flops * chips, tokens_per_step=2048 * row.batch * chips)
    report = result.report
    h = report["hlo"]
    return {"seconds": report["totals"]["predicted_seconds"], "mfu": h.get("mfu"),
            "exposed_comm_seconds": h.get("exposed_comm_seconds"), "peak_bytes": h.get("peak_bytes"),
            "compiler_memory": h.get("compiler_memory"), "target": h.get("target"),
            "wall_seconds": time.time() - started}


def model_route(row):
    """The same row as a model scenario through `spmdsim run --abstract --json`."""
    d = decoder_dims(row.scale)
    import spmdsim
    chips = spmdsim.resolve_target(row.topology).num_devices
    axes = {"data": 1, "fsdp": chips // row.tensor, "tensor": row.tensor}
    dcn = {"data": row.slices, "fsdp": 1, "tensor": 1}
    model = {
        "kind": "model", "name": row.key, "vocab": d["vocab"], "d_model": d["d_model"], "layers": d["n_layers"],
        "heads": d["n_heads"], "kv_heads": d["n_heads"], "head_dim": d["head_dim"], "d_ff": d["d_ff"],
        "activation": "gelu", "norm": "rmsnorm", "position": "rope", "tied_embeddings": True,
        "flash_attention": True, "seq": 2048, "dtype": "bfloat16", "stack": "maxtext",
        "micro_batch": row.batch * row.tensor, "global_batch": row.batch * chips * row.slices,
        "recompute": "full" if row.remat == "full" else "none",
        "parallel": {"data_axes": ["data", "fsdp"], "zero_stage": 3, "zero_axes": ["fsdp"]}}
    if row.tensor > 1:
        model["parallel"]["tensor_axes"] = ["tensor"]
    scenario = {"name": row.key, "topology": {"preset": row.topology, "slices": row.slices},
                "mesh": {"axes": axes, "dcn_axes": dcn}, "workloads": [model]}
    cli = os.environ.get("SPMDSIM_CLI", "build/dev/cli/spmdsim")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        json.dump(scenario, f)  # JSON is YAML
    run = subprocess.run([cli, "run", "--abstract", "--json", "-", f.name], capture_output=True, text=True)
    os.unlink(f.name)
    if run.returncode:
        return {"error": run.stderr.strip().splitlines()[-1] if run.stderr.strip() else f"exit {run.returncode}"}
    w = json.loads(run.stdout)["workloads"][0]
    step, memory = w["model_step"], w["memory"]
    return {"seconds": step["step_seconds"], "mfu": step["mfu"], "exposed_comm_seconds": step["exposed_comm_seconds"],
            "compute_seconds": step["compute_seconds"], "peak_bytes": memory["peak_bytes_max"],
            "fits": memory["fits"], "warnings": step["warnings"]}


def _gap(predicted, measured):
    return f"{(predicted / measured - 1) * 100:+.1f}%" if predicted else "-"


def _gib(n):
    return f"{n / 2**30:.2f}" if n else "-"


def table(out_dir):
    """The markdown table of every row with a result in out_dir, in rows() order, and the summary lines."""
    lines = ["| row | measured | compiled route | gap | model workload | gap | memory GiB: libtpu / spmdsim (compiled) "
             "/ model | compile s | note |", "|---|---|---|---|---|---|---|---|---|"]
    gaps = []
    for r in rows():
        path = os.path.join(out_dir, r.key + ".json")
        if not os.path.exists(path):
            continue
        e = json.load(open(path))
        m, c = e["model"], e.get("compiled", {})
        measured = e["measured_seconds"]
        note = c.get("error") or m.get("error") or ""
        xla = c.get("compiler_memory") or {}
        libtpu = xla.get("peak_memory_in_bytes")
        mem = f"{_gib(libtpu)} / {_gib(c.get('peak_bytes'))} / {_gib(m.get('peak_bytes'))}"
        if libtpu and c.get("peak_bytes"):
            mem += f" ({(c['peak_bytes'] / libtpu - 1) * 100:+.1f}%)"
        compile_s = (c.get("target") or {}).get("compile_seconds")
        if c.get("seconds"):
            gaps.append(c["seconds"] / measured - 1)
            note = note or (f"MFU {c['mfu']:.1%}, exposed comm {c['exposed_comm_seconds']:.3g} s"
                            if c.get("mfu") is not None else "")
        fsdp = math.prod(int(x) for x in r.topology.split(":")[1].split("x")) // r.tensor
        label = f"{r.label} (FSDP {fsdp}{f', TP {r.tensor}' if r.tensor > 1 else ''}, batch {r.batch}, remat {r.remat})"
        lines.append(f"| {label} | {measured:.4g} s | " +
                     (f"{c['seconds']:.4g} s | {_gap(c['seconds'], measured)} | " if c.get("seconds") else "- | - | "))
        lines[-1] += (f"{m['seconds']:.4g} s | {_gap(m.get('seconds'), measured)} | " if m.get("seconds") else "- | - | ")
        lines[-1] += f"{mem} | {compile_s:.0f} | {note} |" if compile_s else f"{mem} | - | {note} |"
    if gaps:
        within = sum(abs(g) <= 0.10 for g in gaps)
        lines.append("")
        lines.append(f"{len(gaps)} rows through the compiled route: {within} within 10%, mean signed gap "
                     f"{sum(gaps) / len(gaps) * 100:+.1f}%, worst {max(gaps, key=abs) * 100:+.1f}%")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="build/target-validation")
    ap.add_argument("--only", action="append", help="row key (repeatable); default all")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--table", action="store_true", help="print the markdown table of the rows in --out")
    ap.add_argument("--timeout", type=int, default=3600, help="compiler timeout per row, seconds")
    ap.add_argument("--skip-compiled", action="store_true")
    ap.add_argument("--model-only", action="store_true",
                    help="re-run the model workload of rows already in --out, keeping their compiled route")
    ap.add_argument("--attention", choices=("dense", "blockwise"), default="dense",
                    help="the decoder's attention (docs/target-validation.md: why dense)")
    a = ap.parse_args()
    if a.table:
        print(table(a.out))
        return 0
    if a.list:
        for r in rows():
            print(r.key, "|", r.label)
        return 0
    chosen = [r for r in rows() if not a.only or r.key in a.only]
    os.makedirs(a.out, exist_ok=True)
    for r in chosen:
        flops, params = maxtext_flops_per_device(r)
        entry = {"row": dataclasses.asdict(r), "params": params, "measured_seconds": flops / (r.tflops * 1e12),
                 "maxtext_flops_per_device": flops}
        path = os.path.join(a.out, r.key + ".json")
        if a.model_only and os.path.exists(path):
            entry = json.load(open(path))
            entry["model"] = model_route(r)
            with open(path, "w") as f:
                json.dump(entry, f, indent=1)
            continue
        print(f"[{r.key}] model route ...", file=sys.stderr, flush=True)
        try:
            entry["model"] = model_route(r)
        except OSError as e:  # the CLI missing or being rebuilt: kept in the table with the reason
            entry["model"] = {"error": f"{type(e).__name__}: {e}"}
        if not a.skip_compiled:
            print(f"[{r.key}] compiling for {r.slices} x {r.topology} ...", file=sys.stderr, flush=True)
            try:
                entry["compiled"] = compiled_route(r, a.timeout, a.attention)
            except Exception as e:  # kept in the table with the reason
                entry["compiled"] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0]}"}
        with open(os.path.join(a.out, r.key + ".json"), "w") as f:
            json.dump(entry, f, indent=1)
        print(json.dumps({k: entry[k] for k in ("measured_seconds",)} |
                         {"model": entry["model"].get("seconds"),
                          "compiled": entry.get("compiled", {}).get("seconds")}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
