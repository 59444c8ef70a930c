"""spmdsim from Python: JAX's, eformer's, Flax's and T5X's sharding names on a simulated machine.

Code written against the peers ports by changing an import::

    import spmdsim
    from spmdsim import P, NamedSharding

    topo = spmdsim.Topology("tpu-v4:2x2x4")                  # 16 simulated TPU v4 chips
    mesh = spmdsim.Mesh(spmdsim.create_device_mesh((4, 4), topo.devices), ("data", "model"))
    s = NamedSharding(mesh, P("data", None))
    s.devices_indices_map((8, 128))                         # {0: (slice(0, 2, None), slice(None, None, None)), ...}

docs/python.md describes what is bound how, the GIL policy, the dtype mapping and the error mapping.
"""

import contextlib as _contextlib
import dataclasses as _dataclasses
import enum as _enum
import json as _json
import re as _re
import os as _os
import threading as _threading
import typing as _typing
import warnings as _warnings

import numpy as _np

from spmdsim import _spmdsim
from spmdsim._spmdsim import (  # noqa: F401  (re-exported)
    DuplicateSpecError,
    IndivisibleError,
    ScenarioError,
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

# ---------------------------------------------------------------------------------------------------------------
# The machine (JAX: jax.devices()): the topology of the innermost `with use_topology(...)` of this thread, else the
# one set by set_topology, else a CPU host of as many devices as XLA_FLAGS' --xla_force_host_platform_device_count
# says (1 without it), as JAX on a CPU host. Likewise the current process (JAX: jax.process_index()), 0 by default.

class AxisType(_enum.Enum):
    """JAX: jax.sharding.AxisType. Mesh(...) makes Auto axes, make_mesh Explicit ones (JAX's defaults)."""
    Auto = _enum.auto()
    Explicit = _enum.auto()
    Manual = _enum.auto()

    def __repr__(self):
        return self.name


_default_topology = None
_default_process = 0


class _MachineContext(_threading.local):
    def __init__(self):
        self.stack = []  # (topology, process_index or None)


_machine = _MachineContext()


def _as_topology(topology):
    return Topology(topology) if isinstance(topology, str) else topology


def set_topology(topology, process_index=0):
    """Makes `topology` (a Topology or a preset string; None: back to the default CPU host) the machine of every
    thread, seen from process `process_index`. Returns it."""
    global _default_topology, _default_process
    _default_topology = _as_topology(topology)
    _default_process = int(process_index)
    return _default_topology


@_contextlib.contextmanager
def use_topology(topology, process_index=0):
    """`with spmdsim.use_topology("tpu-v4:2x2x4"):` makes it this thread's machine (spmdsim.devices(), meshes of
    integer ids, the mesh builders without devices) inside the block, seen from process `process_index`."""
    topo = _as_topology(topology)
    _machine.stack.append((topo, int(process_index)))
    try:
        yield topo
    finally:
        _machine.stack.pop()


def _current_topology():
    """The topology set by use_topology / set_topology, or None."""
    if _machine.stack:
        return _machine.stack[-1][0]
    return _default_topology


_cpu_hosts = {}


def _default_cpu_topology():
    flags = _os.environ.get("XLA_FLAGS", "")
    m = _re.search(r"--xla_force_host_platform_device_count=(\d+)", flags)
    n = int(m.group(1)) if m else 1
    if n not in _cpu_hosts:
        _cpu_hosts[n] = Topology(f"cpu:{n}")
    return _cpu_hosts[n]


def get_topology():
    """The current topology (use_topology, set_topology), or None when neither is set."""
    return _current_topology()


def _machine_topology():
    topo = _current_topology()
    return topo if topo is not None else _default_cpu_topology()


def process_index():
    """JAX: jax.process_index(): the process this Python program stands for (0 unless use_topology/set_topology
    said otherwise)."""
    if _machine.stack:
        return _machine.stack[-1][1]
    return _default_process


def process_count():
    """JAX: jax.process_count() of the current topology."""
    return _machine_topology().num_processes


def devices(backend=None):
    """JAX: jax.devices(): every Device of the current topology, in JAX's order (process by process)."""
    topo = _machine_topology()
    table = topo.devices
    return [table[i] for i in topo.jax_devices_order()]


def device_count(backend=None):
    """JAX: jax.device_count()."""
    return _machine_topology().num_devices


def local_devices(process_index=None, backend=None):
    """JAX: jax.local_devices(): the Devices of process `process_index` (default: the current one)."""
    p = globals()["process_index"]() if process_index is None else process_index
    return [d for d in devices() if d.process_index == p]


def local_device_count(backend=None):
    """JAX: jax.local_device_count()."""
    return len(local_devices())


def _resolve_topology(devices=None, topology=None):
    if topology is not None:
        return _as_topology(topology)
    if isinstance(devices, Topology):
        return devices
    if devices is not None:
        flat = _np.asarray(devices, dtype=object).ravel()
        if flat.size and isinstance(flat[0], Device):
            return flat[0].topology
    return _machine_topology()


def _device_ids(devices):
    if devices is None or isinstance(devices, Topology):
        return None
    return [d.id if isinstance(d, Device) else int(d) for d in _np.asarray(devices, dtype=object).ravel()]


def _as_devices(ids, topology):
    """numpy array of ids -> numpy object array of Device, as JAX's mesh_utils return."""
    table = topology.devices
    out = _np.empty(ids.shape, dtype=object)
    flat = out.reshape(-1)
    for i, d in enumerate(ids.reshape(-1)):
        flat[i] = table[int(d)]
    return out


# ---------------------------------------------------------------------------------------------------------------
# JAX: jax.experimental.mesh_utils, jax.make_mesh, `with mesh:`.

def create_device_mesh(mesh_shape, devices=None, contiguous_submeshes=False, allow_split_physical_axes=False, *,
                       topology=None):
    """JAX: mesh_utils.create_device_mesh. Returns a numpy array of Devices shaped `mesh_shape`."""
    topo = _resolve_topology(devices, topology)
    ids = _spmdsim._create_device_mesh(list(mesh_shape), topo, _device_ids(devices), contiguous_submeshes,
                                       allow_split_physical_axes)
    return _as_devices(ids, topo)


def create_hybrid_device_mesh(mesh_shape, dcn_mesh_shape, devices=None, *, process_is_granule=False,
                              should_sort_granules_by_key=True, allow_split_physical_axes=False, topology=None):
    """JAX: mesh_utils.create_hybrid_device_mesh (slices, or processes, joined by DCN)."""
    topo = _resolve_topology(devices, topology)
    ids = _spmdsim._create_hybrid_device_mesh(list(mesh_shape), list(dcn_mesh_shape), topo, _device_ids(devices),
                                              process_is_granule, should_sort_granules_by_key,
                                              allow_split_physical_axes)
    return _as_devices(ids, topo)


def make_mesh(axis_shapes, axis_names, axis_types=None, *, devices=None, topology=None):
    """JAX: jax.make_mesh(axis_shapes, axis_names, axis_types=None, devices=): Explicit axes unless axis_types says
    otherwise, as JAX's."""
    topo = _resolve_topology(devices, topology)
    names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
    mesh = _spmdsim._make_mesh(list(axis_shapes), list(names), topo, _device_ids(devices))
    if axis_types is None:
        axis_types = (AxisType.Explicit,) * len(names)
    return Mesh(mesh.devices, names, axis_types)


class _MeshContext(_threading.local):
    def __init__(self):
        self.stack = []


_mesh_context = _MeshContext()


def _mesh_enter(self):
    _mesh_context.stack.append(self)
    return self


def _mesh_exit(self, *exc):
    _mesh_context.stack.pop()
    return False


Mesh.__enter__ = _mesh_enter
Mesh.__exit__ = _mesh_exit


def _mesh_local_devices(self):
    """JAX: Mesh.local_devices, the mesh's devices of the current process (spmdsim.process_index())."""
    p = process_index()
    return [d for d in self.devices.flat if d.process_index == p]


Mesh.local_devices = property(_mesh_local_devices)
Mesh.local_mesh = property(lambda self: self._local_mesh(process_index()),
                           doc="JAX: Mesh.local_mesh, the devices of the current process (spmdsim.process_index()).")
Mesh.is_multi_process = property(lambda self: len({d.process_index for d in self.devices.flat}) > 1)
Mesh._flat_devices_tuple = property(lambda self: tuple(self.devices.flat))


def _jax_context_mesh():
    """The mesh of JAX's `with jax_mesh:` when jax is imported and one is active, else None."""
    import sys
    if "jax" not in sys.modules:
        return None
    try:
        from jax._src import mesh as jax_mesh_lib
        mesh = jax_mesh_lib.thread_resources.env.physical_mesh
    except (ImportError, AttributeError):  # pragma: no cover - another jax layout
        return None
    return None if mesh.empty else mesh


def get_incontext_mesh(raise_error=True):
    """eformer: the mesh of the innermost `with mesh:` of this thread."""
    if _mesh_context.stack:
        return _mesh_context.stack[-1]
    jax_mesh = _jax_context_mesh()
    if jax_mesh is not None:
        return Mesh.from_jax(jax_mesh)
    if raise_error:
        raise AssertionError("No mesh found under this context manager.")
    return Mesh([], ())


# ---------------------------------------------------------------------------------------------------------------
# T5X: t5x/partitioning.py mesh builders and LocalChunker.

def _host_of(input_local_devices, host):
    devices = list(input_local_devices or ())
    if devices and isinstance(devices[0], Device):
        return devices[0].process_index
    return host


def get_mesh(model_parallel_submesh, input_devices=(), input_local_devices=(), tile_by_host_if_needed=True,
             backend=None, *, topology=None, host=0):
    """T5X: get_mesh. Mesh ('data', 'model') tiling the machine with the model-parallel submesh."""
    topo = _resolve_topology(input_devices or None, topology)
    return _spmdsim._get_mesh(list(model_parallel_submesh), topo, _host_of(input_local_devices, host),
                              tile_by_host_if_needed)


def get_cpu_mesh(*, topology=None):
    """T5X: get_cpu_mesh."""
    return _spmdsim._get_cpu_mesh(_resolve_topology(None, topology))


def get_gpu_mesh(num_partitions, *, topology=None):
    """T5X: get_gpu_mesh."""
    return _spmdsim._get_gpu_mesh(int(num_partitions), _resolve_topology(None, topology))


def default_mesh(num_partitions, model_parallel_submesh=None, backend=None, ici_mesh_shape=None,
                 dcn_mesh_shape=None, *, topology=None):
    """T5X: default_mesh."""
    return _spmdsim._default_mesh(int(num_partitions),
                                  None if not model_parallel_submesh else list(model_parallel_submesh),
                                  _resolve_topology(None, topology),
                                  None if ici_mesh_shape is None else list(ici_mesh_shape),
                                  None if dcn_mesh_shape is None else list(dcn_mesh_shape))


@_dataclasses.dataclass
class LocalChunkInfo:
    """T5X: LocalChunkInfo."""
    slice: _typing.Tuple[slice, ...]
    replica_id: int


class LocalChunker(_spmdsim.LocalChunker):
    """T5X: LocalChunker(global_mesh), as it runs on process `host`."""

    def get_local_chunk_info(self, global_shape, mesh_axes):
        slices, replica_id = self._get_local_chunk_info(list(global_shape), list(mesh_axes))
        return LocalChunkInfo(tuple(slice(a, b) for a, b in slices), replica_id)

    def get_shard_id(self, sharded_mesh_axes):
        axes = [sharded_mesh_axes] if isinstance(sharded_mesh_axes, str) else list(sharded_mesh_axes)
        return super().get_shard_id([a for a in axes if a is not None])

    def get_replica_id(self, sharded_mesh_axes):
        axes = [sharded_mesh_axes] if isinstance(sharded_mesh_axes, str) else list(sharded_mesh_axes)
        return super().get_replica_id([a for a in axes if a is not None])


# ---------------------------------------------------------------------------------------------------------------
# Flax: logical axis rules as a context manager (nn.logical_axis_rules, alias axis_rules).

@_contextlib.contextmanager
def logical_axis_rules(rules):
    """Flax: `with nn.logical_axis_rules(rules):` installs `rules` for this thread."""
    previous = get_logical_axis_rules()
    set_logical_axis_rules(rules)
    try:
        yield
    finally:
        set_logical_axis_rules(previous)


axis_rules = logical_axis_rules

# ---------------------------------------------------------------------------------------------------------------
# eformer: escale's names.

_tokens = _spmdsim._tokens
EMPTY = _tokens.empty
BATCH = _tokens.batch
LENGTH = _tokens.length
QUERY_LENGTH = _tokens.query_length
KV_LENGTH = _tokens.kv_length
EMBED = _tokens.embed
HEAD = _tokens.head
KV_HEAD = _tokens.kv_head
MLP_INTERMEDIATE = _tokens.mlp_intermediate
VOCAB = _tokens.vocab
EXPERT = _tokens.expert
EXPERT_GATE = _tokens.expert_gate
HEAD_DIM = _tokens.head_dim
KV_HEAD_DIM = _tokens.kv_head_dim
BIAS_HEAD_SEQ = _tokens.bias_head_seq
BIAS_KV_SEQ = _tokens.bias_kv_seq
DP = _tokens.dp
FSDP = _tokens.fsdp
TP = _tokens.tp
SP = _tokens.sp
EP = _tokens.ep
MODE_TRAIN = _tokens.mode_train
MODE_PREFILL = _tokens.mode_prefill
MODE_DECODE = _tokens.mode_decode
MODE_INSERT = _tokens.mode_insert


class DynamicShardingAxes(_typing.NamedTuple):
    """eformer: DynamicShardingAxes (axes, and a mode or the dimension whose size 1 means decode)."""
    axes: list
    mode: _typing.Union[str, int]


for _name, _axes, _mode in _spmdsim._dynamic_sharding_presets():
    globals()[_name] = DynamicShardingAxes(_axes, _mode)
    __all__.append(_name)
del _name, _axes, _mode

_NOT_GIVEN = _spmdsim._NOT_GIVEN


class PartitionManager(_spmdsim._PartitionManager):
    """eformer: PartitionManager(paxis). `with manager:` makes it this thread's current manager."""

    _current = _threading.local()

    def __init__(self, paxis=None):
        if paxis is not None and not isinstance(paxis, PartitionAxis):
            raise TypeError(f"Expected PartitionAxis, got {type(paxis)}")
        super().__init__(paxis)

    def resolve(self, axes=_NOT_GIVEN, mode=_NOT_GIVEN, dynamic_axes=_NOT_GIVEN, shape=_NOT_GIVEN):
        """eformer: resolve(axes, mode), resolve(dynamic_axes=preset), or resolve(preset, shape=...) with a preset
        (a DynamicShardingAxes, or a class of eformer's with `axes` and `mode`)."""
        if dynamic_axes is _NOT_GIVEN and axes is not _NOT_GIVEN:
            if isinstance(axes, tuple) and hasattr(axes, "_fields"):
                dynamic_axes, axes = axes, _NOT_GIVEN
            elif isinstance(axes, type) and issubclass(axes, tuple) and hasattr(axes, "_fields"):
                dynamic_axes, axes = DynamicShardingAxes(axes.axes, axes.mode), _NOT_GIVEN
        if axes is _NOT_GIVEN or mode is _NOT_GIVEN:
            if dynamic_axes is _NOT_GIVEN:
                raise ValueError("if axes or mode is empty you should provide dynamic axes")
            axes, mode = dynamic_axes.axes, dynamic_axes.mode
        if isinstance(mode, int) and shape is _NOT_GIVEN:
            raise ValueError("when using dynamic mode detection shape should be provided")
        return self._resolve(list(axes), mode, None if shape is _NOT_GIVEN else tuple(shape))

    def __enter__(self):
        stack = getattr(PartitionManager._current, "stack", None)
        if stack is None:
            stack = PartitionManager._current.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc):
        PartitionManager._current.stack.pop()
        return False

    def __repr__(self):
        return "PartitionManager(...)"  # eformer's


