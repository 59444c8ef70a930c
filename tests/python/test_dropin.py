"""The drop-in surface: code written against JAX, eformer, Flax and T5X runs against `import spmdsim` with the peers'
names, signatures, objects and exception types. JAX itself is imported here (the test environment has it) to check
the conversions both ways and that real JAX objects are accepted."""
import dataclasses
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import spmdsim  # noqa: E402
from spmdsim import Mesh, NamedSharding, P  # noqa: E402


def test_devices_follow_the_current_topology():
    # Without a topology: the CPU host JAX would see under the same XLA_FLAGS.
    assert spmdsim.device_count() == 8 and [d.id for d in spmdsim.devices()] == list(range(8))
    assert spmdsim.process_index() == 0 and spmdsim.process_count() == 1
    with spmdsim.use_topology("tpu-v4:2x2x4", process_index=2) as topo:
        assert spmdsim.device_count() == 16 and spmdsim.get_topology() is topo
        assert spmdsim.process_index() == 2 and spmdsim.process_count() == 4
        assert [d.process_index for d in spmdsim.local_devices()] == [2] * 4
        assert spmdsim.local_device_count() == 4
        assert spmdsim.devices()[0] is topo.devices[0]  # the same Device objects every time, as JAX's
        mesh = Mesh(np.arange(16).reshape(4, 4), ("data", "model"))  # integer ids: the current machine
        assert mesh.topology is topo
        assert {d.process_index for d in mesh.local_devices} == {2}
        assert mesh.local_mesh.size == 4 and mesh.is_multi_process
        s = NamedSharding(mesh, P("data"))
        assert {d.process_index for d in s.addressable_devices} == {2} and not s.is_fully_addressable
        assert all(d.process_index == 2 for d in s.addressable_devices_indices_map((8,)))
    assert spmdsim.device_count() == 8
    spmdsim.set_topology("cpu:4")
    try:
        assert spmdsim.device_count() == 4
    finally:
        spmdsim.set_topology(None)


def test_mesh_takes_jax_s_arguments():
    m = Mesh(np.arange(4), "x")  # one name as a str
    assert m.axis_names == ("x",) and m.axis_types == (spmdsim.AxisType.Auto,)
    e = Mesh(np.arange(4).reshape(2, 2), ("a", "b"), (spmdsim.AxisType.Explicit,) * 2)
    assert repr(e.axis_types[0]) == "Explicit" and e != Mesh(np.arange(4).reshape(2, 2), ("a", "b"))
    with pytest.raises(ValueError, match="P\\(UNCONSTRAINED,\\) cannot contain `P.UNCONSTRAINED` when no mesh "
                                         "axis_types are `Auto`"):
        NamedSharding(e, P(P.UNCONSTRAINED))
    assert NamedSharding(Mesh(np.arange(4), "x"), P(P.UNCONSTRAINED)).shard_shape((8,)) == (8,)
    assert P("x", None).partitions == ("x", None)


def test_conversions_to_and_from_jax():
    jmesh = jax.make_mesh((2, 4), ("x", "y"))
    mesh = Mesh.from_jax(jmesh)
    assert mesh.axis_names == ("x", "y") and mesh.axis_types == (spmdsim.AxisType.Explicit,) * 2
    assert mesh.device_ids.tolist() == [[d.id for d in row] for row in jmesh.devices]
    back = mesh.to_jax()
    assert back == jmesh
    jspec = jax.sharding.PartitionSpec("x", None, jax.sharding.PartitionSpec.UNCONSTRAINED)
    assert P.from_jax(jspec) == P("x", None, P.UNCONSTRAINED) and P.from_jax(jspec).to_jax() == jspec
    js = jax.sharding.NamedSharding(jax.sharding.Mesh(jmesh.devices, ("x", "y")), jax.sharding.PartitionSpec("y"))
    s = NamedSharding.from_jax(js)
    assert s.spec == P("y") and s.to_jax() == js
    assert {d.id: i for d, i in s.devices_indices_map((8, 2)).items()} == {d.id: i for d, i in js.devices_indices_map((8, 2)).items()}
    # Real JAX objects wherever spmdsim takes its own.
    assert NamedSharding(jmesh, jax.sharding.PartitionSpec("x")).shard_shape((8,)) == (4,)
    assert spmdsim.shard(np.arange(8.0), js)
    assert spmdsim.correct_spec(jax.sharding.PartitionSpec("x"), jmesh, (5,))["corrected"] == P()
    with jax.sharding.Mesh(jmesh.devices, ("x", "y")):  # eformer reads JAX's context mesh
        assert spmdsim.get_corrected_named_sharding((5, 8), P("x", "y")).spec == P(None, "y")
    with pytest.raises(ValueError, match="JAX has no device 8"):
        Mesh(np.arange(16), "x", topology=spmdsim.Topology("cpu:16")).to_jax()


