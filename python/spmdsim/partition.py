"""eformer's escale: the axis-name tokens, the dynamic sharding presets, PartitionManager, the corrected sharding,
match_partition_rules and analyze_sharding_strategy over trees, and PartitionAxis frozen as eformer's dataclass."""

import dataclasses as _dataclasses
import threading as _threading
import typing as _typing
import warnings as _warnings

import numpy as _np

from spmdsim import _spmdsim
from spmdsim._spmdsim import PartitionAxis, PartitionSpec
from spmdsim.interop import _as_mesh
from spmdsim.mesh import get_incontext_mesh


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


# eformer's presets (HiddenStateSharding, AttnQSharding, ...), one DynamicShardingAxes each; their names, in order:
_dynamic_sharding_names = []
for _name, _axes, _mode in _spmdsim._dynamic_sharding_presets():
    globals()[_name] = DynamicShardingAxes(_axes, _mode)
    _dynamic_sharding_names.append(_name)
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
    the shape is cut. Without a mesh: AssertionError, or with raise_mesh_error=False (and for an empty `mesh=`)
    eformer's UserWarning "Active mesh is empty. Returning replicated NamedSharding." and NamedSharding(Mesh(), P()).
    """
    if mesh is None:
        mesh = get_incontext_mesh(raise_mesh_error)
    mesh = _as_mesh(mesh)
    if mesh.empty:
        _warnings.warn("Active mesh is empty. Returning replicated NamedSharding.", stacklevel=2)
        return _spmdsim.NamedSharding(mesh, _spmdsim.PartitionSpec())
    return _spmdsim._get_corrected_named_sharding(shape, partition_spec, mesh)


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
