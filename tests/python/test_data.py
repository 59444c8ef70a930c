"""numpy in and out: shard / gather for every dtype, the dtype mapping of programs, and ShardMap programs checked
against numpy."""
import numpy as np
import pytest

import spmdsim
from spmdsim import P, Mesh, NamedSharding

try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None

ALL_DTYPES = [np.float32, np.float64, np.float16, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
              np.int64, np.uint64, np.bool_, np.complex64, np.complex128]


def sample(shape, dtype):
    values = np.arange(np.prod(shape)).reshape(shape)
    if np.dtype(dtype) == np.bool_:
        return (values % 3 == 0)
    if np.issubdtype(dtype, np.complexfloating):
        return (values + 1j * values).astype(dtype)
    return values.astype(dtype)


@pytest.fixture
def mesh():
    return Mesh(np.arange(8).reshape(2, 4), ("x", "y"))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_shard_and_gather_round_trip_every_dtype(mesh, dtype):
    x = sample((4, 8, 3), dtype)
    s = NamedSharding(mesh, P("x", "y"))
    shards = spmdsim.shard(x, s)
    assert [d.id for d in shards] == list(range(8))  # keyed by Device, as devices_indices_map
    index = s.devices_indices_map(x.shape)
    for device, block in shards.items():
        assert block.dtype == x.dtype and block.shape == (2, 2, 3)
        np.testing.assert_array_equal(block, x[index[device]])
    back = spmdsim.gather(shards, s)
    assert back.dtype == x.dtype
    np.testing.assert_array_equal(back, x)
    np.testing.assert_array_equal(spmdsim.gather(list(shards.values()), s), x)


@pytest.mark.skipif(ml_dtypes is None, reason="ml_dtypes is not installed")
def test_shard_and_gather_bfloat16_with_ml_dtypes(mesh):
    x = np.arange(32, dtype=np.float32).reshape(8, 4).astype(ml_dtypes.bfloat16)
    s = NamedSharding(mesh, P(("x", "y")))
    np.testing.assert_array_equal(spmdsim.gather(spmdsim.shard(x, s), s), x)


def test_shard_of_non_contiguous_and_replicated_arrays(mesh):
    x = np.arange(64, dtype=np.int32).reshape(8, 8).T  # a transposed view
    s = NamedSharding(mesh, P(None, "x"))
    shards = {d.id: block for d, block in spmdsim.shard(x, s).items()}  # gather takes ids as keys too
    np.testing.assert_array_equal(shards[5], x[:, 4:8])
    np.testing.assert_array_equal(spmdsim.gather(shards, s), x)


def test_gather_checks_replicas_and_shapes(mesh):
    s = NamedSharding(mesh, P("x"))
    shards = {d.id: block for d, block in spmdsim.shard(np.arange(8.0), s).items()}
    shards[1] = shards[1] + 1
    with pytest.raises(ValueError, match="replicas disagree"):
        spmdsim.gather(shards, s)
    np.testing.assert_array_equal(spmdsim.gather(shards, s, check_replicas=False), np.arange(8.0))
    with pytest.raises(ValueError, match="no shard for device 7"):
        spmdsim.gather({d: shards[d] for d in range(7)}, s)
    with pytest.raises(ValueError, match="got 2 shards for a mesh of 8 devices"):
        spmdsim.gather([shards[0], shards[1]], s)
    with pytest.raises(ValueError, match="shard 1 is"):
        spmdsim.gather([np.zeros(4)] + [np.zeros(3)] * 7, s)
    with pytest.raises(TypeError):
        spmdsim.shard(np.array([object()] * 8), s)
    with pytest.raises(spmdsim.IndivisibleError):
        spmdsim.shard(np.arange(5.0), s)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "int64", "bool"])
def test_program_arrays_round_trip_the_array_dtypes(dtype):
    x = sample((3, 5), np.dtype(dtype))
    y = spmdsim._spmdsim._array_round_trip(x)
    assert y.dtype == x.dtype
    np.testing.assert_array_equal(y, x)


def test_program_dtypes_are_the_simulator_s():
    assert spmdsim.array_dtypes() == ["float32", "float64", "bfloat16", "float16", "int32", "int64", "bool"]
    with pytest.raises(ValueError, match="int8 is not an array dtype"):
        spmdsim._spmdsim._array_round_trip(np.zeros(3, np.int8))


def test_bfloat16_comes_back_as_ml_dtypes_or_float32():
    # A program that casts to bfloat16 returns bfloat16 values: ml_dtypes.bfloat16 when importable, else float32.
    mesh = Mesh(np.arange(2), ("x",))
    p = spmdsim.Program()
    x = p.input("x")
    p.returns(p.cast(x, "bfloat16"))
    out, _ = spmdsim.ShardMap(p, mesh, (P("x"),), P("x"))(np.array([1.0, 2.5, 3.0, 1e-3], np.float32))
    expected_dtype = "bfloat16" if ml_dtypes is not None else "float32"
    assert out.dtype.name == expected_dtype
    np.testing.assert_allclose(out.astype(np.float32), [1.0, 2.5, 3.0, 1e-3], rtol=1e-2)


