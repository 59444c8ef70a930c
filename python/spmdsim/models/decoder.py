"""A small decoder-only transformer in pure JAX, with its AdamW training step, to compile for any target without
data (spmdsim.compile_for) and to run for real on a CPU at a tiny size.

Two block styles:
  - "llama": pre-norm RMSNorm, attention with rotary positions (RoPE) and grouped-query attention (GQA), RMSNorm,
    SwiGLU MLP, untied output layer (Touvron et al. 2023, "Llama 2", section 2.2).
  - "maxtext-2023": MaxText's late-2023 default decoder: one RMSNorm feeding attention and MLP in parallel
    (x + attn(h) + mlp(h), as GPT-J / PaLM), a ReLU MLP, the output layer tied to the embedding.

The layers are stacked and run by jax.lax.scan; each layer is rematerialised by `remat`: "none", "full" (save
nothing) or the name of a jax.checkpoint_policies policy ("dots_with_no_batch_dims_saveable", ...). Parameters and
activations carry logical axis names mapped to mesh axes by rules (logical_rules): data parallelism and FSDP over
"data" / "fsdp", tensor parallelism over "tensor", sequence parallelism over "sequence".

    cfg = DecoderConfig.tiny()
    mesh = spmdsim.target_mesh("tpu-v5e:4x4", data=2, fsdp=4, tensor=2)
    step, args = train_step_and_args(cfg, mesh, batch=32, length=256)
    module = spmdsim.compile_for(step, *args, target="tpu-v5e:4x4")
"""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec


@dataclasses.dataclass(frozen=True)
class DecoderConfig:
    """The model. Defaults: Llama 2 7B (Touvron et al. 2023, table 1 and section 2.2: d_model 4096, 32 layers, 32
    heads of 128, SwiGLU 11008, vocabulary 32000); DecoderConfig.tiny() for tests (with GQA)."""
    vocab: int = 32000
    d_model: int = 4096
    n_layers: int = 32
    n_heads: int = 32
    n_kv_heads: int = 32       # grouped-query attention when fewer than n_heads
    head_dim: int = 128
    d_ff: int = 11008
    style: str = "llama"       # "llama" | "maxtext-2023"
    rope_theta: float = 10000.0
    norm_eps: float = 1e-6
    dtype: str = "bfloat16"    # activations and matmul inputs
    param_dtype: str = "float32"  # parameters and optimizer state
    remat: str = "full"        # "none" | "full" | a jax.checkpoint_policies name
    attention: str = "dense"   # "dense": the whole score matrix; "blockwise": causal blocks, online softmax
    attention_block: int = 512  # the query and key block of "blockwise"

    @classmethod
    def tiny(cls, **overrides):
        fields = dict(vocab=256, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, d_ff=128)
        fields.update(overrides)
        return cls(**fields)

    def __post_init__(self):
        if self.style not in ("llama", "maxtext-2023"):
            raise ValueError(f"style must be 'llama' or 'maxtext-2023', not {self.style!r}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads {self.n_heads} is not a multiple of n_kv_heads {self.n_kv_heads}")
        if self.attention not in ("dense", "blockwise"):
            raise ValueError(f"attention must be 'dense' or 'blockwise', not {self.attention!r}")
        if self.attention_block <= 0:
            raise ValueError(f"attention_block must be positive, not {self.attention_block}")
        if self.remat not in ("none", "full") and not hasattr(jax.checkpoint_policies, self.remat):
            raise ValueError(f"remat must be 'none', 'full' or a jax.checkpoint_policies name, not {self.remat!r}")


# ---------------------------------------------------------------------------------------------------------------
# Logical axes

