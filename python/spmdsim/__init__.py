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
import json as _json
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
# The machine: an explicit topology, the devices' own, or the default set by set_topology (jax.devices()).

_default_topology = None


def set_topology(topology):
    """Makes `topology` (a Topology or a preset string) the machine that functions use when given no devices."""
    global _default_topology
    _default_topology = Topology(topology) if isinstance(topology, str) else topology
    return _default_topology


def get_topology():
    return _default_topology


def _resolve_topology(devices=None, topology=None):
    if topology is not None:
        return Topology(topology) if isinstance(topology, str) else topology
    if isinstance(devices, Topology):
        return devices
    if devices is not None:
        flat = _np.asarray(devices, dtype=object).ravel()
        if flat.size and isinstance(flat[0], Device):
            return flat[0].topology
    if _default_topology is not None:
        return _default_topology
    raise ValueError("no topology: pass topology=Topology('...'), devices from Topology(...).devices, "
                     "or call spmdsim.set_topology(...) first")


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


def make_mesh(axis_shapes, axis_names, *, devices=None, topology=None):
    """JAX: jax.make_mesh(axis_shapes, axis_names, devices=)."""
    topo = _resolve_topology(devices, topology)
    return _spmdsim._make_mesh(list(axis_shapes), list(axis_names), topo, _device_ids(devices))


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


def get_incontext_mesh(raise_error=True):
    """eformer: the mesh of the innermost `with mesh:` of this thread."""
    if _mesh_context.stack:
        return _mesh_context.stack[-1]
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

    def resolve(self, axes=_NOT_GIVEN, mode=_NOT_GIVEN, dynamic_axes=_NOT_GIVEN, shape=_NOT_GIVEN):
        if dynamic_axes is not _NOT_GIVEN:
            axes, mode = dynamic_axes.axes, dynamic_axes.mode
        elif axes is _NOT_GIVEN or mode is _NOT_GIVEN:
            raise ValueError("resolve needs `axes` and `mode`, or `dynamic_axes`")
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
        return f"PartitionManager(paxis={self.paxis!r})"


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
    return _spmdsim._get_corrected_named_sharding(shape, partition_spec, mesh)  # an empty mesh: ValueError


def _named_leaves(tree, prefix=""):
    """eformer's named_tree_map(sep='/'): (path, leaf) for every leaf of nested dicts / lists / tuples."""
    if isinstance(tree, dict):
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
    if isinstance(tree, dict):
        return type(tree)((k, _rebuild(v, values)) for k, v in tree.items())
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
    if mesh is None:
        mesh = get_incontext_mesh()
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


class ShardMap:
    """JAX: shard_map(f, mesh=, in_specs=, out_specs=, check_vma=) with a Program as f.

    Calling it runs the program on the simulated devices with numpy inputs (global arrays, split by in_specs) and
    returns ShardMapResult(outputs, prediction). The outputs are compared with the program run on one device
    (prediction['check']) unless check=False.
    """

    def __init__(self, program, mesh, in_specs, out_specs, check_vma=True, *, name="shard_map"):
        if not program.outputs:
            raise ValueError("the program returns nothing: call program.returns(value, ...) first")
        self.program = program
        self.mesh = mesh
        self.in_specs = tuple(in_specs) if isinstance(in_specs, (tuple, list)) else (in_specs,)
        self._single_output = isinstance(out_specs, PartitionSpec)
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


def plan(path_or_dict, topology=None, global_batch=None, top=10, threads=0, max_context=8, placement=True):
    """Searches the parallel configurations of the scenario's `model` workload (a YAML file's path, or the same
    document as a dict) and returns what `spmdsim plan --json` prints, as a dict: the counts and the `top`
    fastest configurations. `topology` overrides the scenario's ("dgx-h100:16"). The GIL is released while it
    runs; `threads` workers (0: one per core) evaluate configurations in parallel."""
    if global_batch is not None and global_batch < 1:
        raise ValueError(f"global_batch must be >= 1, got {global_batch}")
    if top < 1:
        raise ValueError(f"top must be >= 1, got {top}")
    args = (topology or "", global_batch or 0, top, threads, max_context, placement)
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


from spmdsim.hlo import HloResult, from_jax, hlo_text, run_hlo  # noqa: E402,F401  (re-exported; docs/hlo.md)
