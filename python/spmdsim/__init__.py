"""spmdsim from Python: JAX's, eformer's, Flax's and T5X's sharding names on a simulated machine.

Code written against the peers ports by changing an import::

    import spmdsim
    from spmdsim import P, NamedSharding

    topo = spmdsim.Topology("tpu-v4:2x2x4")                  # 16 simulated TPU v4 chips
    mesh = spmdsim.Mesh(spmdsim.create_device_mesh((4, 4), topo.devices), ("data", "model"))
    s = NamedSharding(mesh, P("data", None))
    s.devices_indices_map((8, 128))                         # {0: (slice(0, 2, None), slice(None, None, None)), ...}

The package keeps one concept per module and this file re-exports their names (docs/python.md, "Modules"):
machine (the topology and devices), mesh (mesh_utils, make_mesh, `with mesh:`), sharding (PartitionSpec and
NamedSharding extras), interop (to and from JAX), rules (Flax's logical axis rules), partition (eformer's escale),
t5x (T5X's meshes), program (shard_map programs), scenario (run and plan), hlo (the user's own JAX program),
errors (one-line TypeErrors) and testing (the pytest plugin). docs/python.md describes what is bound how, the GIL
policy, the dtype mapping and the error mapping.
"""

from spmdsim import _spmdsim
from spmdsim._spmdsim import (  # noqa: F401  (re-exported)
    Device,
    Topology,
    Mesh,
    PartitionSpec,
    P,
    UNCONSTRAINED,
    NamedSharding,
    PartitionAxis,
    logical_to_mesh_axes,
    clear_caches,
    get_logical_axis_rules,
    set_logical_axis_rules,
    composite_rules,
    standard_logical_axis_rules,
    correct_spec,
    validate_spec,
    shard,
    gather,
    array_dtypes,
)
from spmdsim import errors, machine, mesh, interop, sharding, rules, partition, t5x, program, scenario  # noqa: F401
from spmdsim.errors import DuplicateSpecError, IndivisibleError, ScenarioError  # noqa: F401
from spmdsim.machine import (  # noqa: F401
    devices,
    device_count,
    get_topology,
    local_devices,
    local_device_count,
    process_count,
    process_index,
    set_topology,
    use_topology,
)
from spmdsim.mesh import (  # noqa: F401
    AxisType,
    create_device_mesh,
    create_hybrid_device_mesh,
    get_incontext_mesh,
    make_mesh,
)
from spmdsim.rules import axis_rules, logical_axis_rules, logical_to_mesh, logical_to_mesh_sharding  # noqa: F401
from spmdsim.partition import (  # noqa: F401
    BATCH,
    BIAS_HEAD_SEQ,
    BIAS_KV_SEQ,
    DP,
    EMBED,
    EMPTY,
    EP,
    EXPERT,
    EXPERT_GATE,
    FSDP,
    HEAD,
    HEAD_DIM,
    KV_HEAD,
    KV_HEAD_DIM,
    KV_LENGTH,
    LENGTH,
    MLP_INTERMEDIATE,
    MODE_DECODE,
    MODE_INSERT,
    MODE_PREFILL,
    MODE_TRAIN,
    QUERY_LENGTH,
    SP,
    TP,
    VOCAB,
    DynamicShardingAxes,
    PartitionManager,
    analyze_sharding_strategy,
    get_corrected_named_sharding,
    get_current_partition_manager,
    match_partition_rules,
)
from spmdsim.t5x import LocalChunker, LocalChunkInfo, default_mesh, get_cpu_mesh, get_gpu_mesh, get_mesh  # noqa: F401
from spmdsim.program import Program, ShapeDtypeStruct, ShardMap, ShardMapResult, Value, shard_map  # noqa: F401
from spmdsim.scenario import plan, run  # noqa: F401

__all__ = [
    "AxisType", "devices", "device_count", "local_devices", "local_device_count", "process_index",
    "process_count", "use_topology", "logical_to_mesh", "logical_to_mesh_sharding",
    "DuplicateSpecError", "IndivisibleError", "ScenarioError", "Device", "Topology", "Mesh", "PartitionSpec", "P",
    "UNCONSTRAINED", "NamedSharding", "PartitionAxis", "PartitionManager", "logical_to_mesh_axes",
    "logical_axis_rules", "axis_rules", "get_logical_axis_rules", "set_logical_axis_rules", "composite_rules",
    "standard_logical_axis_rules", "correct_spec", "validate_spec", "shard", "gather", "array_dtypes",
    "create_device_mesh", "create_hybrid_device_mesh", "make_mesh", "set_topology", "get_topology", "get_mesh",
    "get_cpu_mesh", "get_gpu_mesh", "default_mesh", "LocalChunker", "LocalChunkInfo", "get_incontext_mesh",
    "get_corrected_named_sharding", "get_current_partition_manager", "match_partition_rules",
    "analyze_sharding_strategy", "DynamicShardingAxes",
    "ShapeDtypeStruct", "Program", "Value", "ShardMap", "shard_map", "ShardMapResult", "run", "plan",
    "clear_caches",
]

# eformer's dynamic sharding presets (HiddenStateSharding, ...), named by the extension.
for _name in partition._dynamic_sharding_names:
    globals()[_name] = getattr(partition, _name)
    __all__.append(_name)
del _name

errors.wrap_bound_callables(
    (Topology, Mesh, PartitionSpec, NamedSharding, PartitionAxis, _spmdsim._PartitionManager, _spmdsim.LocalChunker),
    [globals()] + [vars(m) for m in (machine, mesh, interop, sharding, rules, partition, t5x, program, scenario)])

from spmdsim.hlo import HloResult, from_jax, hlo_text, run_hlo  # noqa: E402,F401  (re-exported; docs/hlo.md)
from spmdsim.target import (  # noqa: E402,F401  (re-exported; docs/targets.md)
    CompileError, Target, TargetModule, abstract_mesh, compile_for, resolve_target, target_mesh)
__all__ += ["CompileError", "Target", "TargetModule", "abstract_mesh", "compile_for", "resolve_target",
            "target_mesh"]
