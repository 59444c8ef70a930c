"""Models to compile for a target without data (spmdsim.compile_for, docs/targets.md). They need JAX."""

from spmdsim.models.decoder import (  # noqa: F401
    AdamW, DecoderConfig, init_params, init_state, logical_rules, logical_to_spec, loss_fn, make_train_step,
    param_axes, param_shapes, state_specs, train_step_and_args)