def tp_matmul_program():
    p = spmdsim.Program()
    x, w = p.input("x"), p.input("w")
    assert isinstance(x, spmdsim.Value) and repr(x) == "Value('x')" and x.program is p
    with pytest.raises(ValueError, match="input 'x' defined twice"):
        p.input("x")
    h = p.einsum("bd,df->bf", x, w, name="h")
    y = p.psum(h, "model", name="y")
    p.returns(y)
    return p


def test_shard_map_program_matches_numpy_and_predicts():
    mesh = spmdsim.Mesh(spmdsim.create_device_mesh((2, 4), spmdsim.Topology("tpu-v4:2x2x2").devices),
                        ("data", "model"))
    f = spmdsim.ShardMap(tp_matmul_program(), mesh, in_specs=(P("data", "model"), P("model", None)),
                         out_specs=P("data", None))
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    w = np.ones((8, 2), np.float32)
    result = f(x, w)
    assert isinstance(result, spmdsim.ShardMapResult)
    y, prediction = result
    np.testing.assert_allclose(y, x @ w)
    assert prediction["kind"] == "shard_map"
    assert prediction["check"]["performed"] and prediction["check"]["passed"]
    assert [s["name"] for s in prediction["steps"]] == ["h", "y"]
    assert prediction["steps"][1]["kind"] == "collective"
    assert prediction["totals"]["predicted_seconds"] > 0
    abstract = f(spmdsim.ShapeDtypeStruct((4096, 8192), np.float32), spmdsim.ShapeDtypeStruct((8192, 1024), "float32"),
                 abstract=True)
    assert abstract.outputs is None and abstract.prediction["abstract"]
    assert abstract.prediction["totals"]["predicted_seconds"] > prediction["totals"]["predicted_seconds"]


def test_shard_map_with_jax_s_keyword_names_and_many_ops():
    mesh = Mesh(np.arange(4), ("i",))
    p = spmdsim.Program()
    x = p.input("x")
    s = p.psum(x, "i")
    g = p.all_gather(x, "i", axis=0, tiled=True)
    r = p.ppermute(x, "i", [(0, 1), (1, 2), (2, 3), (3, 0)])
    t = p.all_to_all(x, "i", 0, 0, tiled=True)
    e = p.mul(p.add(x, 1.0), 2)
    u = (x + x) * x - x / x
    p.returns(s, g, r, t, e, u)
    # all_gather's result varies over 'i' for the replication check (JAX: all_gather_invariant is the one that
    # does not), so its out_spec names 'i': the four gathered copies are concatenated.
    f = spmdsim.shard_map(p, mesh=mesh, in_specs=(P("i"),), out_specs=(P(), P("i"), P("i"), P("i"), P("i"), P("i")))
    data = np.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 1, 2], np.float32)
    # check=False: the engine's check reruns the program on one device, where ppermute and all_to_all are not the
    # same global function; numpy is the reference here.
    (s_out, g_out, r_out, t_out, e_out, u_out), pred = f(data, threads=2, check=False)
    np.testing.assert_array_equal(s_out, [22, 20, 12, 17])
    np.testing.assert_array_equal(g_out, np.tile(data, 4))
    np.testing.assert_array_equal(r_out, np.roll(data.reshape(4, 4), 1, axis=0).reshape(-1))
    np.testing.assert_array_equal(t_out, [3, 5, 5, 9, 1, 9, 3, 7, 4, 2, 5, 1, 1, 6, 8, 2])
    np.testing.assert_array_equal(e_out, (data + 1) * 2)
    np.testing.assert_allclose(u_out, 2 * data * data - 1)
    assert not pred["check"]["performed"]


def test_shard_map_errors_are_jax_s():
    mesh = Mesh(np.arange(4), ("i",))
    p = spmdsim.Program()
    x = p.input("x")
    p.returns(p.exp(x))
    with pytest.raises(ValueError, match="out_specs"):
        spmdsim.ShardMap(p, mesh, (P("i"),), P())(np.arange(8.0, dtype=np.float32))
    with pytest.raises(ValueError, match=r"mesh has no axis 'j'; its axes are \('i',\)"):
        q = spmdsim.Program()
        q.returns(q.psum(q.input("x"), "j"))
        spmdsim.ShardMap(q, mesh, (P("i"),), P())(np.arange(8.0, dtype=np.float32))
    with pytest.raises(ValueError, match="threads must be >= 0"):
        spmdsim.ShardMap(p, mesh, (P("i"),), P("i"))(np.arange(8.0, dtype=np.float32), threads=-1)
    with pytest.raises(ValueError, match="returns nothing"):
        spmdsim.ShardMap(spmdsim.Program(), mesh, (), P())
    with pytest.raises(ValueError, match="1 in_specs for 2 program inputs"):
        q = spmdsim.Program()
        q.returns(q.add(q.input("a"), q.input("b")))
        spmdsim.ShardMap(q, mesh, (P("i"),), P("i"))
    with pytest.raises(TypeError, match="arguments must be Values"):
        spmdsim.Program().exp(3)
    with pytest.raises(TypeError, match="expected 1 arguments"):
        spmdsim.ShardMap(p, mesh, (P("i"),), P("i"))()
    # Before: AttributeError "'function' object has no attribute 'outputs'". After: a TypeError saying what it takes.
    with pytest.raises(TypeError, match=r"ShardMap takes a spmdsim.Program as its body .*not function"):
        spmdsim.ShardMap(lambda x: x, mesh, (P("i"),), P("i"))


