"""Meshes (JAX: jax.experimental.mesh_utils, jax.make_mesh, jax.sharding.AxisType, `with mesh:`)."""

import enum as _enum
import threading as _threading

from spmdsim._spmdsim import Mesh
from spmdsim import _spmdsim
from spmdsim.machine import _as_devices, _device_ids, _resolve_topology, process_index


class AxisType(_enum.Enum):
    """JAX: jax.sharding.AxisType. Mesh(...) makes Auto axes, make_mesh Explicit ones (JAX's defaults)."""
    Auto = _enum.auto()
    Explicit = _enum.auto()
    Manual = _enum.auto()

    def __repr__(self):
        return self.name


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
