#!/usr/bin/env python3
"""Measures the sustained rates the step model prices, on one NVIDIA GPU (H100 / H200), at the shapes of the
validation rows (docs/model-validation.md, "Measuring on a real GPU"). NOT YET RUN: no GPU was available when it
was written; its results are to be committed with their date and device.

What it measures (each for --seconds of back-to-back work after a warm-up, random normal data, the GPU's SM clock
and power sampled through NVML when pynvml is installed):
  gemm       bf16 (and fp8 with torch._scaled_mm where the GPU has it) GEMMs at the GPT-3 175B TP 4 layer shapes
             of NVIDIA's NeMo rows and at 8192^3, the first and the last 10 s reported apart (burst vs sustained)
  attention  causal flash attention forward + backward, head_dim 128, 2048 and 8192 keys (PyTorch SDPA; and
             Transformer Engine's DotProductAttention when installed)
  stream     a triad-like elementwise kernel (a = b + s * c) over 1 GiB arrays: the memory-bound rate
  layer      one GPT-3-shaped layer (h 4096, 32 heads, seq 2048, micro-batch 4, bf16) forward + backward in eager
             PyTorch; the same layer in JAX (jit) when jax[cuda] is installed
  moe        the pieces of DeepSeek-V3's MoE layer that docs/model-validation.md suspects of the ~fifth of the step
             the model misses, at one rank's shapes in the 512-GPU row (one micro-batch: 2048 tokens after SP, 4
             local experts of 4096 padded rows each, MLA attention over 64 heads and 4096 keys), each forward +
             backward in eager PyTorch, beside the model's price of the same ops (from `spmdsim run --abstract
             --trace` of scenarios/deepseek-v3-dgx-h100-512.yaml, per layer and micro-batch):
               router      fp32 [2048, 7168] x [7168, 256], sigmoid, group-limited top-8   model 0.080 ms
               permute     drop-and-pad to capacity 64 per expert: argsort + index_select of
                           [16384, 7168] and its backward, twice (dispatch and combine)   model 0.36 ms
               experts     4 experts, [4096, 7168] x [7168, 4096] then [4096, 2048] x
                           [2048, 7168], SwiGLU between (a batched GEMM as TE's grouped
                           GEMM runs them)                                             model 6.9 ms
               attention   causal, q/k head dim 192, v 128, 64 heads, seq 4096          model 3.53 ms

Run:   python3 scripts/measure-sustained-compute.py --out results.json [--seconds 60]
Then:  compare with the model's figures: build/dev/bench/model/model_validation prints the one-device layer
       prediction ("one layer on one device") and cost/compute_model.cc holds the sustained fractions.
Needs: torch with CUDA; optional: pynvml, transformer_engine, jax[cuda].
"""
import argparse
import datetime
import json
import math
import sys
import time


def _nvml():
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
    except Exception:  # pynvml missing or no NVML: clocks are not reported
        return None, None


def _sample(nvml, handle):
    if nvml is None:
        return {}
    return {
        "sm_clock_mhz": nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
        "power_w": nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
        "temperature_c": nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
    }


