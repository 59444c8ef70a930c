"""Every collective of jax.lax under shard_map, compiled by XLA for 8 CPU devices and run by spmdsim.

(jax.lax.pbroadcast, XLA's collective-broadcast, has no CPU lowering in JAX 0.10: tests/hlo/executor_test.cc runs it.)

Bitwise: the collectives move data (all_gather, all_to_all, ppermute) or fold the group's members in
rank order from the reduction's identity, as XLA CPU's in-process collectives do (psum, pmax, pmin,
psum_scatter), so spmdsim reproduces XLA's floats exactly; pmean's division is one correctly rounded op."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import shard_map
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import spmdsim

MESH = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))


def run_both(body, x, out_specs, in_spec=P("data", "model"), topology="tpu-v4:2x2x2"):
    fn = jax.jit(shard_map(body, mesh=MESH, in_specs=in_spec, out_specs=out_specs, check_vma=False))
    xs = jax.device_put(x, NamedSharding(MESH, in_spec))
    want = fn(xs)
    got, report = spmdsim.from_jax(fn, xs, topology=topology)
    return jax.tree.map(np.asarray, want), got, report


def assert_bitwise(want, got):
    for w, g in zip(jax.tree.leaves(want), jax.tree.leaves(got)):
        assert w.dtype == g.dtype and w.shape == g.shape
        assert np.array_equal(w.view(np.uint8), g.view(np.uint8)), f"max abs diff {np.max(np.abs(w - g))}"


X = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)


@pytest.mark.parametrize("axes", ["model", "data", ("data", "model")])
def test_reductions_are_bitwise_xlas(axes):
    def body(x):
        return (jax.lax.psum(x, axes), jax.lax.pmax(x, axes), jax.lax.pmin(x, axes), jax.lax.pmean(x, axes))
    want, got, report = run_both(body, X, (P("data", "model"),) * 4)
    assert_bitwise(want, got)
    assert report["hlo"]["by_class"][0]["name"].startswith("collective")


def test_gathers_scatters_all_to_all_and_permutes_are_bitwise_xlas():
    def body(x):
        return (jax.lax.all_gather(x, "model", axis=0, tiled=True),
                jax.lax.all_gather(x, "model", axis=1),
                jax.lax.psum_scatter(x, "model", scatter_dimension=1, tiled=True),
                jax.lax.all_to_all(x, "model", 0, 1, tiled=True),
                jax.lax.ppermute(x, "model", [(i, (i + 1) % 4) for i in range(4)]),
                jax.lax.ppermute(x, ("data", "model"), [(0, 5), (5, 2), (7, 0)]),
                jax.lax.axis_index(("data", "model")) + jnp.zeros_like(x, dtype=jnp.int32))
    specs = (P("data", "model"), P("data", None, "model"), P("data", "model"), P("data", "model"),
             P("data", "model"), P("data", "model"), P("data", "model"))
    want, got, _ = run_both(body, X, specs)
    assert_bitwise(want, got)


def test_integer_and_bfloat16_collectives_are_bitwise_xlas():
    xi = np.arange(8 * 16, dtype=np.int32).reshape(8, 16) * 7919 % 1000 - 500
    want, got, _ = run_both(lambda x: (jax.lax.psum(x, "model"), jax.lax.pmax(x, "data")), xi, (P("data", "model"),) * 2)
    assert_bitwise(want, got)
    xb = X.astype(jnp.bfloat16)
    want, got, _ = run_both(lambda x: jax.lax.psum(x * 3, ("data", "model")), xb, P("data", "model"))
    assert_bitwise(want, got)


def test_the_prediction_prices_every_collective_on_the_topology():
    _, _, report = run_both(lambda x: jax.lax.psum(x, ("data", "model")), X, P("data", "model"), topology="dgx-h100:1")
    totals = report["totals"]
    assert totals["communication_seconds"] > 0
    assert report["hlo"]["devices"] == 8
    assert any(s["group_size"] == 8 for s in report["hlo"]["by_class"])
