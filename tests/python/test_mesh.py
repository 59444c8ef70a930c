"""Topology, Device, Mesh, JAX's mesh_utils and T5X's mesh builders. Expected device orders are the worked
examples of mesh/mesh_utils.h and mesh/t5x_mesh.h (taken from JAX's and T5X's own tests and logic)."""
import collections

import numpy as np
import pytest

import spmdsim
import spmdsim.testing
from spmdsim import Mesh, Topology
from spmdsim.testing import mesh_from_preset


def ids(devices):
    return np.vectorize(lambda d: d.id, otypes=[np.int64])(devices)


def test_topology_parses_presets_and_lists_devices():
    topo = Topology("tpu-v4:2x2x4")
    assert topo.num_devices == 16
    assert topo.platform == "tpu"
    assert topo.device_kind == "TPU v4"
    assert topo.preset == "tpu-v4"
    assert str(topo) == "tpu-v4:2x2x4"
    assert repr(topo) == "Topology('tpu-v4:2x2x4')"
    d5 = topo.devices[5]
    assert (d5.id, d5.coords, d5.process_index, d5.core_on_chip) == (5, (1, 0, 1), 1, 0)
    assert d5.slice_index == 0 and d5.platform == "tpu" and d5.device_kind == "TPU v4"
    assert repr(d5) == "TpuDevice(id=5, process_index=1, coords=(1,0,1), core_on_chip=0)"
    assert d5 == topo.devices[5] and d5 != topo.devices[4] and hash(d5) == hash(topo.devices[5])
    assert d5.topology.num_devices == 16
    assert "tpu-v4" in Topology.presets
    assert topo.memory_bytes > 0 and topo.memory_bandwidth > 0 and topo.peak_flops["bfloat16"] > 0
    assert topo.num_processes == 4 and topo.devices_per_process == 4 and topo.num_slices == 1
    assert repr(Topology("cpu:8").devices[3]) == "CpuDevice(id=3)"
    assert repr(Topology("gpu:2x8").devices[9]) == "CudaDevice(id=9)"
    two = Topology("tpu-v4:2x2x2", num_slices=2)
    assert two.num_devices == 16 and two.num_slices == 2
    assert repr(two) == "Topology('tpu-v4:2x2x2', num_slices=2)"


def test_topology_errors_name_the_valid_presets():
    with pytest.raises(ValueError) as e:
        Topology("tpu-v9:2x2")
    assert "tpu-v4" in str(e.value)
    assert e.value.code in ("NOT_FOUND", "INVALID_ARGUMENT")


def test_topology_errors_suggest_the_preset_meant():
    # Before: "unknown topology preset 'tpu-v5'; valid presets: ..."; after: with a did-you-mean.
    with pytest.raises(ValueError) as e:
        Topology("tpu-v5:4x4x4")
    assert "(did you mean 'tpu-v5e' or 'tpu-v5p'?)" in str(e.value)
    with pytest.raises(ValueError) as e:
        Topology("tpu-v5p:4x4x")
    assert "tpu-v5p takes XxYxZ chips, e.g. tpu-v5p:4x4x4" in str(e.value)


def test_topology_takes_cloud_tpu_accelerator_types():
    topo = Topology("v5p-64")
    assert str(topo) == "tpu-v5p:2x4x4" and topo.accelerator_type == "v5p-64"
    assert topo.num_chips == 32 and topo.num_devices == 32
    assert topo.chips == "32 chips (Cloud TPU v5p-64 counts 64 TensorCores, 2 per chip)"
    assert Topology("v5litepod-256").num_chips == 256 and Topology("tpu-v4:2x2x2").accelerator_type == ""


def test_jax_devices_order_is_process_tiled():
    assert Topology("tpu-v3:4x4").jax_devices_order()[:16] == [0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15]


def test_create_device_mesh_matches_jax():
    topo = Topology("tpu-v4:2x2x2")
    devices = spmdsim.create_device_mesh((8,), topo.devices)
    assert devices.dtype == object and isinstance(devices[0], spmdsim.Device)
    assert ids(devices).tolist() == [0, 4, 2, 6, 1, 5, 3, 7]
    assert ids(spmdsim.create_device_mesh((2, 4), Topology("tpu-v3:2x2").devices)).tolist() == [[0, 1, 2, 3], [6, 7, 4, 5]]
    assert ids(spmdsim.create_device_mesh((8,), topology=topo)).tolist() == [0, 4, 2, 6, 1, 5, 3, 7]