def get_current_partition_manager():
    """eformer: the manager of the innermost `with manager:` of this thread, or None."""
    stack = getattr(PartitionManager._current, "stack", None)
    return stack[-1] if stack else None


def get_corrected_named_sharding(shape, partition_spec, raise_mesh_error=True, *, mesh=None):
    """eformer: get_corrected_named_sharding(shape, partition_spec) on the mesh of `with mesh:` (or `mesh=`).

    Axes missing from the mesh and axes whose sizes do not divide the dimension become None; a spec longer than
    the shape is cut. spmdsim's NamedSharding needs devices, so an empty mesh raises where eformer would warn and
    return a sharding on it.
    """
    if mesh is None:
        mesh = get_incontext_mesh(raise_mesh_error)
    return _spmdsim._get_corrected_named_sharding(shape, partition_spec, _as_mesh(mesh))  # empty: ValueError


def _is_array_like(value):
    """An array or an abstract one (numpy, jax.Array, jax.ShapeDtypeStruct, spmdsim.ShapeDtypeStruct): a leaf."""
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _named_leaves(tree, prefix=""):
    """eformer's named_tree_map(sep='/'): (path, leaf) for every leaf of nested dicts / lists / tuples; None is an
    empty subtree (no leaf), as in JAX."""
    if tree is None:
        return
    if _is_array_like(tree):
        yield prefix, tree
    elif isinstance(tree, dict):
        for key, value in tree.items():
            yield from _named_leaves(value, f"{prefix}/{key}" if prefix else str(key))
    elif isinstance(tree, (list, tuple)) and not _is_shape(tree):
        for i, value in enumerate(tree):
            yield from _named_leaves(value, f"{prefix}/{i}" if prefix else str(i))
    else:
        yield prefix, tree


