"""PartitionSpec / P and NamedSharding as JAX has them; eformer's correction; errors as JAX raises them (the
messages are the C++ library's, which tests/partition checks against JAX's wording)."""
import pickle

import numpy as np
import pytest

import spmdsim
from spmdsim import P, PartitionSpec, NamedSharding, Mesh, UNCONSTRAINED


@pytest.fixture
def mesh42():
    return Mesh(np.arange(8).reshape(4, 2), ("x", "y"))


def test_partition_spec_repr_is_jax_s():
    assert repr(P()) == "P()"
    assert repr(P("x")) == "P('x',)"
    assert repr(P("x", None)) == "P('x', None)"
    assert repr(P(("x", "y"), None)) == "P(('x', 'y'), None)"
    assert repr(P(UNCONSTRAINED)) == "P(UNCONSTRAINED,)"
    assert str(PartitionSpec("dp", None, ("fsdp", "tp"))) == "P('dp', None, ('fsdp', 'tp'))"
    assert P is PartitionSpec and repr(UNCONSTRAINED) == "UNCONSTRAINED"
    assert P.UNCONSTRAINED is UNCONSTRAINED


def test_partition_spec_canonicalises_entries_as_jax():
    assert P(("x",)) == P("x")
    assert P(["x", "y"]) == P(("x", "y"))
    assert P(()) == P(None) and P("") == P(None) and P([]) == P(None)
    assert P((("x", "y"),)) == P(("x", "y"))
    assert P("x") != P("x", None)
    assert P("x", None)[1] is None and P(("x", "y"))[0] == ("x", "y")
    assert P("a", None, "b")[0:2] == ("a", None)
    assert list(P("a", ("b", "c"))) == ["a", ("b", "c")]
    assert len(P("a", None)) == 2
    assert P("a", None).index(None) == 1 and P("a", "a").count("a") == 2
    assert P("a")._partitions == ("a",)
    assert P("a")._normalized_spec_for_aval(3) == P("a", None, None)


def test_partition_spec_equality_and_hash_follow_jax():
    assert P("x", None) == ("x", None)           # JAX compares with tuples, canonicalised
    assert P(("x",)) == (("x",),)
    assert P("x") != ("y",)
    assert (P("x") == 3) is False
    assert hash(P("x", None)) == hash(P("x", None))
    assert len({P("x"), P("x"), P("y")}) == 2
    assert P("x") + P(None, "y") == P("x", None, "y")
    assert P("x") + (None,) == P("x", None)
    assert ("z",) + P("x") == P("z", "x")
    assert pickle.loads(pickle.dumps(P("x", ("a", "b")))) == P("x", ("a", "b"))


def test_partition_spec_parse_reads_what_users_paste():
    assert PartitionSpec.parse("PartitionSpec('dp', None, ('fsdp', 'tp'))") == P("dp", None, ("fsdp", "tp"))
    with pytest.raises(SyntaxError):
        PartitionSpec.parse("P('dp'")


def test_partition_spec_errors():
    with pytest.raises(ValueError, match="A tuple inside PartitionSpec cannot contain a nested tuple. Got partition: "
                                         r"\(\('a', 'b'\), 'c'\) and the nested tuple: \('a', 'b'\)"):
        P((("a", "b"), "c"))
    with pytest.raises(TypeError, match="PartitionSpec entries must be"):
        P(3)


def by_id(m):
    """A {Device: value} map keyed by device id."""
    return {d.id: v for d, v in m.items()}


def test_named_sharding_layout_queries(mesh42):
    s = NamedSharding(mesh42, P(("x", "y")))
    assert s.shard_shape((8,)) == (1,)
    raw = s.devices_indices_map((8,))
    assert all(isinstance(d, spmdsim.Device) for d in raw)  # JAX's keys: Device objects
    m = by_id(raw)
    assert list(m) == list(range(8))
    for i in range(4):
        for j in range(2):
            assert m[2 * i + j] == (slice(2 * i + j, 2 * i + j + 1, None),)
    swapped = by_id(NamedSharding(mesh42, P(("y", "x"))).devices_indices_map((8,)))
    assert swapped[2 * 1 + 1] == (slice(4 * 1 + 1, 4 * 1 + 2),)
    rows = NamedSharding(mesh42, P("x"))
    assert rows.shard_shape((8, 3)) == (2, 3)
    assert by_id(rows.devices_indices_map((8, 3)))[1] == (slice(0, 2, None), slice(None, None, None))
    assert by_id(rows.replica_ids((8, 3)))[0] == 0 and by_id(rows.replica_ids((8, 3)))[1] == 1
    assert rows.mesh == mesh42 and rows.spec == P("x")
    assert rows.num_devices == 8 and {d.id for d in rows.device_set} == set(range(8))
    assert rows.device_set == set(mesh42.devices.flat)
    assert tuple(d.id for d in rows._device_assignment) == tuple(range(8))
    assert rows.replicated_axes == ("y",)
    assert not rows.is_fully_replicated and NamedSharding(mesh42, P()).is_fully_replicated
    assert repr(rows) == "NamedSharding(mesh=Mesh('x': 4, 'y': 2, axis_types=(Auto, Auto)), spec=P('x',), memory_kind=device)"
    assert rows == NamedSharding(mesh42, P("x")) and hash(rows) == hash(NamedSharding(mesh42, P("x")))
    assert rows != NamedSharding(mesh42, P("y"))