def logical_rules(mesh_axes, *, fsdp="fsdp", data="data", tensor="tensor", sequence="sequence",
                  embed_activations_over_tensor=False):
    """Rules (logical name, mesh axes) for a mesh with axes `mesh_axes`; an axis the mesh lacks maps to nothing.
    Parameters: "embed" over FSDP, "heads" / "kv_heads" / "mlp" / "vocab" over tensor. Activations: "batch" over
    data and FSDP, "length" over sequence, "act_heads" / "act_mlp" / "act_vocab" over tensor, and "act_embed" (the
    residual stream between blocks) over tensor with embed_activations_over_tensor (MaxText's
    ['activation_embed', 'tensor'] rule of 2023: each chip of a tensor group keeps a slice of it)."""
    have = lambda *axes: tuple(a for a in axes if a in mesh_axes) or None  # noqa: E731
    return (
        ("batch", have(data, fsdp)), ("length", have(sequence)),
        ("act_embed", have(tensor) if embed_activations_over_tensor else None),
        ("act_heads", have(tensor)), ("act_mlp", have(tensor)), ("act_vocab", have(tensor)),
        ("vocab", have(tensor)), ("embed", have(fsdp)), ("heads", have(tensor)), ("kv_heads", have(tensor)),
        ("kv", None), ("mlp", have(tensor)), ("layers", None), ("norm", None),
    )


def logical_to_spec(names, rules):
    """PartitionSpec of logical `names` under `rules`; a mesh axis already used by an earlier dimension is dropped
    (a spec may name each mesh axis once)."""
    table, used, entries = dict(rules), set(), []
    for name in names:
        axes = tuple(a for a in (table.get(name) or ()) if a not in used)
        used.update(axes)
        entries.append(None if not axes else axes[0] if len(axes) == 1 else axes)
    return PartitionSpec(*entries)


def param_axes(cfg):
    """The logical axis names of every parameter (the parameters' pytree structure)."""
    layers = {"attn_norm": ("layers", "norm"),
              "wq": ("layers", "embed", "heads", "kv"), "wk": ("layers", "embed", "kv_heads", "kv"),
              "wv": ("layers", "embed", "kv_heads", "kv"), "wo": ("layers", "heads", "kv", "embed")}
    if cfg.style == "llama":
        layers.update(mlp_norm=("layers", "norm"), w_gate=("layers", "embed", "mlp"),
                      w_up=("layers", "embed", "mlp"), w_down=("layers", "mlp", "embed"))
    else:
        layers.update(wi=("layers", "embed", "mlp"), wo_mlp=("layers", "mlp", "embed"))
    axes = {"embed": ("vocab", "embed"), "final_norm": ("norm",), "layers": layers}
    if cfg.style == "llama":
        axes["unembed"] = ("embed", "vocab")
    return axes


def param_shapes(cfg):
    L, D, H, K, Dh, F = cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.d_ff
    layers = {"attn_norm": (L, D), "wq": (L, D, H, Dh), "wk": (L, D, K, Dh), "wv": (L, D, K, Dh),
              "wo": (L, H, Dh, D)}
    if cfg.style == "llama":
        layers.update(mlp_norm=(L, D), w_gate=(L, D, F), w_up=(L, D, F), w_down=(L, F, D))
    else:
        layers.update(wi=(L, D, F), wo_mlp=(L, F, D))
    shapes = {"embed": (cfg.vocab, D), "final_norm": (D,), "layers": layers}
    if cfg.style == "llama":
        shapes["unembed"] = (D, cfg.vocab)
    return shapes


def _is_axes(x):
    return isinstance(x, tuple) and all(isinstance(n, str) for n in x)


def _is_shape(x):
    return isinstance(x, tuple) and all(isinstance(n, int) for n in x)


# ---------------------------------------------------------------------------------------------------------------
# The model