def _is_shape(value):
    return isinstance(value, tuple) and all(isinstance(d, (int, _np.integer)) for d in value)


def _shape_of(leaf):
    if _is_shape(leaf):
        return tuple(int(d) for d in leaf)
    shape = getattr(leaf, "shape", None)
    return None if shape is None else tuple(int(d) for d in shape)


def _rebuild(tree, values):
    if tree is None:
        return None
    if _is_array_like(tree):
        return next(values)
    if isinstance(tree, dict):
        return type(tree)((k, _rebuild(v, values)) for k, v in tree.items())
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return type(tree)(*(_rebuild(v, values) for v in tree))
    if isinstance(tree, (list, tuple)) and not _is_shape(tree):
        return type(tree)(_rebuild(v, values) for v in tree)
    return next(values)


def match_partition_rules(rules, tree, min_size=0, strict=True):
    """eformer: match_partition_rules(rules, tree). `tree` holds numpy arrays (anything with .shape) or shapes
    (tuples of ints); nested dicts are named with '/'. Returns the same structure with PartitionSpecs.
    min_size=None reads MIN_SHARDING_SIZE from the environment (default 16384)."""
    leaves = list(_named_leaves(tree))
    specs = _spmdsim._match_partition_rules(list(rules), [(name, _shape_of(leaf)) for name, leaf in leaves],
                                            min_size, strict)
    return _rebuild(tree, iter(specs))