def test_every_program_op_matches_numpy():
    # Inputs replicated (P()), so each device computes the whole result and every op is checked against numpy.
    mesh = Mesh(np.arange(2), ("i",))
    rng = np.random.default_rng(0)
    x_np = rng.uniform(0.5, 2.0, size=(4, 6)).astype(np.float32)
    v_np = rng.uniform(-1.0, 1.0, size=(6,)).astype(np.float32)
    p = spmdsim.Program()
    x, v = p.input("x"), p.input("v")
    xt = p.transpose(x, (1, 0))
    sm = p.softmax(x, 1)
    gelu_ref = lambda a: 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a ** 3)))
    softmax_ref = np.exp(x_np) / np.exp(x_np).sum(1, keepdims=True)
    cases = {
        "sum": (p.sum(x, 1), x_np.sum(1)),
        "sum_all": (p.sum(x), x_np.sum()),
        "mean": (p.mean(x, 0, keepdims=True), x_np.mean(0, keepdims=True)),
        "max_reduce": (p.max_reduce(x, 1), x_np.max(1)),
        "min_reduce": (p.min_reduce(x, (0, 1)), x_np.min()),
        "softmax": (sm, softmax_ref),
        "log_softmax": (p.log_softmax(x, 1), np.log(softmax_ref)),
        "reshape": (p.reshape(x, (6, 4)), x_np.reshape(6, 4)),
        "transpose": (xt, x_np.T),
        "broadcast_to": (p.broadcast_to(v, (4, 6)), np.broadcast_to(v_np, (4, 6))),
        "slice": (p.slice(x, (0, 1), (4, 5), (2, 2)), x_np[0:4:2, 1:5:2]),
        "concatenate": (p.concatenate([x, x], 1), np.concatenate([x_np, x_np], 1)),
        "matmul": (p.matmul(x, xt), x_np @ x_np.T),
        "dot": (p.dot(x, xt), x_np @ x_np.T),
        "exp": (p.exp(x), np.exp(x_np)), "log": (p.log(x), np.log(x_np)), "sqrt": (p.sqrt(x), np.sqrt(x_np)),
        "rsqrt": (p.rsqrt(x), 1 / np.sqrt(x_np)), "tanh": (p.tanh(v), np.tanh(v_np)),
        "sigmoid": (p.sigmoid(v), 1 / (1 + np.exp(-v_np))), "relu": (p.relu(v), np.maximum(v_np, 0)),
        "silu": (p.silu(v), v_np / (1 + np.exp(-v_np))), "square": (p.square(v), v_np ** 2),
        "abs": (p.abs(v), np.abs(v_np)), "neg": (p.neg(v), -v_np), "gelu": (p.gelu(v), gelu_ref(v_np)),
        "cast": (p.cast(p.mul(x, 10.0), "int32"), (x_np * 10).astype(np.int32)),
        "pow": (p.pow(x, 2.0), x_np ** 2), "max": (p.max(v, 0.25), np.maximum(v_np, 0.25)),
        "min": (p.min(v, v), v_np), "div": (p.div(x, 2), x_np / 2), "sub": (p.sub(x, x), 0 * x_np),
        "relu_grad": (p.relu_grad(v, v), v_np * (v_np > 0)),
        "softmax_grad": (p.softmax_grad(sm, x, 1),
                         softmax_ref * (x_np - (x_np * softmax_ref).sum(1, keepdims=True))),
        "gelu_grad": (p.gelu_grad(v, p.mul(v, 0.0)), 0 * v_np),
        "pmean": (p.pmean(x, "i"), x_np), "pmax": (p.pmax(x, "i"), x_np), "pmin": (p.pmin(x, ("i",)), x_np),
    }
    p.returns(*(value for value, _ in cases.values()))
    f = spmdsim.ShardMap(p, mesh, (P(), P()), tuple(P() for _ in cases))
    outputs, prediction = f(x_np, v_np)
    for (name, (_, want)), got in zip(cases.items(), outputs):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6, err_msg=name)
    assert prediction["check"]["passed"]

    q = spmdsim.Program()
    y = q.input("y")
    q.returns(q.psum_scatter(y, "i", scatter_dimension=0, tiled=True), q.reshape(q.axis_index("i"), (1,)))
    (scattered, index), _ = spmdsim.ShardMap(q, mesh, (P(),), (P("i"), P("i")))(x_np)
    np.testing.assert_allclose(scattered, 2 * x_np)
    np.testing.assert_array_equal(index, [0, 1])