def init_params(cfg, seed=0):
    """Real parameters (numpy's generator, so that no XLA program is compiled for it): norms at 1, the embedding
    normal with std 1, every other matrix normal with std 1/sqrt(fan-in) (its input axes: "embed", or
    "heads" x "kv" for wo, or "mlp" for the MLP's output matrix)."""
    rng = np.random.default_rng(seed)
    axes = jax.tree_util.tree_leaves(param_axes(cfg), is_leaf=_is_axes)
    shapes, tree = jax.tree_util.tree_flatten(param_shapes(cfg), is_leaf=_is_shape)

    def one(shape, names):
        if names[-1] == "norm":
            return jnp.ones(shape, cfg.param_dtype)
        inputs = ("embed",) if names[-1] != "embed" else ("heads", "kv") if "heads" in names else ("mlp",)
        fan_in = 1 if names[0] == "vocab" else math.prod(n for n, name in zip(shape, names) if name in inputs)
        return jnp.asarray(rng.standard_normal(shape, np.float32) / np.float32(math.sqrt(fan_in)), cfg.param_dtype)
    return jax.tree_util.tree_unflatten(tree, [one(s, a) for s, a in zip(shapes, axes)])


def _rms_norm(x, w, eps):
    x32 = x.astype(jnp.float32)
    y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return (y * w.astype(jnp.float32)).astype(x.dtype)


def _rope(x, theta):
    """Rotary positions (Su et al. 2021) on x [batch, length, heads, head_dim], rotating the two halves."""
    length, half = x.shape[1], x.shape[-1] // 2
    freq = theta ** (-jnp.arange(half, dtype=jnp.float32) / half)
    angle = jnp.arange(length, dtype=jnp.float32)[:, None] * freq[None, :]
    cos, sin = jnp.cos(angle)[None, :, None, :], jnp.sin(angle)[None, :, None, :]
    x1, x2 = x[..., :half].astype(jnp.float32), x[..., half:].astype(jnp.float32)
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1).astype(x.dtype)


def _dense_attention(q, k, v, dt, block):
    """Causal attention over the whole score matrix: q [b, s, kv_heads, group, d], k / v [b, s, kv_heads, d]."""
    s, dh = q.shape[1], q.shape[-1]
    scores = jnp.einsum("bskgd,btkd->bkgst", q, k).astype(jnp.float32) / math.sqrt(dh)
    causal = jnp.tril(jnp.ones((s, s), bool))
    probs = jax.nn.softmax(jnp.where(causal, scores, -1e30), axis=-1).astype(dt)
    return jnp.einsum("bkgst,btkd->bskgd", probs, v)


