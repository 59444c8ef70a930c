"""A pytest file to copy: check your partitioning rules and shard_map programs on a simulated machine.

Copy this file and conftest.py (one line: pytest_plugins = ["spmdsim.testing"]) next to your tests, then run
pytest. Nothing here needs a TPU or a GPU: the meshes are simulated (docs/python.md).
"""
import numpy as np
import pytest

import spmdsim
from spmdsim import P, NamedSharding
from spmdsim.testing import assert_allclose_to_unsharded, assert_no_correction, assert_sharded_as

# Your model's logical axis rules (Flax / T5X style) and parameter shapes.
RULES = (("batch", "data"), ("embed", None), ("mlp", "model"), ("heads", "model"))
PARAMS = {"mlp/wi": ((1024, 4096), ("embed", "mlp")), "mlp/wo": ((4096, 1024), ("mlp", "embed"))}


@pytest.mark.topology("tpu-v4:2x2x4")
@pytest.mark.mesh(data=4, model=4)
@pytest.mark.parametrize("name", sorted(PARAMS))
def test_rules_shard_every_parameter_without_correction(mesh, name):
    shape, logical = PARAMS[name]
    spec = spmdsim.logical_to_mesh_axes(logical, RULES)
    assert_no_correction(spec, shape)          # every axis exists and divides its dimension
    assert spmdsim.get_corrected_named_sharding(shape, spec).spec == spec


@pytest.mark.mesh(data=2, model=4)
def test_the_mlp_input_layout(mesh):
    with spmdsim.logical_axis_rules(RULES):
        spec = spmdsim.logical_to_mesh_axes(("batch", "embed"))
    assert_sharded_as(spec, P("data", None))
    assert_sharded_as(spec, P("data"), shape=(8, 1024))  # the same blocks on every device


@pytest.mark.mesh(data=2, model=4)
def test_tensor_parallel_matmul_equals_numpy(mesh):
    p = spmdsim.Program()
    x, w = p.input("x"), p.input("w")
    p.returns(p.psum(p.einsum("bd,df->bf", x, w), "model"))
    f = spmdsim.ShardMap(p, mesh, in_specs=(P("data", "model"), P("model", None)), out_specs=P("data", None))
    x_np = np.random.default_rng(0).normal(size=(8, 16)).astype(np.float32)
    w_np = np.random.default_rng(1).normal(size=(16, 4)).astype(np.float32)
    result = f(x_np, w_np)
    assert_allclose_to_unsharded(result, lambda: x_np @ w_np, rtol=1e-5, atol=1e-5)
    assert result.prediction["totals"]["predicted_seconds"] > 0


@pytest.mark.mesh(data=2, model=4)
def test_shards_gather_back(mesh):
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    sharding = NamedSharding(mesh, P("data", "model"))
    shards = spmdsim.shard(x, sharding)
    assert_allclose_to_unsharded(shards, x, sharding=sharding)


def test_the_assertions_fail_loudly():
    mesh = spmdsim.testing.mesh_from_preset("cpu:8", data=2, model=4)
    with pytest.raises(AssertionError, match="corrected to"):
        assert_no_correction(P("model"), (6,), mesh)
    with pytest.raises(AssertionError, match="device 0 holds"):
        assert_sharded_as(P("data", "model"), P("data", None), shape=(8, 8), mesh=mesh)
    with pytest.raises(AssertionError, match="sharded as"):
        assert_sharded_as(P("data"), P("data", None))
    with pytest.raises(AssertionError):
        assert_allclose_to_unsharded(np.ones(3), np.zeros(3))
