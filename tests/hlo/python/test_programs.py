"""Whole programs compiled by XLA (jit with NamedShardings, a Flax + optax training step, a scan-over-layers
transformer training step, expert parallelism with all_to_all) run by spmdsim and compared with JAX's own outputs.

Tolerances, per program (float32 throughout; eps = 2^-23 = 1.2e-7):
  - XLA CPU computes its dots with XNNPACK and spmdsim with Eigen: the same products summed in another order, so a
    dot of k terms can differ by up to about k * eps * sum|terms| (k <= 256 here: ~3e-5 relative).
  - XLA CPU evaluates exp, tanh, log, erf and logistic with its own polynomial approximations, spmdsim with the C
    library: each within a few ulps of the exact value, so they differ by a few ulps (~5e-7 relative).
  - Both compound along the program: a training step adds the backward pass and the optimizer update.
Integer programs have no such freedom and compare bitwise, as the collectives do (test_collectives.py)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import jax_programs
import spmdsim


def compare(name, rtol, atol, topology="tpu-v4:2x2x2"):
    fn, args = jax_programs.PROGRAMS[name]()
    want = jax.tree.map(np.asarray, fn(*args))
    got, report = spmdsim.from_jax(fn, *args, topology=topology)
    assert jax.tree.structure(want) == jax.tree.structure(got)
    for w, g in zip(jax.tree.leaves(want), jax.tree.leaves(got)):
        assert w.shape == g.shape and w.dtype == g.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    assert report["totals"]["predicted_seconds"] > 0
    return report


def test_jit_with_named_shardings_that_xla_partitions():
    # 64- and 256-term dots, gelu, layer norm and softmax: outputs of order 1 (softmax in [0, 1]).
    report = compare("named_sharding_mlp", rtol=2e-5, atol=2e-6)
    assert any(c["name"] == "collective all-reduce" for c in report["hlo"]["by_class"])


def test_flax_optax_mlp_training_step_under_data_and_tensor_parallelism():
    # The parameters move by lr * adam's update (~1e-3): the new parameters agree to float32's rounding of the old
    # ones; the loss and the moments to the dots' summation order.
    report = compare("flax_mlp_train_step", rtol=1e-5, atol=1e-6)
    assert report["hlo"]["devices"] == 8


def test_scan_over_layers_transformer_training_step():
    # Four layers forward and backward through softmax attention and gelu: the dots' and the transcendentals'
    # differences compound over ~20 dependent contractions (each <= 256 terms).
    report = compare("scan_transformer_train_step", rtol=2e-4, atol=2e-5)
    loops = [s for s in report["steps"] if "while" in s["name"]]
    assert loops, "the scan's layers run as a while loop"
    assert report["hlo"]["notes"] == []  # XLA's known_trip_count gave the loop's trip count


def test_expert_parallelism_with_all_to_all():
    # Routing (argmax, cumsum, one-hot) is exact; the experts' dots and the gate's softmax carry the differences.
    report = compare("moe_expert_parallel", rtol=2e-4, atol=2e-5)
    assert any(c["name"] == "collective all-to-all" for c in report["hlo"]["by_class"])


def test_an_integer_program_is_bitwise_xlas():
    mesh = jax_programs.mesh_2x4()
    rng = np.random.default_rng(1)
    x = jax.device_put(rng.integers(-1000, 1000, (16, 32), dtype=np.int32), NamedSharding(mesh, P("data", None)))
    w = jax.device_put(rng.integers(-50, 50, (32, 64), dtype=np.int32), NamedSharding(mesh, P(None, "model")))
    idx = jax.device_put(rng.integers(0, 16, (24,), dtype=np.int32), NamedSharding(mesh, P()))

    @jax.jit
    def f(x, w, idx):
        y = x @ w
        s = jnp.sort(y, axis=1)
        c = jnp.cumsum(y, axis=0) >> 3
        g = y[idx] ^ (y[idx] << 2)
        hist = jnp.zeros(16, jnp.int32).at[idx].add(1)
        return s, c, g, hist, jnp.argmax(y, axis=1), (y // 7) % 5

    want = jax.tree.map(np.asarray, f(x, w, idx))
    got, _ = spmdsim.from_jax(f, x, w, idx, topology="cpu:8")
    for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got)):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_random_bits_of_the_rbg_prng_are_bitwise_xlas():
    # JAX's "rbg" PRNG lowers to rng-bit-generator; XLA CPU expands it into integer arithmetic (its
    # RngBitGeneratorExpander) before the module spmdsim imports, so the bits are computed as XLA does: bitwise.
    @jax.jit
    def draw(key_data):
        key = jax.random.wrap_key_data(key_data, impl="rbg")
        return jax.random.bits(key, (64, 32), jnp.uint32), jax.random.randint(key, (100,), 0, 1000)

    key_data = jax.random.key_data(jax.random.key(3, impl="rbg"))
    want = jax.tree.map(np.asarray, draw(key_data))
    got, _ = spmdsim.from_jax(draw, key_data, topology="cpu:1")
    for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got)):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_multiply_adds_in_a_fusion_are_contracted_as_xla_cpu_does():
    """XLA CPU lets LLVM fuse a multiply and the add or subtract that is its only use into one FMA (one rounding):
    an SGD update computed with two roundings differs from JAX's in ~9% of its elements; spmdsim's is bitwise."""
    rng = np.random.default_rng(0)
    p, g = (rng.standard_normal(65536).astype(np.float32) for _ in range(2))
    step = jax.jit(lambda p, g: (p - 0.1 * g, 0.5 * p * g + g, g - p * p))
    want = [np.asarray(x) for x in step(p, g)]
    assert np.sum(want[0] != (p - np.float32(0.1) * g)) > 1000  # XLA does not round twice
    got, _ = spmdsim.from_jax(step, p, g, topology="cpu:1")
    for a, b in zip(want, got):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("name", list(jax_programs.PROGRAMS))
def test_peak_memory_is_within_ten_percent_of_xlas_memory_analysis(name):
    fn, args = jax_programs.PROGRAMS[name]()
    stats = fn.lower(*args).compile().memory_analysis()
    xla = (stats.argument_size_in_bytes + stats.output_size_in_bytes + stats.temp_size_in_bytes -
           stats.alias_size_in_bytes)
    _, report = spmdsim.from_jax(fn, *args, topology="cpu:8", abstract=True)
    ours = report["hlo"]["peak_bytes"]
    assert abs(ours - xla) <= 0.10 * xla, f"spmdsim {ours} B, XLA {xla} B ({stats})"
    assert report["hlo"]["argument_bytes"] == stats.argument_size_in_bytes
    assert report["hlo"]["output_bytes"] == stats.output_size_in_bytes