def _blockwise_attention(q, k, v, dt, block):
    """Causal attention block by block with an online softmax (Rabe & Staats 2021; Dao et al. 2022): query block i
    meets key blocks 0..i only, so the masked half of the scores is never computed and no score matrix larger
    than block x block lives at once: what a flash-attention kernel does, written in XLA's ops."""
    s, dh = q.shape[1], q.shape[-1]
    if s % block:
        raise ValueError(f"attention_block {block} does not divide the sequence length {s}")
    outs, diagonal = [], jnp.tril(jnp.ones((block, block), bool))
    for i in range(s // block):
        qi = q[:, i * block:(i + 1) * block]
        m = l = acc = None
        for j in range(i + 1):
            kj, vj = k[:, j * block:(j + 1) * block], v[:, j * block:(j + 1) * block]
            sc = jnp.einsum("bqkgd,btkd->bkgqt", qi, kj).astype(jnp.float32) / math.sqrt(dh)
            if j == i:
                sc = jnp.where(diagonal, sc, -1e30)
            m_new = sc.max(-1) if m is None else jnp.maximum(m, sc.max(-1))
            p = jnp.exp(sc - m_new[..., None])
            pv = jnp.einsum("bkgqt,btkd->bkgqd", p.astype(dt), vj).astype(jnp.float32)
            if m is None:
                l, acc = p.sum(-1), pv
            else:
                corr = jnp.exp(m - m_new)
                l, acc = l * corr + p.sum(-1), acc * corr[..., None] + pv
            m = m_new
        outs.append((acc / l[..., None]).astype(dt))
    return jnp.moveaxis(jnp.concatenate(outs, axis=3), 3, 1)  # [b, kv_heads, group, s, d] -> [b, s, kv, g, d]


def _attention(h, p, cfg, constrain):
    """Causal grouped-query attention: n_heads queries share n_kv_heads keys and values in groups."""
    dt = jnp.dtype(cfg.dtype)
    q = jnp.einsum("bsd,dhk->bshk", h, p["wq"].astype(dt))
    k = jnp.einsum("bsd,dhk->bshk", h, p["wk"].astype(dt))
    v = jnp.einsum("bsd,dhk->bshk", h, p["wv"].astype(dt))
    q = constrain(_rope(q, cfg.rope_theta), ("batch", "length", "act_heads", "kv"))
    k = _rope(k, cfg.rope_theta)
    b, s, _, dh = q.shape
    g = cfg.n_heads // cfg.n_kv_heads
    q = q.reshape(b, s, cfg.n_kv_heads, g, dh)
    attend = _blockwise_attention if cfg.attention == "blockwise" else _dense_attention
    out = attend(q, k, v, dt, min(cfg.attention_block, s)).reshape(b, s, cfg.n_heads, dh)
    out = constrain(out, ("batch", "length", "act_heads", "kv"))
    return jnp.einsum("bshk,hkd->bsd", out, p["wo"].astype(dt))


def _mlp(h, p, cfg, constrain):
    dt = jnp.dtype(cfg.dtype)
    if cfg.style == "llama":
        gate = jnp.einsum("bsd,df->bsf", h, p["w_gate"].astype(dt))
        up = jnp.einsum("bsd,df->bsf", h, p["w_up"].astype(dt))
        hidden = constrain(jax.nn.silu(gate) * up, ("batch", "length", "act_mlp"))
        return jnp.einsum("bsf,fd->bsd", hidden, p["w_down"].astype(dt))
    hidden = constrain(jax.nn.relu(jnp.einsum("bsd,df->bsf", h, p["wi"].astype(dt))), ("batch", "length", "act_mlp"))
    return jnp.einsum("bsf,fd->bsd", hidden, p["wo_mlp"].astype(dt))


def _remat(fn, remat):
    if remat == "none":
        return fn
    if remat == "full":
        return jax.checkpoint(fn)
    return jax.checkpoint(fn, policy=getattr(jax.checkpoint_policies, remat))


def _constrainer(mesh, rules):
    """x, logical names -> x constrained to the rules' sharding on `mesh` (nothing without a mesh)."""
    if mesh is None:
        return lambda x, names: x
    return lambda x, names: jax.lax.with_sharding_constraint(x, NamedSharding(mesh, logical_to_spec(names, rules)))


def loss_fn(params, tokens, targets, cfg, mesh=None, rules=()):
    """Mean next-token cross-entropy of targets [batch, length] given tokens [batch, length]."""
    constrain = _constrainer(mesh, rules)
    dt = jnp.dtype(cfg.dtype)
    x = constrain(params["embed"].astype(dt)[tokens], ("batch", "length", "act_embed"))

    def layer(x, p):
        h = _rms_norm(x, p["attn_norm"], cfg.norm_eps)
        if cfg.style == "llama":
            x = x + _attention(h, p, cfg, constrain)
            x = x + _mlp(_rms_norm(x, p["mlp_norm"], cfg.norm_eps), p, cfg, constrain)
        else:
            x = x + _attention(h, p, cfg, constrain) + _mlp(h, p, cfg, constrain)
        return constrain(x, ("batch", "length", "act_embed")), None
    x, _ = jax.lax.scan(_remat(layer, cfg.remat), x, params["layers"])
    x = _rms_norm(x, params["final_norm"], cfg.norm_eps)
    # maxtext-2023: tied to the embedding, the logits divided by sqrt(d_model) (MaxText's normalize_embedding_logits)
    unembed = params["unembed"] if cfg.style == "llama" else params["embed"].T / math.sqrt(cfg.d_model)
    logits = constrain(jnp.einsum("bsd,dv->bsv", x, unembed.astype(dt)).astype(jnp.float32),
                       ("batch", "length", "act_vocab"))
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, targets[..., None], axis=-1))


# ---------------------------------------------------------------------------------------------------------------
# AdamW training step