def _timed_loop(torch, fn, seconds, nvml, handle, window=10.0):
    """Runs fn back to back for `seconds`; returns per-window (seconds per call, telemetry)."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    windows = []
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        calls = 0
        begin = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        begin.record()
        t0 = time.monotonic()
        while time.monotonic() - t0 < window:
            for _ in range(10):
                fn()
            calls += 10
            torch.cuda.synchronize()
        end.record()
        torch.cuda.synchronize()
        windows.append({"seconds_per_call": begin.elapsed_time(end) / 1e3 / calls, **_sample(nvml, handle)})
    return windows


def gemm(torch, seconds, nvml, handle):
    # The GPT-3 175B layer on TP 4 (NeMo rows): tokens 2048 (micro-batch 1), h 12288: QKV [2048, 12288] x
    # [12288, 9216], projection [2048, 3072] x [3072, 12288], FC1 [2048, 12288] x [12288, 12288], FC2
    # [2048, 12288] x [12288, 12288]; and 8192^3.
    shapes = [(2048, 12288, 9216), (2048, 3072, 12288), (2048, 12288, 12288), (8192, 8192, 8192)]
    out = []
    for m, k, n in shapes:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        w = _timed_loop(torch, lambda: torch.mm(a, b), seconds, nvml, handle)
        flops = 2.0 * m * k * n
        out.append({"dtype": "bf16", "m": m, "k": k, "n": n,
                    "tflops_first_window": flops / w[0]["seconds_per_call"] / 1e12,
                    "tflops_last_window": flops / w[-1]["seconds_per_call"] / 1e12, "windows": w})
        if hasattr(torch, "_scaled_mm") and hasattr(torch, "float8_e4m3fn"):
            try:
                a8 = a.to(torch.float8_e4m3fn)
                b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()
                one = torch.tensor(1.0, device="cuda")
                fn = lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
                fn()
                w = _timed_loop(torch, fn, seconds, nvml, handle)
                out.append({"dtype": "fp8_e4m3", "m": m, "k": k, "n": n,
                            "tflops_first_window": flops / w[0]["seconds_per_call"] / 1e12,
                            "tflops_last_window": flops / w[-1]["seconds_per_call"] / 1e12, "windows": w})
            except Exception as e:  # fp8 GEMMs need sm_89+ and a recent PyTorch
                out.append({"dtype": "fp8_e4m3", "m": m, "k": k, "n": n, "error": str(e)})
    return out


def attention(torch, seconds, nvml, handle):
    import torch.nn.functional as F

    out = []
    for seq, heads, batch in [(2048, 16, 2), (8192, 32, 2)]:
        q, k, v = (torch.randn(batch, heads, seq, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        grad = torch.randn_like(q)

        def step():
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            o.backward(grad)

        w = _timed_loop(torch, step, seconds, nvml, handle)
        # FLOPs as FlashAttention's benchmarks count them (causal: half; backward 2.5x the forward).
        flops = 3.5 * 4 * batch * heads * seq * seq * 128 / 2
        out.append({"kernel": "torch_sdpa", "seq": seq, "heads": heads, "batch": batch,
                    "tflops_last_window": flops / w[-1]["seconds_per_call"] / 1e12, "windows": w})
        try:
            import transformer_engine.pytorch as te

            dpa = te.DotProductAttention(heads, 128, attn_mask_type="causal", qkv_format="bshd")
            qs, ks, vs = (t.detach().transpose(1, 2).contiguous().requires_grad_() for t in (q, k, v))
            g = torch.randn(batch, seq, heads * 128, device="cuda", dtype=torch.bfloat16)

            def te_step():
                dpa(qs, ks, vs).backward(g)

            w = _timed_loop(torch, te_step, seconds, nvml, handle)
            out.append({"kernel": "transformer_engine", "seq": seq, "heads": heads, "batch": batch,
                        "tflops_last_window": flops / w[-1]["seconds_per_call"] / 1e12, "windows": w})
        except ImportError:
            pass
    return out


def stream(torch, seconds, nvml, handle):
    n = (1 << 30) // 2
    b = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    c = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    a = torch.empty_like(b)
    w = _timed_loop(torch, lambda: torch.add(b, c, alpha=0.5, out=a), seconds, nvml, handle)
    return {"kernel": "a = b + s c (bf16)", "bytes_per_call": 3 * 2 * n,
            "tb_per_s_last_window": 3 * 2 * n / w[-1]["seconds_per_call"] / 1e12, "windows": w}


def layer_torch(torch, seconds, nvml, handle):
    h, heads, seq, batch = 4096, 32, 2048, 4
    layer = torch.nn.TransformerEncoderLayer(h, heads, 4 * h, dropout=0.0, activation="gelu", batch_first=True,
                                             norm_first=True, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(batch, seq, h, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(seq, device="cuda", dtype=torch.bfloat16)

    def step():
        layer(x, src_mask=mask, is_causal=True).sum().backward()

    w = _timed_loop(torch, step, seconds, nvml, handle)
    return {"framework": "pytorch eager", "h": h, "heads": heads, "seq": seq, "micro_batch": batch,
            "seconds_forward_backward": w[-1]["seconds_per_call"], "windows": w}


def layer_jax(seconds):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return {"skipped": "jax is not installed"}
    h, heads, seq, batch = 4096, 32, 2048, 4
    hd = h // heads
    key = jax.random.PRNGKey(0)
    ks = jax.random.split(key, 6)
    p = {"wqkv": jax.random.normal(ks[0], (h, 3 * h), jnp.bfloat16) * 0.02,
         "wo": jax.random.normal(ks[1], (h, h), jnp.bfloat16) * 0.02,
         "w1": jax.random.normal(ks[2], (h, 4 * h), jnp.bfloat16) * 0.02,
         "w2": jax.random.normal(ks[3], (4 * h, h), jnp.bfloat16) * 0.02}
    x = jax.random.normal(ks[4], (batch, seq, h), jnp.bfloat16)

    def norm(y):
        y32 = y.astype(jnp.float32)
        return ((y32 - y32.mean(-1, keepdims=True)) * jax.lax.rsqrt(y32.var(-1, keepdims=True) + 1e-5)).astype(y.dtype)

    def layer(p, x):
        q, k, v = jnp.split(norm(x) @ p["wqkv"], 3, axis=-1)
        q, k, v = (t.reshape(batch, seq, heads, hd) for t in (q, k, v))
        a = jax.nn.dot_product_attention(q, k, v, is_causal=True)
        x = x + a.reshape(batch, seq, h) @ p["wo"]
        return x + jax.nn.gelu(norm(x) @ p["w1"]) @ p["w2"]

    step = jax.jit(jax.grad(lambda p, x: layer(p, x).astype(jnp.float32).sum()))
    jax.block_until_ready(step(p, x))
    calls, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < seconds:
        jax.block_until_ready(step(p, x))
        calls += 1
    return {"framework": "jax jit", "h": h, "heads": heads, "seq": seq, "micro_batch": batch,
            "seconds_forward_backward": (time.monotonic() - t0) / calls}


def moe(torch, seconds, nvml, handle):
    import torch.nn.functional as F

    tokens, hidden, experts, top_k, groups, top_groups, ff, local, rows = 2048, 7168, 256, 8, 8, 4, 2048, 4, 4096
    capacity = tokens * top_k // experts
    out = {}
    x = torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w_router = torch.randn(hidden, experts, device="cuda", dtype=torch.float32, requires_grad=True)

    def route():
        # DeepSeek-V3's router as Megatron-Core runs it with moe_router_dtype fp32: sigmoid scores, the top-2 sum
        # of each of 8 groups, the best 4 groups, the top 8 experts in them, weights normalised.
        scores = torch.sigmoid(x.float() @ w_router)
        group_scores = scores.view(tokens, groups, -1).topk(2, dim=-1).values.sum(-1)
        keep = torch.zeros_like(group_scores).scatter_(1, group_scores.topk(top_groups, dim=-1).indices, 1.0)
        masked = scores.masked_fill(keep.repeat_interleave(experts // groups, dim=1) == 0, 0.0)
        weights, index = masked.topk(top_k, dim=-1)
        return weights / weights.sum(-1, keepdim=True), index

    def router_step():
        weights, _ = route()
        weights.sum().backward()

    out["router_ms"] = 1e3 * _timed_loop(torch, router_step, seconds, nvml, handle)[-1]["seconds_per_call"]
    _, index = route()
    routing_map = torch.zeros(tokens, experts, device="cuda", dtype=torch.bool).scatter_(1, index, True)
    h = torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    def permute_step():
        # Megatron-Core's permute with drop_and_pad: each expert's first `capacity` tokens, gathered; the backward
        # scatters the gradient back (index_add). Twice: the dispatch's permute and the combine's unpermute.
        for _ in range(2):
            sorted_indices = routing_map.t().int().argsort(dim=-1, descending=True, stable=True)[:, :capacity]
            permuted = h.index_select(0, sorted_indices.reshape(-1))
            permuted.sum().backward()

    out["permute_ms"] = 1e3 * _timed_loop(torch, permute_step, seconds, nvml, handle)[-1]["seconds_per_call"]
    a = torch.randn(local, rows, hidden, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w1 = torch.randn(local, hidden, 2 * ff, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w2 = torch.randn(local, ff, hidden, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    def experts_step():
        gate, up = torch.bmm(a, w1).chunk(2, dim=-1)
        torch.bmm(F.silu(gate) * up, w2).sum().backward()

    w = _timed_loop(torch, experts_step, seconds, nvml, handle)
    out["experts_ms"] = 1e3 * w[-1]["seconds_per_call"]
    out["experts_tflops"] = 3 * 2.0 * local * rows * hidden * 3 * ff / w[-1]["seconds_per_call"] / 1e12
    q = torch.randn(1, 64, 4096, 192, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(1, 64, 4096, 192, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(1, 64, 4096, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    def attention_step():
        F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()

    try:
        out["attention_ms"] = 1e3 * _timed_loop(torch, attention_step, seconds, nvml, handle)[-1]["seconds_per_call"]
    except RuntimeError as e:  # no SDPA backend for unequal head dims in this PyTorch
        out["attention_error"] = str(e)
    out["model_ms"] = {"router": 0.080, "permute": 0.36, "experts": 6.9, "attention": 3.53}
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="results JSON file")
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds of back-to-back work per measurement")
    parser.add_argument("--only", nargs="*", default=["gemm", "attention", "stream", "layer", "moe"],
                        help="subset of: gemm attention stream layer moe")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        sys.exit("measure-sustained-compute: no CUDA device")
    nvml, handle = _nvml()
    results = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
               "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
               "cuda": torch.version.cuda, "seconds": args.seconds}
    if "gemm" in args.only:
        results["gemm"] = gemm(torch, args.seconds, nvml, handle)
    if "attention" in args.only:
        results["attention"] = attention(torch, args.seconds, nvml, handle)
    if "stream" in args.only:
        results["stream"] = stream(torch, args.seconds, nvml, handle)
    if "layer" in args.only:
        results["layer_torch"] = layer_torch(torch, args.seconds, nvml, handle)
        results["layer_jax"] = layer_jax(min(args.seconds, 30.0))
    if "moe" in args.only:
        results["moe"] = moe(torch, min(args.seconds, 20.0), nvml, handle)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
    for g in results.get("gemm", []):
        if "error" not in g:
            print(f"gemm {g['dtype']} {g['m']}x{g['k']}x{g['n']}: {g['tflops_first_window']:.1f} -> "
                  f"{g['tflops_last_window']:.1f} TFLOPS")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
