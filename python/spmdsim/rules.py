"""Flax's logical axis rules: the rules as a context manager (nn.logical_axis_rules, alias axis_rules) and the
logical PartitionSpecs of a tree mapped onto the mesh (nn.logical_to_mesh, nn.logical_to_mesh_sharding)."""

import contextlib as _contextlib

from spmdsim._spmdsim import NamedSharding, get_logical_axis_rules, logical_to_mesh_axes, set_logical_axis_rules
from spmdsim.interop import _as_mesh
from spmdsim.sharding import _is_spec


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