@dataclasses.dataclass(frozen=True)
class AdamW:
    """Loshchilov & Hutter 2019, decoupled weight decay; moments in float32."""
    learning_rate: float = 3e-4
    b1: float = 0.9
    b2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.1


def init_state(cfg, seed=0):
    """{"params", "m", "v", "step"}: real parameters and zero moments."""
    params = init_params(cfg, seed)
    zeros = lambda: jax.tree_util.tree_map(lambda p: jnp.zeros(p.shape, jnp.float32), params)  # noqa: E731
    return {"params": params, "m": zeros(), "v": zeros(), "step": jnp.zeros((), jnp.int32)}


def make_train_step(cfg, mesh=None, rules=None, optimizer=AdamW()):
    """jit(train_step) with the state donated: (state, tokens, targets) -> (state, loss). On a mesh the new state
    keeps the state's sharding (the compiler would otherwise choose, and could not alias it with the old one)."""
    rules = logical_rules(mesh.axis_names) if rules is None and mesh is not None else (rules or ())

    def train_step(state, tokens, targets):
        loss, grads = jax.value_and_grad(loss_fn)(state["params"], tokens, targets, cfg, mesh, rules)
        step = state["step"] + 1
        t = step.astype(jnp.float32)
        o = optimizer
        m = jax.tree_util.tree_map(lambda m, g: o.b1 * m + (1 - o.b1) * g.astype(jnp.float32), state["m"], grads)
        v = jax.tree_util.tree_map(lambda v, g: o.b2 * v + (1 - o.b2) * jnp.square(g.astype(jnp.float32)),
                                   state["v"], grads)

        def update(p, m, v):
            p32 = p.astype(jnp.float32)
            adam = (m / (1 - o.b1 ** t)) / (jnp.sqrt(v / (1 - o.b2 ** t)) + o.eps)
            return (p32 - o.learning_rate * (adam + o.weight_decay * p32)).astype(p.dtype)
        params = jax.tree_util.tree_map(update, state["params"], m, v)
        return {"params": params, "m": m, "v": v, "step": step}, loss
    if mesh is None:
        return jax.jit(train_step, donate_argnums=(0,))
    shardings = jax.tree_util.tree_map(lambda spec: NamedSharding(mesh, spec), state_specs(cfg, rules),
                                       is_leaf=lambda x: isinstance(x, PartitionSpec))
    return jax.jit(train_step, donate_argnums=(0,), out_shardings=(shardings, NamedSharding(mesh, PartitionSpec())))


def state_specs(cfg, rules):
    """PartitionSpecs of the training state (parameters and both moments alike; the step replicated)."""
    specs = jax.tree_util.tree_map(lambda names: logical_to_spec(names, rules), param_axes(cfg), is_leaf=_is_axes)
    return {"params": specs, "m": specs, "v": specs, "step": PartitionSpec()}


def train_step_and_args(cfg, mesh, batch, length, rules=None, optimizer=AdamW()):
    """(jitted train step, (state, tokens, targets) as ShapeDtypeStructs sharded over `mesh`): everything
    compile_for needs, without data. mesh: a jax.sharding.AbstractMesh (spmdsim.target_mesh) or Mesh."""
    rules = logical_rules(mesh.axis_names) if rules is None else rules
    specs = state_specs(cfg, rules)
    shapes = param_shapes(cfg)

    def struct(shape, spec, dtype):
        return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec))
    params = jax.tree_util.tree_map(lambda s, p: struct(s, p, cfg.param_dtype), shapes, specs["params"],
                                    is_leaf=_is_shape)
    moments = jax.tree_util.tree_map(lambda s, p: struct(s, p, jnp.float32), shapes, specs["m"], is_leaf=_is_shape)
    state = {"params": params, "m": moments, "v": moments, "step": struct((), PartitionSpec(), jnp.int32)}
    token_spec = logical_to_spec(("batch", "length"), rules)
    tokens = struct((batch, length), token_spec, jnp.int32)
    return make_train_step(cfg, mesh, rules, optimizer), (state, tokens, tokens)
