"""Conversion to and from JAX: Mesh.from_jax / to_jax, PartitionSpec.from_jax / to_jax, NamedSharding.from_jax /
to_jax (jax is imported only when one is called)."""

import numpy as _np

from spmdsim._spmdsim import UNCONSTRAINED, Mesh, NamedSharding, PartitionSpec, Topology
from spmdsim.machine import _as_topology, _cpu_hosts, _current_topology
from spmdsim.mesh import AxisType


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