def analyze_sharding_strategy(pytree, partition_specs, mesh=None):
    """eformer: analyze_sharding_strategy(pytree, partition_specs, mesh), with every figure computed:
    total_parameters, sharded_parameters, memory_per_device {device id: bytes}, balance_score, partition_stats
    {path: shard shape, bytes, replication, ...}, plus memory_efficiency, replication_factor and capacity."""
    mesh = get_incontext_mesh() if mesh is None else _as_mesh(mesh)
    leaves = list(_named_leaves(pytree))
    specs = [spec for _, spec in _named_leaves_specs(partition_specs)]
    if len(specs) != len(leaves):
        raise ValueError(f"analyze_sharding_strategy: {len(leaves)} arrays but {len(specs)} partition specs")
    arrays = []
    for (name, leaf), spec in zip(leaves, specs):
        dtype = getattr(leaf, "dtype", _np.float32)
        arrays.append((name, _shape_of(leaf), dtype, spec))
    return _spmdsim._analyze(arrays, mesh)


def _named_leaves_specs(tree, prefix=""):
    if isinstance(tree, PartitionSpec):
        yield prefix, tree
    elif isinstance(tree, dict):
        for key, value in tree.items():
            yield from _named_leaves_specs(value, f"{prefix}/{key}" if prefix else str(key))
    elif isinstance(tree, (list, tuple)):
        for i, value in enumerate(tree):
            yield from _named_leaves_specs(value, f"{prefix}/{i}" if prefix else str(i))
    else:
        yield prefix, tree


# ---------------------------------------------------------------------------------------------------------------
# Simulation: shard_map programs and scenario runs.

class ShapeDtypeStruct(_typing.NamedTuple):
    """JAX: jax.ShapeDtypeStruct. An abstract program input (shape and dtype, no data)."""
    shape: tuple
    dtype: _typing.Any


class Value:
    """A value of a Program (an input or the result of a step)."""

    def __init__(self, program, name):
        self.program = program
        self.name = name

    def __repr__(self):
        return f"Value({self.name!r})"

    def __add__(self, other): return self.program.add(self, other)
    def __sub__(self, other): return self.program.sub(self, other)
    def __mul__(self, other): return self.program.mul(self, other)
    def __truediv__(self, other): return self.program.div(self, other)
    def __neg__(self): return self.program.neg(self)
    def __matmul__(self, other): return self.program.matmul(self, other)


def _axes(axis_name):
    return [axis_name] if isinstance(axis_name, str) else list(axis_name)


