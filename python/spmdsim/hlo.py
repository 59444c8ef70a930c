"""Run the user's own JAX program: the SPMD-partitioned HLO module XLA compiles, on the virtual devices of any
topology, its numbers computed by spmdsim's interpreter and its step time and memory predicted (docs/hlo.md).

    spmdsim.from_jax(jitted, *args, topology="tpu-v5e:4x4")   # -> HloResult(outputs, report)
    spmdsim.run_hlo(text, topology="dgx-h100:1", args=...)      # a module's text (compiled.as_text(), dumps)

from_jax lowers and compiles with JAX on this host's CPU devices (as many as the program's mesh: set
XLA_FLAGS=--xla_force_host_platform_device_count=N before importing jax), lets JAX cut each argument into the
blocks its sharding gives each device, runs the module on spmdsim's devices, and puts the outputs back together
by the compiled output shardings.
"""

import typing as _typing

import numpy as _np

from spmdsim import _spmdsim


class HloResult(_typing.NamedTuple):
    """What run_hlo / from_jax return: the outputs (from_jax: the program's pytree of global numpy arrays;
    run_hlo: per logical device, the list of the entry's result arrays; None with abstract=True) and the report
    (the workload's dict of `spmdsim run --json`: steps by op_name scope, totals, memory, and `hlo` with the
    breakdown by instruction class and memory in XLA's terms)."""
    outputs: _typing.Any
    report: dict


def run_hlo(text, *, topology, args=None, device_assignment=None, abstract=False, threads=0, trace=False,
            name="hlo", overlap_collectives=False, narrow_types=None, mesh=None, model_flops_per_step=0,
            tokens_per_step=0, max_while_iterations=100_000_000, max_while_seconds=300.0):
    """Runs an HLO module's text (what compiled.as_text() or an --xla_dump_to file holds).

    topology: a spmdsim.Topology or its preset text ("tpu-v4:2x2x2", "dgx-h100:1"), with at least as many devices
    as the module's replica_count x num_partitions. args: per logical device, the entry's arguments (numpy arrays
    of the parameters' per-device shapes; smaller blocks are zero-padded as XLA pads uneven shards); None: random
    inputs cut by the parameters' shardings. device_assignment: the topology device id of each logical device
    (default 0, 1, 2, ...). abstract: shapes only, the prediction without data (any number of devices).
    overlap_collectives: price the module's synchronous collectives as the asynchronous ones XLA schedules on TPUs
    and GPUs (a module compiled for CPU has only synchronous ones). narrow_types: price the bf16 / f16 values that
    XLA CPU widened to f32 in their narrow type, as a TPU or GPU compile keeps them (None: on TPUs and GPUs).
    mesh: the mesh the program was jitted over ({"data": 2, "model": 4}, a jax Mesh or AbstractMesh), logical device
    i at its position i in row-major order, so that the report attributes collectives to its axes.
    model_flops_per_step, tokens_per_step: the model's FLOPs of one step over all devices and the tokens it
    processes, for the report's MFU and tokens per second (HFU needs neither). max_while_iterations,
    max_while_seconds: with data, a while loop that runs longer fails the run, naming it."""
    per_device, report = _spmdsim._run_hlo(text, name, topology, list(device_assignment or []),
                                           None if args is None else [list(a) for a in args], abstract, threads,
                                           trace, overlap_collectives, narrow_types, _mesh_axes(mesh),
                                           float(model_flops_per_step), float(tokens_per_step),
                                           int(max_while_iterations), float(max_while_seconds))
    return HloResult(None if abstract else per_device, report)


def _mesh_axes(mesh):
    """[(name, size), ...] of a dict, a jax Mesh / AbstractMesh (its shape) or None."""
    if mesh is None:
        return []
    shape = mesh if isinstance(mesh, dict) else getattr(mesh, "shape", None)
    if shape is None:
        raise TypeError(f"mesh must be a dict of axis sizes or a jax Mesh, not {type(mesh).__name__}")
    return [(str(name), int(size)) for name, size in dict(shape).items()]


def _program_mesh(compiled):
    """The mesh the compiled program's NamedSharding arguments are over, or None."""
    import jax
    for s in jax.tree_util.tree_leaves(compiled.input_shardings):
        if hasattr(s, "mesh") and hasattr(s.mesh, "shape"):
            return s.mesh
    return None


def hlo_text(compiled):
    """The compiled module's text with its large constants printed (as_text() elides them as {...})."""
    from jax._src.lib import _jax  # noqa: F401  (jaxlib's HLO bindings)
    import jaxlib._hlo as _hlo
    module = compiled.runtime_executable().hlo_modules()[0]
    options = _hlo.HloPrintOptions()
    options.print_large_constants = True
    return module.to_string(options)


