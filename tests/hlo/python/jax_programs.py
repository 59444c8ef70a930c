"""The JAX programs the HLO importer is checked on (tests/hlo/python/test_*.py) and whose compiled modules are kept
as test data (tests/hlo/testdata/generate.py). Each returns (jitted function, arguments): the arguments already
placed with their NamedShardings on the 8 host CPU devices, so that XLA partitions the program as the user's
would be.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import shard_map
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P


def mesh_2x4():
    return Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))


def put(mesh, x, *spec):
    return jax.device_put(x, NamedSharding(mesh, P(*spec)))


def named_sharding_mlp(seed=0):
    """jit with NamedShardings, partitioned by XLA itself: a two-layer MLP with a bias, gelu, layer norm and a
    softmax, batch over `data`, hidden units over `model` (XLA inserts the all-reduce)."""
    mesh = mesh_2x4()
    rng = np.random.default_rng(seed)
    x = put(mesh, rng.standard_normal((16, 64)).astype(np.float32), "data", None)
    w1 = put(mesh, (rng.standard_normal((64, 256)) * 0.1).astype(np.float32), None, "model")
    b1 = put(mesh, rng.standard_normal(256).astype(np.float32), "model")
    w2 = put(mesh, (rng.standard_normal((256, 32)) * 0.1).astype(np.float32), "model", None)

    @jax.jit
    def mlp(x, w1, b1, w2):
        h = jax.nn.gelu(x @ w1 + b1)
        y = h @ w2
        y = (y - y.mean(-1, keepdims=True)) / jnp.sqrt(y.var(-1, keepdims=True) + 1e-5)
        return jax.nn.softmax(y, axis=-1), y.sum()

    return mlp, (x, w1, b1, w2)


def flax_mlp_train_step(seed=0, batch=32, d_in=64, hidden=256, d_out=16):
    """A Flax MLP trained one step with optax's Adam under data x tensor parallelism: batch over `data`, the first
    layer's columns and the second's rows over `model`."""
    import flax.linen as nn
    import optax

    class Mlp(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.relu(nn.Dense(hidden, name="up")(x))
            return nn.Dense(d_out, name="down")(x)

    mesh = mesh_2x4()
    model = Mlp()
    rng = np.random.default_rng(seed)
    params = model.init(jax.random.PRNGKey(seed), jnp.ones((batch, d_in)))
    tx = optax.adam(1e-3)
    opt = tx.init(params)

    def spec_of(path, leaf):
        names = [getattr(p, "key", "") for p in path]
        if "kernel" in names:
            return P(None, "model") if "up" in names else P("model", None)
        if "bias" in names and "up" in names:
            return P("model")
        return P()

    param_specs = jax.tree_util.tree_map_with_path(spec_of, params)
    opt_specs = tx.init(param_specs) if False else jax.tree_util.tree_map_with_path(
        lambda p, l: spec_of(p, l) if l.ndim > 0 else P(), opt)
    to_sharding = lambda s: NamedSharding(mesh, s)
    params = jax.device_put(params, jax.tree.map(to_sharding, param_specs))
    opt = jax.device_put(opt, jax.tree.map(to_sharding, opt_specs, is_leaf=lambda s: isinstance(s, P)))
    x = put(mesh, rng.standard_normal((batch, d_in)).astype(np.float32), "data", None)
    y = put(mesh, rng.standard_normal((batch, d_out)).astype(np.float32), "data", None)

    @functools.partial(jax.jit, donate_argnums=())
    def train_step(params, opt, x, y):
        def loss_fn(p):
            return jnp.mean((model.apply(p, x) - y) ** 2)
        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt = tx.update(grads, opt, params)
        return optax.apply_updates(params, updates), opt, loss

    return train_step, (params, opt, x, y)


def scan_transformer_train_step(seed=0, layers=4, d=64, ff=256, heads=4, batch=8, seq=16):
    """A decoder-only transformer whose layers are a jax.lax.scan (XLA: a while loop), trained one SGD step:
    attention heads and MLP columns over `model` (Megatron tensor parallelism), batch over `data`."""
    mesh = mesh_2x4()
    hd = d // heads
    keys = jax.random.split(jax.random.PRNGKey(seed), 6)
    shapes = {"wq": (layers, d, d), "wk": (layers, d, d), "wv": (layers, d, d), "wo": (layers, d, d),
              "w1": (layers, d, ff), "w2": (layers, ff, d)}
    specs = {"wq": P(None, None, "model"), "wk": P(None, None, "model"), "wv": P(None, None, "model"),
             "wo": P(None, "model", None), "w1": P(None, None, "model"), "w2": P(None, "model", None)}
    params = {k: jax.device_put(jax.random.normal(key, s) * (1.0 / np.sqrt(s[1])), NamedSharding(mesh, specs[k]))
              for key, (k, s) in zip(keys, shapes.items())}
    x = put(mesh, np.random.default_rng(seed).standard_normal((batch, seq, d)).astype(np.float32), "data")

    def layer(h, p):
        def norm(v):
            return (v - v.mean(-1, keepdims=True)) * jax.lax.rsqrt(v.var(-1, keepdims=True) + 1e-6)
        a = norm(h)
        q = (a @ p["wq"]).reshape(batch, seq, heads, hd)
        k = (a @ p["wk"]).reshape(batch, seq, heads, hd)
        v = (a @ p["wv"]).reshape(batch, seq, heads, hd)
        s = jnp.einsum("bshd,bthd->bhst", q, k) / np.sqrt(hd)
        s = jnp.where(jnp.tril(jnp.ones((seq, seq), bool)), s, -1e9)
        o = jnp.einsum("bhst,bthd->bshd", jax.nn.softmax(s, -1), v).reshape(batch, seq, d)
        h = h + o @ p["wo"]
        return h + jax.nn.gelu(norm(h) @ p["w1"]) @ p["w2"], None

    @jax.jit
    def train_step(params, x):
        def loss_fn(p):
            y, _ = jax.lax.scan(layer, x, p)
            return jnp.mean(y ** 2)
        loss, grads = jax.value_and_grad(loss_fn)(params)
        return jax.tree.map(lambda w, g: w - 0.05 * g, params, grads), loss

    return train_step, (params, x)


def moe_expert_parallel(seed=0, experts=8, tokens=64, d=32, ff=64):
    """Expert parallelism with all_to_all (shard_map): tokens routed top-1 to 8 experts, one per device; dispatch
    and combine are all_to_alls over the 8 devices; every expert is an MLP."""
    mesh = Mesh(np.array(jax.devices()[:8]), ("expert",))
    rng = np.random.default_rng(seed)
    capacity = tokens // experts  # per expert, per device's token block
    x = put(mesh, rng.standard_normal((tokens * 8, d)).astype(np.float32), "expert")
    router = put(mesh, rng.standard_normal((d, experts)).astype(np.float32))
    w1 = put(mesh, (rng.standard_normal((experts, d, ff)) * 0.2).astype(np.float32), "expert")
    w2 = put(mesh, (rng.standard_normal((experts, ff, d)) * 0.2).astype(np.float32), "expert")

    def body(x, router, w1, w2):
        logits = x @ router
        expert = jnp.argmax(logits, -1)
        gate = jnp.max(jax.nn.softmax(logits, -1), -1)
        # Dispatch: each token to a slot of its expert (first come, first served; overflow dropped).
        onehot = jax.nn.one_hot(expert, experts, dtype=jnp.int32)
        slot = (jnp.cumsum(onehot, 0) - 1) * onehot
        keep = (slot < capacity) & (onehot > 0)
        dispatch = jax.nn.one_hot(jnp.where(keep, slot, capacity), capacity, dtype=x.dtype) * keep[..., None]
        buckets = jnp.einsum("tec,td->ecd", dispatch, x)                    # [experts, capacity, d]
        buckets = jax.lax.all_to_all(buckets, "expert", 0, 0, tiled=True)  # my expert's tokens from everyone
        h = jax.nn.relu(jnp.einsum("ecd,df->ecf", buckets, w1[0]))
        out = jnp.einsum("ecf,fd->ecd", h, w2[0])
        out = jax.lax.all_to_all(out, "expert", 0, 0, tiled=True)          # back to the tokens' devices
        return jnp.einsum("tec,ecd->td", dispatch, out) * gate[:, None]

    fn = jax.jit(shard_map(body, mesh=mesh, in_specs=(P("expert"), P(), P("expert"), P("expert")),
                           out_specs=P("expert"), check_vma=False))
    return fn, (x, router, w1, w2)


# The GPT of test_model_comparison.py: the `model` workload's sizes and parallelism (docs/hlo.md, "Against the model
# workload"), and that workload's scenario entry for the same model.
GPT = dict(vocab=32000, d_model=2048, layers=4, heads=16, d_ff=8192, seq=2048, global_batch=8)
GPT_MODEL_WORKLOAD = dict(kind="model", name="gpt", vocab=GPT["vocab"], d_model=GPT["d_model"], layers=GPT["layers"],
                          heads=GPT["heads"], d_ff=GPT["d_ff"], seq=GPT["seq"], global_batch=GPT["global_batch"],
                          micro_batch=GPT["global_batch"] // 2, activation="gelu", norm="layernorm",
                          position="learned", tied_embeddings=False, dropout=False, flash_attention=False,
                          dtype="bfloat16", parallel=dict(data_axes=["data"], tensor_axes=["tensor"]))


def gpt_train_step(vocab, d_model, layers, heads, d_ff, seq, global_batch):
    """A GPT trained one step with Adam, written as a JAX user writes it: learned positions, LayerNorm, causal
    softmax attention (scores materialised), GeLU MLP, untied output layer, float32 master weights and Adam moments,
    bfloat16 compute; the layers a jax.lax.scan. Megatron's layout on the mesh (data 2 x tensor 4): embedding and
    output layer split on the vocabulary, QKV and the MLP's first matmul on their heads / columns, the attention
    output and the MLP's second matmul on their rows; the batch over `data`. The arguments are abstract
    (ShapeDtypeStructs with shardings): the program is compiled and predicted, not run."""
    import optax
    d, h, hd = d_model, heads, d_model // heads
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "tensor"))
    specs = {"embed": P("tensor", None), "pos": P(), "ln1": P(), "ln2": P(), "wqkv": P(None, None, None, "tensor"),
             "wo": P(None, "tensor", None), "w1": P(None, None, "tensor"), "w2": P(None, "tensor", None),
             "lnf": P(), "out": P(None, "tensor")}
    shapes = {"embed": (vocab, d), "pos": (seq, d), "ln1": (layers, 2, d), "ln2": (layers, 2, d),
              "wqkv": (layers, d, 3, h, hd), "wo": (layers, d, d), "w1": (layers, d, d_ff), "w2": (layers, d_ff, d),
              "lnf": (2, d), "out": (d, vocab)}
    bf16 = jnp.bfloat16

    def norm(x, p):
        x = x.astype(jnp.float32)
        y = (x - x.mean(-1, keepdims=True)) * jax.lax.rsqrt(x.var(-1, keepdims=True) + 1e-5)
        return (y * p[0] + p[1]).astype(bf16)

    def layer(x, p):
        b, s, _ = x.shape
        qkv = jnp.einsum("bsd,dthk->tbshk", norm(x, p["ln1"]), p["wqkv"].astype(bf16))
        scores = jnp.einsum("bshd,bthd->bhst", qkv[0], qkv[1]) / np.sqrt(hd).astype(bf16)
        scores = jnp.where(jnp.tril(jnp.ones((s, s), bool)), scores, -1e9)
        a = jnp.einsum("bhst,bthd->bshd", jax.nn.softmax(scores, -1), qkv[2]).reshape(b, s, d)
        x = x + a @ p["wo"].astype(bf16)
        return x + jax.nn.gelu(norm(x, p["ln2"]) @ p["w1"].astype(bf16)) @ p["w2"].astype(bf16), None

    def loss_fn(params, tokens, targets):
        x = (params["embed"][tokens] + params["pos"][None]).astype(bf16)
        x, _ = jax.lax.scan(layer, x, {k: params[k] for k in ("ln1", "ln2", "wqkv", "wo", "w1", "w2")})
        logits = (norm(x, params["lnf"]) @ params["out"].astype(bf16)).astype(jnp.float32)
        return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()

    tx = optax.adam(1e-4)

    @jax.jit
    def train_step(params, opt, tokens, targets):
        loss, grads = jax.value_and_grad(loss_fn)(params, tokens, targets)
        updates, opt = tx.update(grads, opt, params)
        return optax.apply_updates(params, updates), opt, loss

    def abstract(shape, spec, dtype=jnp.float32):
        return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec))

    def spec_of(path, leaf):  # Adam's moments as their parameters, its step count replicated
        key = next((k for k in specs if f"['{k}']" in jax.tree_util.keystr(path)), None)
        return abstract(leaf.shape, specs[key] if key else P(), leaf.dtype)

    params = {k: abstract(shapes[k], specs[k]) for k in shapes}
    opt = jax.tree_util.tree_map_with_path(spec_of, jax.eval_shape(tx.init, params))
    tokens = abstract((global_batch, seq), P("data"), jnp.int32)
    return train_step, (params, opt, tokens, tokens)


PROGRAMS = {
    "named_sharding_mlp": named_sharding_mlp,
    "flax_mlp_train_step": flax_mlp_train_step,
    "scan_transformer_train_step": scan_transformer_train_step,
    "moe_expert_parallel": moe_expert_parallel,
}