def test_devices_indices_map_stays_right_as_shapes_and_tilings_alternate(mesh42):
    # The (slice, ...) tuples are kept per (shape, tiling) across calls: more pairs than the binding keeps, twice
    # over, each checked against the blocks computed here.
    cases = [(P("x"), (8 * k, 3)) for k in range(1, 11)] + [(P(None, ("x", "y")), (2, 8 * k)) for k in range(1, 11)]
    for _ in range(2):
        for spec, shape in cases:
            s = NamedSharding(mesh42, spec)
            m = by_id(s.devices_indices_map(shape))
            for device, index in m.items():
                x, y = divmod(device, 2)
                if spec == P("x"):
                    n = shape[0] // 4
                    assert index == (slice(x * n, (x + 1) * n), slice(None))
                else:
                    n = shape[1] // 8
                    assert index == (slice(None), slice(device * n, (device + 1) * n))
    # One tuple object per distinct block, shared by the devices holding it (immutable, as JAX's are).
    m = by_id(NamedSharding(mesh42, P("x")).devices_indices_map((8, 3)))
    assert m[0] is m[1] and m[0] is not m[2]


def test_devices_indices_map_is_cached_per_sharding_and_shape_as_in_jax(mesh42):
    # JAX keeps the map per (sharding, shape) (common_devices_indices_map) and returns the same dict object.
    first = NamedSharding(mesh42, P("x")).devices_indices_map((8, 3))
    assert NamedSharding(mesh42, P("x")).devices_indices_map([8, 3]) is first  # an equal sharding, a list shape
    assert NamedSharding(mesh42, P("y")).devices_indices_map((8, 3)) is not first
    assert NamedSharding(mesh42, P("x")).devices_indices_map((16, 3)) is not first
    other = Mesh(np.arange(8)[::-1].reshape(4, 2), ("x", "y"))  # same names and shape, other devices
    reordered = NamedSharding(other, P("x")).devices_indices_map((8, 3))
    assert reordered is not first and by_id(reordered)[7] == by_id(first)[0]
    renamed = Mesh(np.arange(8).reshape(4, 2), ("a", "y"))
    assert NamedSharding(renamed, P("a")).devices_indices_map((8, 3)) is not first
    spmdsim.clear_caches()
    again = NamedSharding(mesh42, P("x")).devices_indices_map((8, 3))
    assert again is not first and again == first
    with pytest.raises(ValueError):  # errors are not cached
        NamedSharding(mesh42, P("x")).devices_indices_map((7, 3))
    with pytest.raises(ValueError):
        NamedSharding(mesh42, P("x")).devices_indices_map((7, 3))


def test_addressable_devices_indices_map_is_per_host():
    topo = spmdsim.Topology("tpu-v4:2x2x4")  # 4 hosts of 4 chips
    mesh = Mesh(spmdsim.create_device_mesh((16,), topo.devices), ("x",))
    s = NamedSharding(mesh, P("x"))
    everything = s.devices_indices_map((32,))
    by_host = [s.addressable_devices_indices_map((32,), process_index=h) for h in range(4)]
    assert sum(len(m) for m in by_host) == 16
    for h, m in enumerate(by_host):
        for device, index in m.items():
            assert device.process_index == h and everything[device] == index
    assert s.addressable_devices_indices_map((32,)) == by_host[0]


def test_named_sharding_errors_are_jax_s(mesh42):
    with pytest.raises(spmdsim.DuplicateSpecError) as e:
        NamedSharding(Mesh(np.arange(8).reshape(2, 2, 2), ("x", "y", "z")), P("y", ("x", "y"), "x"))
    assert not isinstance(e.value, ValueError)  # as JAX's DuplicateSpecError
    assert str(e.value) == ("A single NamedSharding spec specification can map every mesh axis to at most one "
                            "positional dimension, but P('y', ('x', 'y'), 'x') has duplicate entries for `x`, `y`")
    assert e.value.kind == "DuplicateSpecError" and e.value.code == "INVALID_ARGUMENT"
    with pytest.raises(ValueError) as e:
        NamedSharding(mesh42, P("x", ("y", "tp")))
    assert str(e.value) == "Resource axis: tp of P('x', ('y', 'tp')) is not found in mesh: ('x', 'y')."
    assert not getattr(e.value, "__notes__", [])  # no mesh axis is close to 'tp'
    # JAX 0.10.2's shard_shape ignores a trailing entry that splits nothing, and fails on one that splits.
    assert NamedSharding(Mesh(np.arange(4), ("x",)), P("x", None)).shard_shape((8,)) == (2,)
    with pytest.raises(IndexError, match="splits dimension 1 4 ways, but the array has rank 1"):
        NamedSharding(Mesh(np.arange(4), ("x",)), P(None, "x")).shard_shape((8,))
    with pytest.raises(spmdsim.IndivisibleError) as e:
        NamedSharding(mesh42, P(None, ("x", "y"))).devices_indices_map((3, 12))
    assert isinstance(e.value, ValueError)
    assert "implies that array axis 1 is partitioned 8 times, but the dimension size is 12" in str(e.value)
    assert NamedSharding(Mesh([], ()), P()).is_fully_replicated  # JAX's NamedSharding(Mesh(), P())
    with pytest.raises(ValueError, match="empty mesh"):
        NamedSharding(Mesh([], ()), P(None))
    with pytest.raises(TypeError):
        NamedSharding(mesh42, "x")