class Program:
    """A shard_map body as a list of steps (workloads' ProgramStep; docs/workloads.md lists every op).

    Example::

        p = spmdsim.Program()
        x, w = p.input("x"), p.input("w")
        y = p.psum(p.einsum("bd,df->bf", x, w), "model")
        p.returns(y)
    """

    def __init__(self):
        self.inputs = []
        self.steps = []
        self.outputs = []
        self._count = 0

    def input(self, name):
        if any(n == name for n in self.inputs):
            raise ValueError(f"input {name!r} defined twice")
        self.inputs.append(name)
        return Value(self, name)

    def returns(self, *values):
        self.outputs = [v.name for v in values]
        return self

    def step(self, op, *args, name=None, **fields):
        """Any op of the program language: p.step('softmax', x, axis=1)."""
        if name is None:
            self._count += 1
            name = f"{op}_{self._count}"
        for a in args:
            if not isinstance(a, Value) or a.program is not self:
                raise TypeError(f"{op}: arguments must be Values of this program, got {a!r}")
        step = {"name": name, "op": op, "args": [a.name for a in args]}
        step.update({k: v for k, v in fields.items() if v is not None})
        self.steps.append(step)
        return Value(self, name)

    # Collectives (JAX: jax.lax.psum & co; axis_name a mesh axis or a tuple of them).
    def psum(self, x, axis_name, *, name=None): return self.step("psum", x, axes=_axes(axis_name), name=name)
    def pmean(self, x, axis_name, *, name=None): return self.step("pmean", x, axes=_axes(axis_name), name=name)
    def pmax(self, x, axis_name, *, name=None): return self.step("pmax", x, axes=_axes(axis_name), name=name)
    def pmin(self, x, axis_name, *, name=None): return self.step("pmin", x, axes=_axes(axis_name), name=name)

    def all_gather(self, x, axis_name, *, axis=0, tiled=False, name=None):
        return self.step("all_gather", x, axes=_axes(axis_name), axis=axis, tiled=tiled, name=name)

    def psum_scatter(self, x, axis_name, *, scatter_dimension=0, tiled=False, name=None):
        return self.step("psum_scatter", x, axes=_axes(axis_name), axis=scatter_dimension, tiled=tiled, name=name)

    def all_to_all(self, x, axis_name, split_axis, concat_axis, *, tiled=False, name=None):
        return self.step("all_to_all", x, axes=_axes(axis_name), split_axis=split_axis, concat_axis=concat_axis,
                         tiled=tiled, name=name)

    def ppermute(self, x, axis_name, perm, *, name=None):
        return self.step("ppermute", x, axes=_axes(axis_name), pairs=[tuple(p) for p in perm], name=name)

    def axis_index(self, axis_name, *, name=None): return self.step("axis_index", axes=_axes(axis_name), name=name)

    # Linear algebra.
    def einsum(self, equation, *operands, name=None): return self.step("einsum", *operands, equation=equation, name=name)
    def matmul(self, a, b, *, name=None): return self.step("matmul", a, b, name=name)
    def dot(self, a, b, *, name=None): return self.step("dot", a, b, name=name)

    # Elementwise: y is a Value or a Python number.
    def _binary(self, op, x, y, name):
        if isinstance(y, Value):
            return self.step(op, x, y, name=name)
        return self.step(op, x, scalar=float(y), name=name)

    def add(self, x, y, *, name=None): return self._binary("add", x, y, name)
    def sub(self, x, y, *, name=None): return self._binary("sub", x, y, name)
    def mul(self, x, y, *, name=None): return self._binary("mul", x, y, name)
    def div(self, x, y, *, name=None): return self._binary("div", x, y, name)
    def max(self, x, y, *, name=None): return self._binary("max", x, y, name)
    def min(self, x, y, *, name=None): return self._binary("min", x, y, name)
    def pow(self, x, y, *, name=None): return self._binary("pow", x, y, name)

    def gelu(self, x, *, approximate=True, name=None): return self.step("gelu", x, approximate=approximate, name=name)
    def cast(self, x, dtype, *, name=None): return self.step("cast", x, dtype=dtype, name=name)

    # Reductions and shapes.
    def _dims(self, axis):
        return [] if axis is None else ([axis] if isinstance(axis, int) else list(axis))

    def sum(self, x, axis=None, *, keepdims=False, name=None):
        return self.step("sum", x, dims=self._dims(axis), keepdims=keepdims, name=name)

    def mean(self, x, axis=None, *, keepdims=False, name=None):
        return self.step("mean", x, dims=self._dims(axis), keepdims=keepdims, name=name)

    def softmax(self, x, axis, *, name=None): return self.step("softmax", x, axis=axis, name=name)
    def log_softmax(self, x, axis, *, name=None): return self.step("log_softmax", x, axis=axis, name=name)
    def reshape(self, x, shape, *, name=None): return self.step("reshape", x, shape=list(shape), name=name)
    def transpose(self, x, axes, *, name=None): return self.step("transpose", x, dims=list(axes), name=name)
    def broadcast_to(self, x, shape, *, name=None): return self.step("broadcast_to", x, shape=list(shape), name=name)

    def concatenate(self, values, axis=0, *, name=None):
        return self.step("concatenate", *values, axis=axis, name=name)

    def slice(self, x, start, limit, strides=None, *, name=None):
        return self.step("slice", x, start=list(start), limit=list(limit),
                         strides=None if strides is None else list(strides), name=name)


def _unary(op):
    def method(self, x, *, name=None):
        return self.step(op, x, name=name)
    method.__name__ = op
    method.__doc__ = f"Elementwise {op}."
    return method


for _op in ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "silu", "square"):
    setattr(Program, _op, _unary(_op))
for _op in ("max_reduce", "min_reduce"):
    setattr(Program, _op, lambda self, x, axis=None, *, keepdims=False, name=None, _o=_op:
            self.step(_o, x, dims=self._dims(axis), keepdims=keepdims, name=name))
for _op in ("gelu_grad", "relu_grad"):
    setattr(Program, _op, lambda self, x, dy, *, name=None, _o=_op: self.step(_o, x, dy, name=name))