def test_create_device_mesh_errors_are_jax_exception_types(monkeypatch):
    topo = Topology("tpu-v4:2x2x2")
    with pytest.raises(ValueError):
        spmdsim.create_device_mesh((3, 3), topo.devices)
    with pytest.raises(ValueError, match=r"create_device_mesh cannot create contiguous submeshes for mesh_shape "
                                         r"\(16,\) and physical mesh topology \(2, 2, 4\). Available mesh_shapes: "
                                         r"\[\(4, 4\)\]"):
        spmdsim.create_device_mesh((16,), Topology("tpu-v4:2x2x4").devices, contiguous_submeshes=True)
    assert spmdsim.create_device_mesh((4, 4), Topology("tpu-v4:2x2x4").devices, contiguous_submeshes=True).shape == (4, 4)
    monkeypatch.delenv("XLA_FLAGS", raising=False)  # another file of the same run may have asked JAX for 8
    with pytest.raises(ValueError, match=r"Number of devices 1 must equal the product of mesh_shape \(8,\)"):
        spmdsim.create_device_mesh((8,))  # the default machine, as JAX's on a CPU host: one CPU device


def test_default_topology_stands_in_for_jax_devices():
    try:
        spmdsim.set_topology("tpu-v4:2x2x2")
        assert spmdsim.get_topology().num_devices == 8
        assert ids(spmdsim.create_device_mesh((8,))).tolist() == [0, 4, 2, 6, 1, 5, 3, 7]
    finally:
        spmdsim.set_topology(None)


def test_create_hybrid_device_mesh_puts_slices_on_the_dcn_axis():
    topo = Topology("tpu-v4:2x2x2", num_slices=2)
    mesh = spmdsim.create_hybrid_device_mesh((1, 8), (2, 1), topo.devices)
    assert ids(mesh).tolist() == [[0, 4, 2, 6, 1, 5, 3, 7], [8, 12, 10, 14, 9, 13, 11, 15]]
    with pytest.raises(ValueError):
        spmdsim.create_hybrid_device_mesh((1, 8), (3, 1), topo.devices)
    by_process = spmdsim.create_hybrid_device_mesh((8,), (2,), topology=Topology("gpu:2x8"), process_is_granule=True,
                                                   should_sort_granules_by_key=True, allow_split_physical_axes=False)
    assert ids(by_process).tolist() == list(range(16))


def test_make_mesh_matches_jax():
    mesh = spmdsim.make_mesh((2, 8), ("x", "y"), topology=Topology("tpu-v3:2x4"))
    assert mesh.device_ids.reshape(-1).tolist() == [0, 1, 2, 3, 6, 7, 4, 5, 8, 9, 10, 11, 14, 15, 12, 13]
    assert mesh.axis_types == (spmdsim.AxisType.Explicit,) * 2  # JAX's make_mesh default
    assert spmdsim.make_mesh((2, 8), ("x", "y"), (spmdsim.AxisType.Auto,) * 2, topology=Topology("tpu-v3:2x4")).axis_types == (spmdsim.AxisType.Auto,) * 2
    with pytest.raises(ValueError, match="`jax.make_mesh` does not support multi-slice topologies"):
        spmdsim.make_mesh((16,), ("x",), devices=Topology("gpu:2x8"))  # GPU hosts are slices
    with pytest.raises(AssertionError, match="use create_hybrid_device_mesh"):  # as JAX: create_device_mesh fails first
        spmdsim.make_mesh((16,), ("x",), devices=Topology("tpu-v4:2x2x2", num_slices=2))


def test_mesh_properties_are_jax_s():
    topo = Topology("tpu-v4:2x2x2")
    mesh = Mesh(spmdsim.create_device_mesh((2, 4), topo.devices), ("data", "model"))
    assert isinstance(mesh.devices, np.ndarray) and mesh.devices.shape == (2, 4)
    assert all(isinstance(d, spmdsim.Device) for d in mesh.devices.flat)  # JAX: Device objects
    assert ids(mesh.devices).tolist() == mesh.device_ids.tolist()
    assert mesh.axis_types == (spmdsim.AxisType.Auto, spmdsim.AxisType.Auto)  # JAX's Mesh default
    assert mesh.shape == collections.OrderedDict([("data", 2), ("model", 4)])
    assert isinstance(mesh.shape, collections.OrderedDict)
    assert mesh.axis_names == ("data", "model")
    assert mesh.shape_tuple == (("data", 2), ("model", 4))
    assert mesh.axis_sizes == (2, 4)
    assert mesh.size == 8 and not mesh.empty
    assert mesh.topology.num_devices == 8
    assert str(mesh) == "Mesh('data': 2, 'model': 4, axis_types=(Auto, Auto))"
    assert repr(mesh) == "Mesh(axis_sizes=(2, 4), axis_names=('data', 'model'), axis_types=(Auto, Auto))"
    same = Mesh(mesh.devices, ("data", "model"), topology=topo)
    assert same == mesh and hash(same) == hash(mesh)
    assert Mesh([], ()).empty and repr(Mesh([], ())) == "Mesh(axis_sizes=(), axis_names=(), axis_types=())"