def test_unknown_axes_get_a_did_you_mean_note():
    # Before: JAX's message alone. After: str() stays JAX's; a note (PEP 678, printed under the traceback) offers
    # the mesh axis meant.
    mesh = Mesh(np.arange(8).reshape(2, 4), ("data", "model"))
    with pytest.raises(ValueError) as e:
        NamedSharding(mesh, P("modle", None))
    assert str(e.value) == "Resource axis: modle of P('modle', None) is not found in mesh: ('data', 'model')."
    assert e.value.__notes__ == ["did you mean 'model' for 'modle'?"]
    with pytest.raises(ValueError) as e:
        spmdsim.validate_spec(P(("dta", "modle")), mesh, (8,))
    assert e.value.__notes__ == ["did you mean 'data' for 'dta', 'model' for 'modle'?"]


def test_validate_spec_raises_what_jax_raises(mesh42):
    spmdsim.validate_spec(P("x", "y"), mesh42, (8, 4))
    with pytest.raises(spmdsim.DuplicateSpecError):
        spmdsim.validate_spec(P("x", "x"), mesh42)
    with pytest.raises(spmdsim.IndivisibleError):
        spmdsim.validate_spec(("x",), mesh42, (6,))


def test_get_corrected_named_sharding_is_eformer_s():
    mesh = Mesh(np.arange(16).reshape(2, 4, 2), ("dp", "fsdp", "tp"))
    with mesh:
        s = spmdsim.get_corrected_named_sharding((8, 1024, 6), P(("dp", "fsdp", "tp"), "sp", "tp"))
    assert s.spec == P(None, None, "tp") and s.mesh == mesh
    assert spmdsim.get_corrected_named_sharding((8, 6), P("tp", "dp", "fsdp"), mesh=mesh).spec == P("tp", "dp")
    assert spmdsim.get_corrected_named_sharding((3,), P("dp"), mesh=mesh).spec == P()
    with pytest.raises(AssertionError, match="No mesh found"):
        spmdsim.get_corrected_named_sharding((8,), P("dp"))
    # eformer without a mesh and raise_mesh_error=False: a warning and a replicated sharding on the empty mesh.
    with pytest.warns(UserWarning, match="Active mesh is empty. Returning replicated NamedSharding."):
        replicated = spmdsim.get_corrected_named_sharding((8,), P("dp"), raise_mesh_error=False)
    assert replicated.mesh.empty and replicated.spec == P() and replicated.is_fully_replicated
    with pytest.raises(ValueError, match="empty mesh"):
        spmdsim.NamedSharding(replicated.mesh, P("dp"))
    with pytest.raises(spmdsim.DuplicateSpecError):
        spmdsim.get_corrected_named_sharding((8, 8), P("dp", "dp"), mesh=mesh)


def test_correct_spec_reports_every_change_and_keep_most():
    mesh = Mesh(np.arange(16).reshape(2, 4, 2), ("dp", "fsdp", "tp"))
    eformer = spmdsim.correct_spec(P(("dp", "fsdp", "tp"), "sp", "tp"), mesh, (8, 1024, 6))
    assert eformer["corrected"] == P(None, None, "tp") and eformer["mode"] == "eformer"
    assert [c["reason"] for c in eformer["corrections"]] == ["not_divisible", "unknown_axis"]
    assert eformer["bytes_per_device"] == 8 * 1024 * 3 * 4
    most = spmdsim.correct_spec(P(("dp", "fsdp", "tp"), "sp", "tp"), mesh, (8, 1024, 6), mode="keep-most")
    assert most["corrected"] == P(("dp", "fsdp"), None, "tp")
    assert most["bytes_per_device"] == 1 * 1024 * 3 * 4 and most["bytes_saved_vs_eformer"] == 86016
    assert most["eformer_spec"] == P(None, None, "tp") and most["eformer_bytes_per_device"] == 98304
    assert spmdsim.correct_spec(P("dp"), mesh, (8,), dtype="bfloat16")["bytes_per_device"] == 8
    with pytest.raises(ValueError, match="keep-most"):
        spmdsim.correct_spec(P("dp"), mesh, (8,), mode="best")