Program.softmax_grad = lambda self, p, dp, axis, *, name=None: self.step("softmax_grad", p, dp, axis=axis, name=name)
del _op


class ShardMapResult(_typing.NamedTuple):
    """What a ShardMap call returns: the outputs (numpy; None in abstract mode) and the prediction (the workload's
    dict of `spmdsim run --json`: steps, totals, memory, check)."""
    outputs: _typing.Any
    prediction: dict


def _not_a_program(f):
    what = "a Python function" if callable(f) else f"{type(f).__name__} {f!r}"
    return (f"ShardMap takes a spmdsim.Program as f, got {what}: build the body with p = spmdsim.Program(); "
            f"x = p.input('x'); p.returns(p.psum(x, 'data')) (docs/python.md); to simulate a JAX function as XLA "
            f"compiles it, use spmdsim.from_jax(fn, *args, topology=...) (docs/hlo.md)")


class ShardMap:
    """JAX: shard_map(f, mesh=, in_specs=, out_specs=, check_vma=) with a Program as f.

    Calling it runs the program on the simulated devices with numpy inputs (global arrays, split by in_specs) and
    returns ShardMapResult(outputs, prediction). The outputs are compared with the program run on one device
    (prediction['check']) unless check=False.
    """

    def __init__(self, program, mesh, in_specs, out_specs, check_vma=True, *, name="shard_map"):
        if not isinstance(program, Program):
            raise TypeError(_not_a_program(program))
        if not program.outputs:
            raise ValueError("the program returns nothing: call program.returns(value, ...) first")
        self.program = program
        self.mesh = _as_mesh(mesh)
        self.in_specs = tuple(in_specs) if isinstance(in_specs, (tuple, list)) else (in_specs,)
        self._single_output = _is_spec(out_specs)
        self.out_specs = (out_specs,) if self._single_output else tuple(out_specs)
        if len(self.in_specs) != len(program.inputs):
            raise ValueError(f"shard_map: {len(self.in_specs)} in_specs for {len(program.inputs)} program inputs")
        if len(self.out_specs) != len(program.outputs):
            raise ValueError(f"shard_map: {len(self.out_specs)} out_specs for {len(program.outputs)} program outputs")
        self.check_vma = check_vma
        self.name = name

    def __call__(self, *args, abstract=False, threads=0, check=True, rtol=1e-5, atol=1e-6):
        if len(args) != len(self.program.inputs):
            raise TypeError(f"shard_map: expected {len(self.program.inputs)} arguments, got {len(args)}")
        inputs = [(n, a, s) for n, a, s in zip(self.program.inputs, args, self.in_specs)]
        outputs = list(zip(self.program.outputs, self.out_specs))
        values, prediction = _spmdsim._run_program(self.mesh, inputs, self.program.steps, outputs, self.check_vma,
                                                   check, rtol, atol, abstract, threads, self.name)
        if abstract:
            result = None if self._single_output else tuple(None for _ in outputs)
        else:
            result = tuple(values[n] for n in self.program.outputs)
            if self._single_output:
                result = result[0]
        return ShardMapResult(result, prediction)


def shard_map(program, mesh, in_specs, out_specs, check_vma=True):
    """JAX: jax.shard_map (keyword names as JAX's) for a Program."""
    return ShardMap(program, mesh, in_specs, out_specs, check_vma)


def plan(path_or_dict, topology=None, global_batch=None, top=10, threads=0, max_context=8, placement=True,
         memory_headroom=0.1, stack=None, calibration=None):
    """Searches the parallel configurations of the scenario's `model` workload (a YAML file's path, or the same
    document as a dict) and returns exactly what `spmdsim plan --json` prints with the same options, as a dict: the
    counts and the `top` fastest configurations (docs/plan.md). The options are the CLI's: `topology` overrides
    the scenario's ("dgx-h100:16", --topology), `global_batch` the model's (--global-batch), `max_context` is the
    largest context degree searched (--max-context), `placement=False` keeps Megatron's axis order
    (--no-placement), `memory_headroom` is the fraction of each device's memory left free, in [0, 1)
    (--memory-headroom 0.1), `stack` prices the step for a software stack ("megatron", "pytorch-fsdp", "maxtext",
    "auto"; --stack) and `calibration` names a profile of `spmdsim calibrate` (--calibration; default: the
    scenario's topology.calibration when the topology is the scenario's). No scenario file is written. The GIL is
    released while it runs; `threads` workers (0: one per core) evaluate configurations in parallel."""
    if global_batch is not None and global_batch < 1:
        raise ValueError(f"global_batch must be >= 1, got {global_batch}")
    if top < 1:
        raise ValueError(f"top must be >= 1, got {top}")
    args = (topology or "", global_batch or 0, top, threads, max_context, placement, float(memory_headroom),
            stack or "", _os.fspath(calibration) if calibration is not None else "")
    if isinstance(path_or_dict, dict):
        return _spmdsim._plan(_json.dumps(path_or_dict), True, *args)
    return _spmdsim._plan(_os.fspath(path_or_dict), False, *args)


def run(path_or_dict, abstract=False, threads=0):
    """Runs a scenario (a YAML file's path, or the same document as a dict) and returns what
    `spmdsim run --json` writes, as a dict. The GIL is released while the simulation runs."""
    if isinstance(path_or_dict, dict):
        text = _json.dumps(path_or_dict)  # JSON is YAML
        return _spmdsim._run_scenario(text, True, abstract, threads)
    return _spmdsim._run_scenario(_os.fspath(path_or_dict), False, abstract, threads)


