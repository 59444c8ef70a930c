"""T5X's mesh builders and LocalChunker (t5x/partitioning.py)."""

import dataclasses as _dataclasses
import typing as _typing

from spmdsim import _spmdsim
from spmdsim._spmdsim import Device
from spmdsim.machine import _resolve_topology


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
