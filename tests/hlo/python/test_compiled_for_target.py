"""Programs compiled by the target's own compiler (libtpu for TPU v4, v5e, v5p, v6e and two v5e slices; XLA's CUDA
backend for H100), imported and priced as compiled (docs/hlo.md, "Modules compiled for a TPU or a GPU"): every
instruction is read, the per-device memory agrees with the compiler's memory_analysis, a single-kernel program is
priced within stated bounds of its hand-computed roofline, and the schedule's asynchronous collectives overlap the
compute between their start and done exactly as far as the schedule lets them."""
import os
import re

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import spmdsim

TARGETS = {  # target: (spmdsim topology, slices)
    "tpu-v4:2x2x2": ("tpu-v4:2x2x2", None),
    "tpu-v5e:2x4": ("tpu-v5e:2x4", None),
    "tpu-v5p:2x2x2": ("tpu-v5p:2x2x2", None),
    "tpu-v6e:2x4": ("tpu-v6e:2x4", None),
    "tpu-v5e:2x2 x2 slices": ("tpu-v5e:2x2", 2),
    "dgx-h100:1": ("dgx-h100:1", None),
}


@pytest.fixture(autouse=True, scope="module")
def cache_dir(tmp_path_factory):
    """A compile cache of this file's own: every first compile below really runs the target's compiler."""
    path = tmp_path_factory.mktemp("compile-cache")
    old = os.environ.get("SPMDSIM_CACHE_DIR")
    os.environ["SPMDSIM_CACHE_DIR"] = str(path)
    yield path
    if old is None:
        del os.environ["SPMDSIM_CACHE_DIR"]
    else:
        os.environ["SPMDSIM_CACHE_DIR"] = old


def compiled(fn, args, name):
    target, slices = TARGETS[name]
    return spmdsim.compile_for(fn, *args, target=target, slices=slices)


def mesh_of(name):
    target, slices = TARGETS[name]
    n = spmdsim.resolve_target(target, slices=slices).num_devices
    return spmdsim.abstract_mesh(target, {"data": n}, slices=slices)


def sharded(mesh, shape, spec):
    return jax.ShapeDtypeStruct(shape, jnp.bfloat16, sharding=NamedSharding(mesh, spec))


def instructions_in(text):
    """Instructions written in the module's computations (lines `[ROOT] %name = ...` inside braces)."""
    return sum(1 for line in text.splitlines() if re.match(r"\s+(ROOT )?%\S+ = ", line))


# ---------------------------------------------------------------------------------------------------------------
# A single kernel: each device multiplies its rows of x by the whole w. The roofline is max(FLOPs / peak, bytes /
# HBM bandwidth) at the topology's peak; spmdsim prices the matmul with its tile model at the device's sustained
# rate, which for a large square bf16 GEMM lies between 65% and 100% of the peak (docs/cost-model.md): the
# prediction must lie in [roofline, roofline / 0.6].

M, K, N = 8192, 8192, 8192


def matmul(x, w):
    return x @ w


@pytest.mark.parametrize("name", list(TARGETS))
def test_a_single_matmul_is_priced_within_bounds_of_its_roofline(name):
    mesh = mesh_of(name)
    n = mesh.size
    module = compiled(matmul, (sharded(mesh, (M, K), P("data", None)), sharded(mesh, (K, N), P())), name)
    _, report = module.predict()
    topology = spmdsim.Topology(TARGETS[name][0])
    flops = 2.0 * (M // n) * K * N
    bytes_moved = 2.0 * ((M // n) * K + K * N + (M // n) * N)
    roofline = max(flops / topology.peak_flops["bfloat16"], bytes_moved / topology.memory_bandwidth)
    step = report["totals"]["predicted_seconds"]
    assert roofline <= step <= roofline / 0.6, f"{name}: predicted {step:.3e} s, roofline {roofline:.3e} s"
    assert report["hlo"]["instructions"] == instructions_in(module.text)


# ---------------------------------------------------------------------------------------------------------------
# A data-parallel training step with donated parameters: the memory XLA's own buffer assignment reports.

def mlp_step(w1, w2, x):
    def loss(w1, w2):
        return jnp.mean(jnp.square(jax.nn.relu(x @ w1) @ w2))

    g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
    return w1 - 0.01 * g1, w2 - 0.01 * g2


@pytest.mark.parametrize("name", list(TARGETS))
def test_a_donated_training_steps_memory_is_the_compilers_and_every_instruction_is_read(name):
    mesh = mesh_of(name)
    args = (sharded(mesh, (1024, 4096), P()), sharded(mesh, (4096, 1024), P()),
            sharded(mesh, (32 * mesh.size, 1024), P("data", None)))
    module = spmdsim.compile_for(jax.jit(mlp_step, donate_argnums=(0, 1)), *args, target=TARGETS[name][0],
                                 slices=TARGETS[name][1])
    _, report = module.predict()
    h, xla = report["hlo"], module.memory_analysis
    assert h["instructions"] == instructions_in(module.text)
    assert h["argument_bytes"] == xla["argument_size_in_bytes"]
    assert h["alias_bytes"] == xla["alias_size_in_bytes"]
    peak = (xla["argument_size_in_bytes"] + xla["output_size_in_bytes"] + xla["temp_size_in_bytes"]
            - xla["alias_size_in_bytes"])
    assert abs(h["peak_bytes"] - peak) <= 0.05 * peak, f"{name}: spmdsim {h['peak_bytes']} B, compiler {peak} B"


# ---------------------------------------------------------------------------------------------------------------
# Overlap as the schedule places it (XLA GPU's latency-hiding scheduler, deviceless compile for H100): an FSDP
# all-gather of the next layer's weights runs under this layer's matmul (hidden); a layer whose gathered weights
# its only matmul needs at once has nothing to hide it behind (exposed).

def two_layers(x, w1, w2):
    return jnp.tanh(x @ w1) @ w2


def one_layer(x, w1):
    return x @ w1


def fsdp_args(mesh, layers):
    x = sharded(mesh, (8 * 8192, 4096), P("data", None))
    ws = [sharded(mesh, (4096, 4096), P("data", None)) for _ in range(layers)]
    return (x, *ws)


def test_an_all_gather_the_schedule_overlaps_with_compute_is_hidden():
    mesh = mesh_of("dgx-h100:1")
    module = compiled(two_layers, fsdp_args(mesh, 2), "dgx-h100:1")
    assert "all-gather-start" in module.text
    _, report = module.predict()
    h = report["hlo"]
    assert h["hidden_comm_seconds"] > 0
    assert h["exposed_comm_seconds"] < 0.75 * report["totals"]["communication_seconds"]


def test_an_all_gather_whose_result_is_needed_at_once_is_exposed():
    mesh = mesh_of("dgx-h100:1")
    module = compiled(one_layer, fsdp_args(mesh, 1), "dgx-h100:1")
    _, report = module.predict()
    comm = report["totals"]["communication_seconds"]
    assert comm > 0
    assert report["hlo"]["exposed_comm_seconds"] > 0.9 * comm