def test_mesh_from_integer_ids_gets_a_cpu_topology():
    mesh = Mesh(np.arange(8).reshape(2, 4), ("x", "y"))
    assert mesh.topology.platform == "cpu" and mesh.topology.num_devices == 8


def test_mesh_errors():
    with pytest.raises(ValueError):
        Mesh(np.arange(8).reshape(2, 4), ("x",))
    with pytest.raises(ValueError):
        Mesh(np.arange(4), ("x",), topology=Topology("cpu:2"))
    with pytest.raises(TypeError):
        Mesh(np.ones(4), ("x",))
    with pytest.raises(ValueError, match=r"^Mesh axis names cannot be None. Got: \('x', None\)$"):  # JAX's
        Mesh(np.arange(8).reshape(2, 4), ("x", None))
    with pytest.raises(ValueError, match="one Topology"):
        Mesh(np.array([Topology("cpu:2").devices[0], Topology("cpu:2").devices[1]], dtype=object), ("x",))


def test_mesh_is_a_context_manager():
    mesh = Mesh(np.arange(4), ("x",))
    with pytest.raises(AssertionError, match="No mesh found under this context manager."):
        spmdsim.get_incontext_mesh()
    assert spmdsim.get_incontext_mesh(raise_error=False).empty
    with mesh as m:
        assert m is mesh
        assert spmdsim.get_incontext_mesh() is mesh
    assert spmdsim.get_incontext_mesh(False).empty


def test_t5x_default_mesh_and_local_chunker():
    topo = Topology("tpu-v3:4x4")
    mesh = spmdsim.default_mesh(4, topology=topo)
    assert str(mesh) == "Mesh('data': 8, 'model': 4, axis_types=(Auto, Auto))"
    assert mesh.device_ids.tolist()[:6] == [[0, 1, 2, 3], [8, 9, 10, 11], [16, 17, 18, 19], [24, 25, 26, 27],
                                         [4, 5, 6, 7], [12, 13, 14, 15]]
    assert str(mesh._local_mesh(1)) == "Mesh('data': 2, 'model': 4, axis_types=(Auto, Auto))"
    chunker = spmdsim.LocalChunker(mesh, host=1)
    assert chunker.num_chunks == {"data": 4, "model": 1}
    assert chunker.chunk_ids == {"data": 2, "model": 0}
    assert chunker.host == 1 and chunker.mesh_axes == ["data", "model"]
    assert chunker.global_mesh == mesh and chunker.local_mesh.size == 8
    info = chunker.get_local_chunk_info((128, 16), ("data", "model"))
    assert info == spmdsim.LocalChunkInfo((slice(64, 96), slice(0, 16)), 0)
    info = chunker.get_local_chunk_info((128, 16), (None, "model"))
    assert info.slice == (slice(None), slice(0, 16)) and info.replica_id == 2
    assert chunker.get_shard_id(["data"]) == 2 and chunker.get_shard_id("data") == 2
    assert chunker.get_replica_id(["data"]) == 0 and chunker.get_replica_id("model") == 2
    with pytest.raises(KeyError):
        chunker.get_local_chunk_info((128, 16), ("nope", None))
    with pytest.raises(NotImplementedError):
        chunker.get_local_chunk_info((128, 16), (("data", "model"), None))


def test_t5x_get_mesh_gpu_and_cpu_meshes():
    topo = Topology("tpu-v3:4x4")
    assert spmdsim.get_mesh((2, 1, 1, 2), topo.devices) == spmdsim.default_mesh(4, topology=topo)
    assert spmdsim.get_mesh((2, 1, 1, 2), topology=topo, input_local_devices=[topo.devices[4]]).size == 32
    with pytest.raises(AssertionError):
        spmdsim.get_mesh((3, 1, 1, 2), topology=topo)
    gpu = spmdsim.get_gpu_mesh(4, topology=Topology("gpu:2x8"))
    assert str(gpu) == "Mesh('data': 4, 'model': 4, axis_types=(Auto, Auto))"
    assert gpu.device_ids.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    with pytest.raises(AssertionError):
        spmdsim.get_gpu_mesh(3, topology=Topology("gpu:2x8"))
    assert spmdsim.get_cpu_mesh(topology=Topology("cpu:8")).device_ids.tolist() == [list(range(8))]
    multi = spmdsim.default_mesh(0, ici_mesh_shape=(1, 1, 8), dcn_mesh_shape=(2, 1, 1),
                                 topology=Topology("tpu-v4:2x2x2", num_slices=2))
    assert str(multi) == "Mesh('replica': 2, 'data': 1, 'model': 8, axis_types=(Auto, Auto, Auto))"
    assert multi.device_ids[0, 0].tolist() == [0, 4, 2, 6, 1, 5, 3, 7]
    with pytest.raises(ValueError, match="No default mesh"):
        spmdsim.default_mesh(3, topology=Topology("tpu-v3:4x4"))