# ---------------------------------------------------------------------------------------------------------------
# The rest of the peers' surface on spmdsim's classes: JAX's PartitionSpec.partitions, NamedSharding's addressable
# devices, eformer's frozen PartitionAxis (replace, hash), Flax's tree functions, conversion to and from JAX.

PartitionSpec.partitions = property(lambda self: self._partitions, doc="JAX: the entries as a tuple.")


def _addressable_devices(self):
    p = process_index()
    return {d for d in self.device_set if d.process_index == p}


NamedSharding.addressable_devices = property(_addressable_devices,
                                             doc="JAX: the devices of the current process (spmdsim.process_index()).")
NamedSharding.is_fully_addressable = property(lambda self: len(self.addressable_devices) == len(self.device_set))
NamedSharding.memory_kind = property(lambda self: "device")
_named_sharding_addressable_map = NamedSharding.addressable_devices_indices_map


def _addressable_devices_indices_map(self, global_shape, *, process_index=None):
    """JAX: addressable_devices_indices_map(global_shape): the map restricted to the devices of the current
    process (spmdsim.process_index(), or `process_index=`)."""
    p = globals()["process_index"]() if process_index is None else process_index
    return _named_sharding_addressable_map(self, global_shape, process_index=p)


NamedSharding.addressable_devices_indices_map = _addressable_devices_indices_map


def _frozen_setattr(self, name, value):
    raise _dataclasses.FrozenInstanceError(f"cannot assign to field '{name}'")


def _frozen_delattr(self, name):
    raise _dataclasses.FrozenInstanceError(f"cannot delete field '{name}'")


def _partition_axis_fields(self):
    return {name: getattr(self, name) for name in PartitionAxis._field_names}


def _partition_axis_replace(self, **updates):
    """eformer: PartitionAxis.replace(**fields): a copy with those fields changed (the others as they are)."""
    unknown = [k for k in updates if k not in PartitionAxis._field_names]
    if unknown:
        raise TypeError(f"PartitionAxis.__init__() got an unexpected keyword argument '{unknown[0]}'")
    fields = _partition_axis_fields(self)
    fields.update(updates)
    return PartitionAxis(**fields)


PartitionAxis.__setattr__ = _frozen_setattr
PartitionAxis.__delattr__ = _frozen_delattr
PartitionAxis.replace = _partition_axis_replace
PartitionAxis.__hash__ = lambda self: hash(repr(self))


def _is_spec(x):
    return isinstance(x, PartitionSpec) or (type(x).__name__ in ("P", "PartitionSpec")
                                            and type(x).__module__.split(".")[0] == "jax")


def _tree_map(f, tree, is_leaf):
    """jax.tree_util.tree_map over dicts, lists and tuples (None is an empty subtree, left as it is)."""
    if is_leaf(tree):
        return f(tree)
    if tree is None:
        return None
    if isinstance(tree, dict):
        return type(tree)((k, _tree_map(f, v, is_leaf)) for k, v in tree.items())
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return type(tree)(*(_tree_map(f, v, is_leaf) for v in tree))
    if isinstance(tree, (list, tuple)):
        return type(tree)(_tree_map(f, v, is_leaf) for v in tree)
    return f(tree)


def logical_to_mesh(tree, rules=None):
    """Flax: logical_to_mesh_axes applied to every logical PartitionSpec of a tree (dicts, lists, tuples)."""
    return _tree_map(lambda x: logical_to_mesh_axes(x, rules), tree, _is_spec)


def logical_to_mesh_sharding(tree, mesh, rules=None):
    """Flax: the NamedSharding on `mesh` of every logical PartitionSpec of a tree."""
    mesh = _as_mesh(mesh)
    return _tree_map(lambda x: NamedSharding(mesh, x), logical_to_mesh(tree, rules), _is_spec)


def _jax():
    try:
        import jax
    except ImportError as e:  # pragma: no cover - the test environment has jax
        raise ImportError("converting to or from JAX needs jax installed (pip install jax)") from e
    return jax


def _as_mesh(mesh):
    return mesh if isinstance(mesh, Mesh) else Mesh.from_jax(mesh)


def _mesh_from_jax(mesh, topology=None):
    """spmdsim's Mesh of a jax.sharding.Mesh: the same device ids, names and axis types. The topology: `topology=`,
    else the current one (spmdsim.devices()) when it has the ids, else a CPU host of JAX's device count."""
    if isinstance(mesh, Mesh):
        return mesh
    ids = _np.vectorize(lambda d: d.id, otypes=[_np.int64])(_np.asarray(mesh.devices, dtype=object))
    types = tuple(AxisType[t.name] for t in mesh.axis_types)
    if topology is None:
        current = _current_topology()
        if current is not None and (ids.size == 0 or current.num_devices > int(ids.max())):
            topology = current
        else:
            flat = _np.asarray(mesh.devices, dtype=object).ravel()
            platform = getattr(flat[0], "platform", "cpu") if flat.size else "cpu"
            if platform != "cpu":
                raise ValueError(f"Mesh.from_jax: a mesh of {platform} devices needs topology=Topology('...') "
                                 f"(only CPU devices map to a topology by themselves)")
            count = max(int(ids.max()) + 1 if ids.size else 1, len(_jax().devices("cpu")))
            topology = _cpu_hosts.setdefault(count, Topology(f"cpu:{count}"))
    return Mesh(ids, tuple(mesh.axis_names), types, topology=_as_topology(topology))