def test_errors_are_one_line_and_the_peers_types():
    mesh = Mesh(np.arange(8).reshape(2, 4), ("x", "y"))
    with pytest.raises(TypeError) as e:
        NamedSharding(mesh, 3)
    assert "\n" not in str(e.value)
    with pytest.raises(TypeError) as e:
        spmdsim.Topology(3)
    assert "\n" not in str(e.value) and "Topology.__init__() got (int)" in str(e.value)
    with pytest.raises(ValueError) as e:
        Mesh(np.arange(64).reshape(8, 8), ("x",))
    assert str(e.value) == ("Mesh requires the ndim of its first argument (`devices`) to equal the length of its second "
                            "argument (`axis_names`), but got devices.ndim == 2 and len(axis_names) == 1.")
    with pytest.raises(TypeError) as e:
        spmdsim.LocalChunker(mesh, host="a")
    assert "\n" not in str(e.value)
    with pytest.raises(TypeError) as e:
        Mesh(np.arange(4), (1,))
    assert str(e.value) == "mesh axis names must be str, got 1 (int)"


def test_partition_axis_is_a_frozen_hashable_dataclass_like_eformer_s():
    pa = spmdsim.PartitionAxis(batch_axis="dp")
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'batch_axis'"):
        pa.batch_axis = "tp"
    with pytest.raises(dataclasses.FrozenInstanceError):
        del pa.batch_axis
    q = pa.replace(head_axis="sp")
    assert q.head_axis == "sp" and q.batch_axis == "dp" and pa.head_axis == "tp"
    assert hash(pa) == hash(spmdsim.PartitionAxis(batch_axis="dp")) and len({pa, q}) == 2
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        pa.replace(nope=1)
    manager = spmdsim.PartitionManager(pa)
    assert manager.resolve(spmdsim.HiddenStateSharding, shape=(2, 1, 8)) == manager.resolve(
        dynamic_axes=spmdsim.HiddenStateSharding, shape=(2, 1, 8))
    with pytest.raises(TypeError, match="Expected PartitionAxis"):
        spmdsim.PartitionManager(3)


def test_flax_tree_functions():
    rules = (("batch", "data"), ("embed", "model"))
    tree = {"w": P("embed", "mlp"), "b": None, "layers": [P("batch",)]}
    assert spmdsim.logical_to_mesh(tree, rules) == {"w": P("model", None), "b": None, "layers": [P("data")]}
    mesh = Mesh(np.arange(8).reshape(2, 4), ("data", "model"))
    shardings = spmdsim.logical_to_mesh_sharding(tree, mesh, rules)
    assert shardings["w"] == NamedSharding(mesh, P("model", None)) and shardings["b"] is None


def test_match_partition_rules_takes_abstract_arrays():
    # eval_shape -> rules: leaves are jax.ShapeDtypeStruct (or spmdsim's), never descended into.
    tree = {"dense": {"kernel": jax.ShapeDtypeStruct((256, 512), np.float32),
                      "bias": spmdsim.ShapeDtypeStruct((512,), np.float32)}, "step": None}
    specs = spmdsim.match_partition_rules([("kernel", P(None, "tp")), (".*", P())], tree, min_size=0)
    assert specs == {"dense": {"kernel": P(None, "tp"), "bias": P()}, "step": None}
