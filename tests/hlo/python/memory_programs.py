"""JAX programs whose per-device memory spmdsim's buffer-liveness estimate (hlo/memory.h) is held to against XLA's
own `compiled.memory_analysis()` (test_memory.py). Each entry returns (jitted function, argument ShapeDtypeStructs
or arrays); shapes are small (KiBs to a few MiB) so that 60 programs compile in seconds on 8 host CPU devices.

The families are the ones buffer assignment treats differently: donated arguments (input_output_alias), in-place
updates (dynamic-update-slice, scatter, sort), copies that transpose, segment ops, loops (while / scan / fori_loop)
and conditionals, collectives with and without shard_map (ppermute pipelines, all_to_all), vocab-sharded
embeddings, reductions and windows, and whole training steps.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import shard_map
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

F32 = jnp.float32
BF16 = jnp.bfloat16


def _mesh(*shape, names=("data", "model")):
    n = int(np.prod(shape))
    return Mesh(np.array(jax.devices()[:n]).reshape(shape), names[:len(shape)])


def _sds(shape, dtype=F32, mesh=None, spec=None):
    sharding = None if mesh is None else NamedSharding(mesh, P() if spec is None else spec)
    return jax.ShapeDtypeStruct(shape, dtype, sharding=sharding)


PROGRAMS = {}


def program(fn):
    PROGRAMS[fn.__name__] = fn
    return fn


# Donated arguments: XLA writes the output into the argument's buffer (input_output_alias).
@program
def donate_scale():
    return jax.jit(lambda x: x * 2, donate_argnums=0), (_sds((1024, 256)),)


@program
def donate_two_of_three():
    f = jax.jit(lambda a, b, c: (a + c, b * c, c.sum()), donate_argnums=(0, 1))
    return f, (_sds((512, 512)), _sds((512, 512)), _sds((512, 512)))


@program
def donate_with_shape_change():
    # The donated argument cannot hold the output (other shape): no alias, the donation is unused.
    return jax.jit(lambda x: x.reshape(-1)[:1000] + 1, donate_argnums=0), (_sds((256, 256)),)


@program
def sgd_step_donated():
    def step(params, grads):
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)
    params = {"w1": _sds((512, 1024)), "b1": _sds((1024,)), "w2": _sds((1024, 256))}
    return jax.jit(step, donate_argnums=0), (params, params)


@program
def adam_step_donated():
    def step(params, m, v, g):
        m = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
        v = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
        params = jax.tree.map(lambda p, m, v: p - 1e-3 * m / (jnp.sqrt(v) + 1e-8), params, m, v)
        return params, m, v
    tree = {"w": _sds((512, 512)), "b": _sds((512,))}
    return jax.jit(step, donate_argnums=(0, 1, 2)), (tree, tree, tree, tree)


@program
def mlp_train_step_donated():
    def loss(p, x, y):
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        return jnp.mean((h @ p["w2"] - y) ** 2)

    def step(p, x, y):
        l, g = jax.value_and_grad(loss)(p, x, y)
        return jax.tree.map(lambda a, b: a - 0.01 * b, p, g), l
    p = {"w1": _sds((256, 512)), "b1": _sds((512,)), "w2": _sds((512, 128))}
    return jax.jit(step, donate_argnums=0), (p, _sds((64, 256)), _sds((64, 128)))


# Copies and layouts.
@program
def transpose_copy():
    return jax.jit(lambda x: x.T + 0), (_sds((512, 384)),)


@program
def transpose_return():
    return jax.jit(lambda x: jnp.transpose(x, (1, 0, 2))), (_sds((64, 128, 32)),)


@program
def transpose_then_dot():
    return jax.jit(lambda a, b: a.T @ b), (_sds((256, 512)), _sds((256, 128)))


@program
def reshape_chain():
    return jax.jit(lambda x: jnp.tanh(x.reshape(64, 64, 64)).sum(1).reshape(-1)), (_sds((4096, 64)),)


@program
def concat_and_slice():
    return jax.jit(lambda a, b: jnp.concatenate([a, b], 0)[100:900] * 2), (_sds((512, 256)), _sds((512, 256)))


@program
def pad_and_reverse():
    return jax.jit(lambda x: jnp.flip(jnp.pad(x, ((3, 5), (0, 7))), 1)), (_sds((300, 200)),)


# Sorts and selections.
@program
def sort_1d():
    return jax.jit(jnp.sort), (_sds((65536,)),)


@program
def sort_rows():
    return jax.jit(lambda x: jnp.sort(x, axis=-1)), (_sds((256, 512)),)


@program
def argsort_rows():
    return jax.jit(lambda x: jnp.argsort(x, axis=-1)), (_sds((128, 1024)),)


@program
def sort_key_value():
    return jax.jit(lambda k, v: jax.lax.sort((k, v), num_keys=1)), (_sds((32768,)), _sds((32768,), jnp.int32))


@program
def top_k():
    return jax.jit(lambda x: jax.lax.top_k(x, 16)), (_sds((512, 1024)),)


@program
def cumsum_rows():
    return jax.jit(lambda x: jnp.cumsum(x, axis=1)), (_sds((256, 1024)),)


# Segment ops, gathers and scatters.
@program
def segment_sum():
    f = jax.jit(lambda x, ids: jax.ops.segment_sum(x, ids, num_segments=256))
    return f, (_sds((8192, 64)), _sds((8192,), jnp.int32))


@program
def segment_max():
    f = jax.jit(lambda x, ids: jax.ops.segment_max(x, ids, num_segments=128))
    return f, (_sds((4096, 32)), _sds((4096,), jnp.int32))


@program
def gather_rows():
    return jax.jit(lambda t, i: t[i]), (_sds((8192, 128)), _sds((2048,), jnp.int32))


@program
def scatter_add_rows():
    return jax.jit(lambda t, i, u: t.at[i].add(u)), (_sds((4096, 128)), _sds((1024,), jnp.int32), _sds((1024, 128)))


@program
def scatter_add_donated():
    f = jax.jit(lambda t, i, u: t.at[i].add(u), donate_argnums=0)
    return f, (_sds((4096, 128)), _sds((1024,), jnp.int32), _sds((1024, 128)))


@program
def one_hot_embedding():
    return jax.jit(lambda t, i: jax.nn.one_hot(i, 4096) @ t), (_sds((4096, 64)), _sds((512,), jnp.int32))


# Dynamic updates.
@program
def dynamic_update_slice():
    return jax.jit(lambda x, u, i: jax.lax.dynamic_update_slice(x, u, (i, 0))), (
        _sds((1024, 256)), _sds((64, 256)), _sds((), jnp.int32))


@program
def dynamic_update_slice_donated():
    f = jax.jit(lambda x, u, i: jax.lax.dynamic_update_slice(x, u, (i, 0)), donate_argnums=0)
    return f, (_sds((1024, 256)), _sds((64, 256)), _sds((), jnp.int32))


@program
def kv_cache_update():
    def step(cache, new, pos):
        cache = jax.lax.dynamic_update_slice_in_dim(cache, new, pos, axis=1)
        return cache, jnp.einsum("bhd,bshd->bhs", new[:, 0], cache)
    return jax.jit(step, donate_argnums=0), (_sds((4, 512, 8, 64)), _sds((4, 1, 8, 64)), _sds((), jnp.int32))


# Loops and conditionals.
@program
def fori_loop_elementwise():
    return jax.jit(lambda x: jax.lax.fori_loop(0, 10, lambda i, y: jnp.tanh(y) * 1.1, x)), (_sds((512, 512)),)


@program
def while_with_temporaries():
    def body(c):
        i, x = c
        y = jnp.exp(x) @ x.T
        return i + 1, x + y[:, :x.shape[1]] * 1e-3
    return jax.jit(lambda x: jax.lax.while_loop(lambda c: c[0] < 5, body, (0, x))[1]), (_sds((256, 256)),)


@program
def scan_carry_and_stack():
    def f(xs):
        def body(c, x):
            c = jnp.tanh(c + x)
            return c, c * 2
        return jax.lax.scan(body, jnp.zeros(xs.shape[1:]), xs)
    return jax.jit(f), (_sds((16, 128, 128)),)


@program
def scan_over_layers_forward():
    def f(ws, x):
        def body(h, w):
            return jax.nn.gelu(h @ w), None
        return jax.lax.scan(body, x, ws)[0]
    return jax.jit(f), (_sds((6, 256, 256)), _sds((64, 256)))


@program
def scan_over_layers_grad():
    def loss(ws, x):
        def body(h, w):
            return jnp.tanh(h @ w), None
        return jnp.sum(jax.lax.scan(body, x, ws)[0] ** 2)
    return jax.jit(jax.grad(loss)), (_sds((6, 256, 256)), _sds((64, 256)))


@program
def scan_remat_grad():
    def loss(ws, x):
        @jax.checkpoint
        def layer(h, w):
            return jax.nn.gelu(h @ w)

        def body(h, w):
            return layer(h, w), None
        return jnp.sum(jax.lax.scan(body, x, ws)[0] ** 2)
    return jax.jit(jax.grad(loss)), (_sds((6, 256, 256)), _sds((64, 256)))


@program
def cond_two_branches():
    f = jax.jit(lambda p, x: jax.lax.cond(p, lambda x: jnp.exp(x) @ x, lambda x: x * 2, x))
    return f, (_sds((), jnp.bool_), _sds((256, 256)))


@program
def switch_three_branches():
    f = jax.jit(lambda i, x: jax.lax.switch(i, [lambda x: x.T @ x, lambda x: jnp.sin(x), lambda x: x.sum(0) * x], x))
    return f, (_sds((), jnp.int32), _sds((256, 256)))


@program
def nested_loops():
    def f(x):
        def inner(i, y):
            return jnp.sin(y) + 1
        def outer(i, y):
            return jax.lax.fori_loop(0, 3, inner, y) * 0.5
        return jax.lax.fori_loop(0, 4, outer, x)
    return jax.jit(f), (_sds((512, 256)),)


# Reductions, windows, normalisations, attention.
@program
def softmax_rows():
    return jax.jit(lambda x: jax.nn.softmax(x, -1)), (_sds((512, 1024)),)


@program
def layer_norm():
    def f(x, g, b):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / jnp.sqrt(v + 1e-5) * g + b
    return jax.jit(f), (_sds((512, 768)), _sds((768,)), _sds((768,)))


@program
def max_pool():
    f = jax.jit(lambda x: jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"))
    return f, (_sds((8, 64, 64, 16)),)


@program
def conv2d():
    f = jax.jit(lambda x, w: jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
    return f, (_sds((8, 32, 32, 16)), _sds((3, 3, 16, 32)))


@program
def attention_block():
    def f(q, k, v):
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / 8.0
        return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1), v)
    return jax.jit(f), (_sds((4, 128, 8, 64)), _sds((4, 128, 8, 64)), _sds((4, 128, 8, 64)))


@program
def bf16_mlp():
    return jax.jit(lambda x, w1, w2: jax.nn.gelu(x @ w1) @ w2), (
        _sds((256, 512), BF16), _sds((512, 2048), BF16), _sds((2048, 512), BF16))


@program
def mixed_precision_loss():
    def f(x, w):
        logits = (x @ w).astype(F32)
        return jax.nn.logsumexp(logits, -1).mean()
    return jax.jit(jax.value_and_grad(f, argnums=1)), (_sds((256, 512), BF16), _sds((512, 4096), BF16))


@program
def many_outputs():
    return jax.jit(lambda x: tuple(x * i for i in range(1, 9))), (_sds((256, 256)),)


@program
def unused_argument():
    return jax.jit(lambda x, y: x + 1), (_sds((512, 512)), _sds((512, 512)))


@program
def passthrough_argument():
    return jax.jit(lambda x, y: (x, y * 2)), (_sds((512, 512)), _sds((512, 512)))


@program
def random_bits():
    return jax.jit(lambda k: jax.random.normal(k, (512, 512))), (jax.random.key_data(jax.random.key(0)),)


# Sharded programs on 8 devices: XLA's SPMD partitioner and shard_map.
@program
def sharded_matmul_allreduce():
    mesh = _mesh(2, 4)
    f = jax.jit(lambda x, w: x @ w, out_shardings=NamedSharding(mesh, P("data", None)))
    return f, (_sds((256, 1024), F32, mesh, P("data", "model")), _sds((1024, 512), F32, mesh, P("model", None)))


@program
def sharded_allgather_weights():
    mesh = _mesh(8, names=("fsdp",))
    f = jax.jit(lambda x, w: jnp.tanh(x @ w), out_shardings=NamedSharding(mesh, P("fsdp", None)))
    return f, (_sds((256, 512), F32, mesh, P("fsdp", None)), _sds((512, 1024), F32, mesh, P("fsdp", None)))


@program
def vocab_sharded_embedding():
    mesh = _mesh(2, 4)
    f = jax.jit(lambda t, i: t[i], out_shardings=NamedSharding(mesh, P("data", None, None)))
    return f, (_sds((32000, 256), F32, mesh, P("model", None)), _sds((8, 128), jnp.int32, mesh, P("data", None)))


@program
def vocab_sharded_logits_loss():
    mesh = _mesh(2, 4)

    def f(h, w, labels):
        logits = h @ w
        return (jax.nn.logsumexp(logits, -1) - jnp.take_along_axis(logits, labels[..., None], -1)[..., 0]).mean()
    return jax.jit(jax.value_and_grad(f, argnums=1)), (
        _sds((64, 256), F32, mesh, P("data", None)), _sds((256, 8192), F32, mesh, P(None, "model")),
        _sds((64,), jnp.int32, mesh, P("data")))


@program
def shard_map_ppermute_ring():
    mesh = _mesh(8, names=("x",))

    def body(x):
        perm = [(i, (i + 1) % 8) for i in range(8)]
        return jax.lax.ppermute(x, "x", perm) + x
    f = jax.jit(shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P("x")))
    return f, (_sds((8 * 256, 256), F32, mesh, P("x")),)


@program
def shard_map_pipeline_ppermute():
    mesh = _mesh(8, names=("stage",))
    micro = 8

    def body(ws, xs):
        perm = [(i, (i + 1) % 8) for i in range(8)]

        def tick(carry, x):
            state = jnp.tanh(carry @ ws[0])
            out = state
            state = jax.lax.ppermute(state, "stage", perm)
            return state + x, out
        _, outs = jax.lax.scan(tick, jnp.zeros_like(xs[0]), xs)
        return outs
    f = jax.jit(shard_map(body, mesh=mesh, in_specs=(P("stage"), P(None)), out_specs=P(None), check_vma=False))
    return f, (_sds((8, 128, 128), F32, mesh, P("stage")), _sds((micro, 32, 128), F32, mesh, P(None)))


@program
def shard_map_all_to_all():
    mesh = _mesh(8, names=("x",))
    f = jax.jit(shard_map(lambda x: jax.lax.all_to_all(x, "x", 0, 1, tiled=True), mesh=mesh, in_specs=P("x"),
                          out_specs=P("x")))
    return f, (_sds((8 * 64, 512), F32, mesh, P("x")),)


@program
def shard_map_psum_scatter():
    mesh = _mesh(8, names=("x",))
    f = jax.jit(shard_map(lambda x: jax.lax.psum_scatter(x * 2, "x", tiled=True), mesh=mesh, in_specs=P(None),
                          out_specs=P("x")))
    return f, (_sds((1024, 256), F32, mesh, P(None)),)


@program
def sharded_train_step_donated():
    mesh = _mesh(2, 4)

    def loss(p, x):
        h = jax.nn.gelu(x @ p["w1"])
        return jnp.mean((h @ p["w2"]) ** 2)

    def step(p, x):
        g = jax.grad(loss)(p, x)
        return jax.tree.map(lambda a, b: a - 0.01 * b, p, g)
    p = {"w1": _sds((256, 1024), F32, mesh, P(None, "model")), "w2": _sds((1024, 256), F32, mesh, P("model", None))}
    return jax.jit(step, donate_argnums=0), (p, _sds((64, 256), F32, mesh, P("data", None)))


@program
def sharded_scan_fsdp_grad():
    mesh = _mesh(8, names=("fsdp",))

    def loss(ws, x):
        def body(h, w):
            return jax.nn.gelu(h @ w), None
        return jnp.sum(jax.lax.scan(body, x, ws)[0] ** 2)
    return jax.jit(jax.grad(loss)), (_sds((4, 512, 512), F32, mesh, P(None, "fsdp", None)),
                                     _sds((64, 512), F32, mesh, P("fsdp", None)))


@program
def moe_dispatch_einsum():
    def f(x, gates, w):
        dispatch = jax.nn.one_hot(jnp.argmax(gates, -1), 8)
        buckets = jnp.einsum("te,td->etd", dispatch, x)
        return jnp.einsum("etd,edf->tf", buckets, w)
    return jax.jit(f), (_sds((512, 128)), _sds((512, 8)), _sds((8, 128, 256)))


@program
def integer_histogram():
    return jax.jit(lambda x: jnp.bincount(x, length=1024)), (_sds((65536,), jnp.int32),)


@program
def iota_compare_select():
    return jax.jit(lambda x: jnp.where(jnp.arange(x.shape[1])[None] < x.shape[1] // 2, x, -x).max(1)), (_sds((1024, 512)),)