def _mesh_to_jax(self, devices=None):
    """The jax.sharding.Mesh of this mesh: JAX's devices of the same ids (default jax.devices()), names, axis
    types. JAX must have every id: on a CPU host set XLA_FLAGS=--xla_force_host_platform_device_count=N first."""
    jax = _jax()
    by_id = {d.id: d for d in (devices if devices is not None else jax.devices())}
    ids = self.device_ids
    missing = sorted(int(i) for i in ids.flat if int(i) not in by_id)
    if missing:
        raise ValueError(f"Mesh.to_jax: JAX has no device {missing[0]} ({len(by_id)} devices); on a CPU host set "
                         f"XLA_FLAGS=--xla_force_host_platform_device_count={int(ids.max()) + 1} before importing jax")
    arr = _np.empty(ids.shape, dtype=object)
    for pos, i in _np.ndenumerate(ids):
        arr[pos] = by_id[int(i)]
    types = tuple(getattr(jax.sharding.AxisType, t.name) for t in self.axis_types)
    return jax.sharding.Mesh(arr, self.axis_names, axis_types=types)


def _spec_from_jax(spec):
    return spec if isinstance(spec, PartitionSpec) else PartitionSpec(*(
        UNCONSTRAINED if type(e).__name__ == "UnconstrainedSingleton" else e for e in spec))


def _spec_to_jax(self):
    jax = _jax()
    P_ = jax.sharding.PartitionSpec
    return P_(*(P_.UNCONSTRAINED if e is UNCONSTRAINED else e for e in self))


def _sharding_from_jax(sharding, topology=None):
    if isinstance(sharding, NamedSharding):
        return sharding
    return NamedSharding(_mesh_from_jax(sharding.mesh, topology), _spec_from_jax(sharding.spec))


def _sharding_to_jax(self, devices=None):
    jax = _jax()
    return jax.sharding.NamedSharding(self.mesh.to_jax(devices), self.spec.to_jax())


Mesh.from_jax = staticmethod(_mesh_from_jax)
Mesh.to_jax = _mesh_to_jax
PartitionSpec.from_jax = staticmethod(_spec_from_jax)
PartitionSpec.to_jax = _spec_to_jax
NamedSharding.from_jax = staticmethod(_sharding_from_jax)
NamedSharding.to_jax = _sharding_to_jax


# ---------------------------------------------------------------------------------------------------------------
# One-line errors. pybind11 answers arguments that match no binding with a TypeError listing every signature and
# the repr of every argument (a Mesh's repr can run to many lines); every bound callable whose arguments can fail to
# convert is wrapped here so that the TypeError says in one line what it got and what it takes.

import functools as _functools

_SIGNATURE_LINE = _re.compile(r"^\s*1\. (?:[\w.]+)?(\(.*?\))(?: -> .*)?$", _re.M)


def _mismatch_message(name, message, args, kwargs):
    got = [type(a).__name__ for a in args] + [f"{k}={type(v).__name__}" for k, v in kwargs.items()]
    match = _SIGNATURE_LINE.search(message)
    takes = match.group(1).replace("spmdsim._spmdsim.", "") if match else "(see help())"
    takes = _re.sub(r"^\(self: \w+(, )?", "(", takes)
    return f"{name}() got ({', '.join(got)}); it takes {takes}"


def _one_line_errors(func, name):
    @_functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except TypeError as e:
            text = str(e)
            if "incompatible function arguments" in text or "incompatible constructor arguments" in text:
                raise TypeError(_mismatch_message(name, text, args[1:] if name.endswith("__init__") else args,
                                                  kwargs)) from None
            raise
    return wrapper


def _can_mismatch(func):
    """False when every parameter of the binding accepts any Python object (its dispatch cannot fail)."""
    doc = (getattr(func, "__doc__", None) or "").split("\n", 1)[0]
    match = _re.match(r"^\w+\((.*)\)", doc)
    if not match:
        return True
    params = [p.strip() for p in match.group(1).split(",") if p.strip() and not p.strip().startswith("self")]
    params = [p for p in params if p not in ("*", "/")]
    return not all(p.startswith("*") or p.split(":", 1)[-1].split("=")[0].strip() in ("handle", "object", "args",
                                                                                        "kwargs")
                   for p in params)


def _wrap_bound_callables():
    for cls in (Topology, Mesh, PartitionSpec, NamedSharding, PartitionAxis, _spmdsim._PartitionManager,
                _spmdsim.LocalChunker):
        for attr, value in list(vars(cls).items()):
            if type(value).__name__ != "instancemethod" or (attr.startswith("__") and attr != "__init__"):
                continue
            func = value.__func__
            if _can_mismatch(func):
                setattr(cls, attr, _one_line_errors(func, f"{cls.__name__}.{attr}" if attr != "__init__"
                                                    else f"{cls.__name__}.__init__"))
    module = globals()
    for attr, value in list(module.items()):
        if type(value).__name__ == "builtin_function_or_method" and getattr(value, "__module__", "") in (
                "spmdsim._spmdsim", "spmdsim") and _can_mismatch(value):
            module[attr] = _one_line_errors(value, attr)
    for attr, value in list(vars(_spmdsim).items()):
        if type(value).__name__ == "builtin_function_or_method" and attr.startswith("_") and _can_mismatch(value):
            setattr(_spmdsim, attr, _one_line_errors(value, attr.lstrip("_")))


_wrap_bound_callables()
from spmdsim.hlo import HloResult, from_jax, hlo_text, run_hlo  # noqa: E402,F401  (re-exported; docs/hlo.md)
from spmdsim.target import (  # noqa: E402,F401  (re-exported; docs/targets.md)
    CompileError, Target, TargetModule, abstract_mesh, compile_for, resolve_target, target_mesh)
__all__ += ["CompileError", "Target", "TargetModule", "abstract_mesh", "compile_for", "resolve_target",
            "target_mesh"]
