"""spmdsim.models: the decoder and its AdamW step, run for real on a CPU at a tiny size, lowered for TPUs and GPUs
without them, and compiled for a TPU slice by compile_for (docs/targets.md)."""
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import spmdsim
from spmdsim import models


def test_the_llama_decoder_learns_on_a_cpu_under_its_sharding_rules():
    cfg = models.DecoderConfig.tiny()
    # One CPU device, Auto axes (with_sharding_constraint's kind): the constraints still apply.
    mesh = jax.make_mesh((1, 1, 1), ("data", "fsdp", "tensor"), axis_types=(jax.sharding.AxisType.Auto,) * 3)
    state = models.init_state(cfg, seed=0)
    step = models.make_train_step(cfg, mesh, optimizer=models.AdamW(learning_rate=3e-3))
    tokens = jnp.asarray(np.random.default_rng(1).integers(0, cfg.vocab, (4, 32)), jnp.int32)
    targets = jnp.roll(tokens, -1, axis=1)
    losses = []
    for _ in range(4):
        state, loss = step(state, tokens, targets)
        losses.append(float(loss))
    assert abs(losses[0] - jnp.log(cfg.vocab)) < 1.0  # starts near uniform over the vocabulary
    assert all(b < a for a, b in zip(losses, losses[1:])), losses
    assert int(state["step"]) == 4


@pytest.mark.parametrize("style", ["llama", "maxtext-2023"])
def test_blockwise_attention_is_the_dense_attention_and_its_gradient(style):
    # float32 activations: the two orders of summation agree to rounding (bf16 would differ by its own rounding)
    dense = models.DecoderConfig.tiny(style=style, dtype="float32")
    blockwise = models.DecoderConfig.tiny(style=style, dtype="float32", attention="blockwise", attention_block=8)
    params = models.init_params(dense, seed=3)
    tokens = jnp.asarray(np.random.default_rng(3).integers(0, dense.vocab, (2, 32)), jnp.int32)
    targets = jnp.roll(tokens, -1, axis=1)
    (la, ga), (lb, gb) = (jax.value_and_grad(models.loss_fn)(params, tokens, targets, c) for c in (dense, blockwise))
    np.testing.assert_allclose(float(la), float(lb), rtol=1e-5)
    for a, b in zip(jax.tree_util.tree_leaves(ga), jax.tree_util.tree_leaves(gb)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-3, atol=1e-6)
    with pytest.raises(ValueError, match="does not divide the sequence length"):
        models.loss_fn(params, tokens[:, :30], targets[:, :30], blockwise)
    with pytest.raises(ValueError, match="attention must be"):
        models.DecoderConfig.tiny(attention="flash")


def test_embed_activations_over_tensor_shards_the_residual_stream():
    assert dict(models.logical_rules(("fsdp", "tensor")))["act_embed"] is None
    rules = models.logical_rules(("fsdp", "tensor"), embed_activations_over_tensor=True)
    assert models.logical_to_spec(("batch", "length", "act_embed"), rules) == P("fsdp", None, "tensor")


def test_the_maxtext_2023_decoder_learns_with_tied_embeddings_and_a_remat_policy():
    cfg = models.DecoderConfig.tiny(style="maxtext-2023", remat="dots_with_no_batch_dims_saveable")
    assert "unembed" not in models.param_shapes(cfg) and "wi" in models.param_shapes(cfg)["layers"]
    state = models.init_state(cfg, seed=0)
    step = models.make_train_step(cfg, optimizer=models.AdamW(learning_rate=3e-3))
    tokens = jnp.asarray(np.random.default_rng(2).integers(0, cfg.vocab, (4, 32)), jnp.int32)
    losses = []
    for _ in range(3):
        state, loss = step(state, tokens, jnp.roll(tokens, -1, axis=1))
        losses.append(float(loss))
    assert losses[2] < losses[1] < losses[0], losses


def test_logical_rules_map_fsdp_tensor_and_sequence_axes():
    rules = models.logical_rules(("data", "fsdp", "sequence", "tensor"))
    assert models.logical_to_spec(("batch", "length", "act_embed"), rules) == P(("data", "fsdp"), "sequence", None)
    axes = models.param_axes(models.DecoderConfig.tiny())
    specs = models.state_specs(models.DecoderConfig.tiny(), rules)
    assert specs["params"]["layers"]["wq"] == P(None, "fsdp", "tensor", None)
    assert specs["m"]["layers"]["w_down"] == P(None, "tensor", "fsdp")
    assert specs["params"]["embed"] == P("tensor", "fsdp") and specs["step"] == P()
    assert axes["layers"]["wo"] == ("layers", "heads", "kv", "embed")
    # A mesh axis is named once per spec; axes the mesh lacks map to nothing.
    assert models.logical_to_spec(("embed", "embed"), rules) == P("fsdp", None)
    assert models.logical_to_spec(("batch", "mlp"), models.logical_rules(("data",))) == P("data", None)


@pytest.mark.parametrize("style,remat", [("llama", "full"), ("maxtext-2023", "none"),
                                         ("llama", "dots_with_no_batch_dims_saveable")])
def test_the_train_step_lowers_for_tpu_and_cuda_without_devices(style, remat):
    cfg = models.DecoderConfig.tiny(style=style, remat=remat)
    mesh = jax.sharding.AbstractMesh((2, 4, 2), ("data", "fsdp", "tensor"))
    step, args = models.train_step_and_args(cfg, mesh, batch=16, length=64)
    state, tokens, _ = args
    assert state["params"]["layers"]["wq"].sharding.spec == P(None, "fsdp", "tensor", None)
    assert tokens.shape == (16, 64) and tokens.sharding.spec == P(("data", "fsdp"), None)
    for platform in ("tpu", "cuda"):
        with jax.sharding.use_abstract_mesh(mesh):
            text = step.trace(*args).lower(lowering_platforms=(platform,)).as_text()
        assert "mhlo.num_partitions = 16" in text and "sdy.sharding" in text
        assert "tf.aliasing_output" in text  # the state is donated, each buffer aliased to its update


def test_the_train_step_compiles_for_a_tpu_slice_with_its_state_donated(tmp_path, monkeypatch):
    monkeypatch.setenv("SPMDSIM_CACHE_DIR", str(tmp_path))
    cfg = models.DecoderConfig.tiny()
    mesh = spmdsim.target_mesh("tpu-v5e:2x4", fsdp=4, tensor=2)
    step, args = models.train_step_and_args(cfg, mesh, batch=8, length=64)
    m = spmdsim.compile_for(step, *args, target="tpu-v5e:2x4")
    memory = m.memory_analysis
    # Everything but the tokens and targets (int32 [2, 64] per device, in TPU tiles) is donated and aliased.
    assert 0 < memory["argument_size_in_bytes"] - memory["alias_size_in_bytes"] <= 2 * 8 * 128 * 4
    assert memory["peak_memory_in_bytes"] > memory["argument_size_in_bytes"] and m.mesh == {"fsdp": 4, "tensor": 2}
    assert "all-gather" in m.text and os.path.isdir(m.cache_path)


def test_configs_are_checked_where_they_are_made():
    with pytest.raises(ValueError, match="style must be"):
        models.DecoderConfig.tiny(style="gpt")
    with pytest.raises(ValueError, match="not a multiple of n_kv_heads 3"):
        models.DecoderConfig.tiny(n_kv_heads=3)
    with pytest.raises(ValueError, match="jax.checkpoint_policies name"):
        models.DecoderConfig.tiny(remat="everything")
    assert models.DecoderConfig().n_kv_heads == 32 and models.init_params is not None
    assert callable(models.loss_fn)
