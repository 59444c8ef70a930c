"""A transformer imported from JAX next to the `model` workload's prediction of the same model and parallelism
(docs/hlo.md, "Against the model workload"): a GPT (4 layers, d_model 2048, seq 2048, vocab 32000) trained one step
with Adam over data 2 x tensor 4 on one DGX H100. JAX compiles it for 8 host CPU devices; spmdsim predicts its
module (abstract: nothing runs) and runs the model workload (abstract) on the same topology and mesh.

What must agree: the FLOPs per device (the same model: within 1%), the communication (the same collectives of the
same sizes: within 25%), the dots' time (within 35%). What does not: the memory-bound ops. XLA CPU fuses far less
than Megatron's kernels (which the model workload prices) and keeps softmax residuals in f32, so the module moves
several times the bytes; the imported step is 1.5x to 4x the model workload's. The figures are printed."""
import jax_programs
import spmdsim

TOPOLOGY = "dgx-h100:1"


def test_an_imported_gpt_next_to_the_model_workload():
    fn, args = jax_programs.gpt_train_step(**jax_programs.GPT)
    _, hlo = spmdsim.from_jax(fn, *args, topology=TOPOLOGY, abstract=True, overlap_collectives=True)
    stats = fn.lower(*args).compile().memory_analysis()
    xla_peak = stats.argument_size_in_bytes + stats.output_size_in_bytes + stats.temp_size_in_bytes
    scenario = {"name": "gpt", "topology": {"preset": TOPOLOGY}, "mesh": {"axes": {"data": 2, "tensor": 4}},
                "workloads": [jax_programs.GPT_MODEL_WORKLOAD]}
    model = spmdsim.run(scenario, abstract=True)["workloads"][0]

    devices = 8
    by_class = {c["name"]: c for c in hlo["hlo"]["by_class"]}
    dots = sum(c["compute_seconds"] for name, c in by_class.items() if name in ("dot", "fusion (dot)"))
    others = hlo["totals"]["compute_seconds"] - dots
    phases = model["model_step"]["compute_by_phase"]
    rows = [("step", hlo["totals"]["predicted_seconds"], model["totals"]["predicted_seconds"]),
            ("compute", hlo["totals"]["compute_seconds"], model["totals"]["compute_seconds"]),
            ("  dots (hlo) | fwd+bwd+head (model)", dots, phases["forward"] + phases["backward"] + phases["head"]),
            ("  other ops (hlo) | optimizer (model)", others, phases["optimizer"]),
            ("communication", hlo["totals"]["communication_seconds"], model["totals"]["communication_seconds"])]
    print(f"\n{'':40s} {'imported [ms]':>14s} {'model [ms]':>11s}")
    for name, a, b in rows:
        print(f"{name:40s} {a * 1e3:14.3f} {b * 1e3:11.3f}")
    # The program materialises the whole causal score matrix, as the model workload's unfused attention does: the
    # simulation's executed FLOPs, not the model FLOPs (which count causal attention as half, docs/model.md).
    flops_hlo, flops_model = hlo["totals"]["flops"], model["model_step"]["hardware_flops"] / devices
    print(f"FLOP per device: imported {flops_hlo:.4g}, model {flops_model:.4g}")
    print(f"peak memory per device: imported {hlo['hlo']['peak_bytes'] / 2**30:.2f} GiB (XLA's memory_analysis: "
          f"{xla_peak / 2**30:.2f} GiB), model {model['memory']['peak_bytes_max'] / 2**30:.2f} GiB")

    assert abs(hlo["hlo"]["peak_bytes"] / xla_peak - 1) < 0.10, (hlo["hlo"]["peak_bytes"], stats)
    assert abs(flops_hlo / flops_model - 1) < 0.01
    comm_ratio = hlo["totals"]["communication_seconds"] / model["totals"]["communication_seconds"]
    assert 0.75 < comm_ratio < 1.25, comm_ratio
    dot_ratio = dots / (phases["forward"] + phases["backward"] + phases["head"])
    assert 0.65 < dot_ratio < 1.35, dot_ratio
    step_ratio = hlo["totals"]["predicted_seconds"] / model["totals"]["predicted_seconds"]
    assert 1.5 < step_ratio < 4, step_ratio
    assert any("widened from bf16" in n for n in hlo["hlo"]["notes"])