def _arguments(compiled, args, kwargs, logical):
    """Per logical device, the compiled module's arguments: JAX's own blocks of each kept argument."""
    import jax
    leaves = jax.tree_util.tree_leaves((args, kwargs))
    kept = sorted(getattr(compiled._executable, "_kept_var_idx", range(len(leaves))))
    shardings = jax.tree_util.tree_leaves(compiled.input_shardings)
    if len(shardings) != len(kept):
        raise ValueError(f"from_jax: {len(kept)} arguments reach the module but it has {len(shardings)} shardings")
    per_device = [[None] * len(kept) for _ in logical]
    for k, (index, sharding) in enumerate(zip(kept, shardings)):
        placed = jax.device_put(leaves[index], sharding)
        for shard in placed.addressable_shards:
            per_device[logical[shard.device.id]][k] = _np.asarray(shard.data)
    return per_device


def _outputs(compiled, per_device, logical):
    """The program's outputs: each device's block put back where the output sharding says it goes."""
    import jax
    infos = jax.tree_util.tree_leaves(compiled.out_info)
    shardings = jax.tree_util.tree_leaves(compiled.output_shardings)
    results = []
    for k, (info, sharding) in enumerate(zip(infos, shardings)):
        sample = per_device[0][k]
        out = _np.zeros(info.shape, sample.dtype)
        for device, index in sharding.devices_indices_map(tuple(info.shape)).items():
            block = out[index]
            local = per_device[logical[device.id]][k]
            out[index] = local[tuple(slice(0, n) for n in block.shape)]
        results.append(out)
    return jax.tree_util.tree_unflatten(compiled.out_tree, results)


def from_jax(fn, *args, topology=None, target=None, xla_flags=None, libtpu_init_args=None, device_assignment=None,
             abstract=False, threads=0, trace=False, overlap_collectives=False, narrow_types=None,
             model_flops_per_step=0, tokens_per_step=0, **kwargs):
    """JAX: a jitted function (or a plain one, jitted here) and its arguments, run on spmdsim's devices.

    Lowers and compiles `fn` for `args` with JAX (on this host's CPU devices), runs the SPMD-partitioned module on
    the virtual devices of `topology` (logical device i on topology device device_assignment[i], default i) and
    returns HloResult(outputs, report): the outputs as the program's pytree of numpy arrays, computed by spmdsim
    (None with abstract=True), and the predicted step time and memory on `topology` (overlap_collectives and
    narrow_types as in run_hlo; model_flops_per_step and tokens_per_step for the report's MFU and tokens per
    second). Collectives are attributed to the axes of the mesh the program's arguments are sharded over. Keyword
    arguments other than these are the program's.

    target: compile with the target's own compiler instead (spmdsim.compile_for, docs/targets.md: a TPU or GPU
    topology preset; xla_flags and libtpu_init_args go to that compiler) and predict that module abstractly on
    `topology` (default: the target), each logical device on the chip the compiler put it on. The report's `hlo`
    then holds `compiler_memory` (the compiler's memory analysis, beside spmdsim's estimate) and `target` (the
    target, flags, compile time, versions, cache entry); outputs are None."""
    if target is not None:
        from spmdsim import target as _target
        return _target.from_jax_on_target(
            fn, args, kwargs, target=target, topology=topology, xla_flags=xla_flags,
            libtpu_init_args=libtpu_init_args, device_assignment=device_assignment, threads=threads, trace=trace,
            overlap_collectives=overlap_collectives, narrow_types=narrow_types,
            model_flops_per_step=model_flops_per_step, tokens_per_step=tokens_per_step)
    if topology is None:
        raise TypeError("from_jax() needs topology= (where to run and predict) or target= (compile for it)")
    import jax
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    compiled = jitted.lower(*args, **kwargs).compile()
    text = hlo_text(compiled)
    devices = compiled.runtime_executable().local_devices()
    logical = {d.id: i for i, d in enumerate(devices)}
    name = getattr(fn, "__name__", None) or getattr(getattr(fn, "__wrapped__", None), "__name__", "jax_program")
    per_device_args = None if abstract else _arguments(compiled, args, kwargs, logical)
    mesh = _program_mesh(compiled)
    if mesh is not None and mesh.size != len(devices):
        mesh = None
    per_device, report = _spmdsim._run_hlo(text, f"{name}.hlo.txt", topology, list(device_assignment or []),
                                           per_device_args, abstract, threads, trace, overlap_collectives,
                                           narrow_types, _mesh_axes(mesh), float(model_flops_per_step),
                                           float(tokens_per_step))
    if abstract:
        return HloResult(None, report)
    return HloResult(_outputs(compiled, per_device, logical), report)