def test_mesh_fixture_from_markers(mesh, topology):
    assert topology.num_devices == 8 and mesh.axis_names == ("x",)
    assert spmdsim.get_incontext_mesh() is mesh


# The mesh marker passes create_device_mesh's options and builds hybrid meshes over slices (issue: the marker
# could give axis sizes only, so a mesh that JAX builds with allow_split_physical_axes or over DCN was out of reach).
@pytest.mark.topology("tpu-v4:4x4x4")
@pytest.mark.mesh(data=2, model=32, allow_split_physical_axes=True)
def test_mesh_marker_allows_split_physical_axes(mesh, topology):
    want = spmdsim.create_device_mesh((2, 32), topology.devices, allow_split_physical_axes=True)
    assert mesh.device_ids.tolist() == ids(want).tolist()
    with pytest.raises(NotImplementedError, match="set allow_split_physical_axes to True"):  # JAX's, without it
        spmdsim.create_device_mesh((2, 32), topology.devices)


@pytest.mark.topology("tpu-v4:2x2x2", num_slices=2)
@pytest.mark.mesh(data=1, model=8, dcn=dict(data=2))
def test_mesh_marker_builds_a_hybrid_mesh_over_slices(mesh, topology):
    assert topology.num_slices == 2
    assert str(mesh) == "Mesh('data': 2, 'model': 8, axis_types=(Auto, Auto))"
    assert mesh.device_ids.tolist() == [[0, 4, 2, 6, 1, 5, 3, 7], [8, 12, 10, 14, 9, 13, 11, 15]]


def test_mesh_marker_options_are_checked():
    topo = Topology("tpu-v4:2x2x2", num_slices=2)
    # Before: allow_split_axes=True was taken as an axis of size 1 (True is an int) and the typo went unnoticed.
    with pytest.raises(TypeError, match=r"allow_split_axes=True is neither an axis size .* did you mean "
                                        r"allow_split_physical_axes=\?"):
        mesh_from_preset(topo, data=2, model=8, allow_split_axes=True)
    with pytest.raises(ValueError, match=r"dcn axis 'replica' is not a mesh axis; the axes are \('data', 'model'\)"):
        mesh_from_preset(topo, data=1, model=8, dcn=dict(replica=2))
    with pytest.raises(TypeError, match="process_is_granule applies to a hybrid mesh"):
        mesh_from_preset(topo, data=2, model=8, process_is_granule=True)


@pytest.mark.topology("tpu-v4:2x2x4")
@pytest.mark.mesh(data=4, model=4)
def test_mesh_fixture_reads_the_markers(mesh):
    assert str(mesh) == "Mesh('data': 4, 'model': 4, axis_types=(Auto, Auto))"
    assert mesh.topology.device_kind == "TPU v4"


# Before: the marker took axis sizes only, so a layout that needs a torus axis split between mesh axes, or a mesh
# over slices, could not be a fixture. After: allow_split_physical_axes and dcn, as mesh_utils takes them.
@pytest.mark.topology("tpu-v4:2x2x4")
@pytest.mark.mesh(data=2, fsdp=2, model=4, allow_split_physical_axes=True)
def test_mesh_fixture_splits_physical_axes(mesh):
    assert mesh.axis_names == ("data", "fsdp", "model") and mesh.devices.shape == (2, 2, 4)
    with pytest.raises(NotImplementedError, match="allow_split_physical_axes"):  # JAX's default refuses it
        spmdsim.testing.mesh_from_preset("tpu-v4:2x2x4", data=2, fsdp=2, model=4)


@pytest.mark.topology("tpu-v4:2x2x2", 2)
@pytest.mark.mesh(data=1, model=8, dcn={"data": 2})
def test_mesh_fixture_lays_dcn_axes_over_slices(mesh):
    assert mesh.devices.shape == (2, 8)
    slices = [{d.slice_index for d in row} for row in mesh.devices]
    assert slices == [{0}, {1}]  # the data axis crosses the slices; each model row stays in one
    with pytest.raises(ValueError, match="dcn axis 'dta' is not a mesh axis"):
        spmdsim.testing.mesh_from_preset(mesh.topology, data=1, model=8, dcn={"dta": 2})
