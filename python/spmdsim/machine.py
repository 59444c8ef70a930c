"""The machine a program runs on (JAX: jax.devices(), jax.process_index()).

The topology of the innermost `with use_topology(...)` of this thread, else the one set by set_topology, else a CPU
host of as many devices as XLA_FLAGS' --xla_force_host_platform_device_count says (1 without it), as JAX on a CPU
host. Likewise the current process (JAX: jax.process_index()), 0 by default.
"""

import contextlib as _contextlib
import os as _os
import re as _re
import threading as _threading

import numpy as _np

from spmdsim._spmdsim import Device, Topology

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
