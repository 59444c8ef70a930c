"""pytest support for checking partitioning code on simulated meshes.

Use it as a plugin (in your conftest.py: ``pytest_plugins = ["spmdsim.testing"]``) to get the fixtures:

  topology   a Topology; preset from ``@pytest.mark.topology("tpu-v4:2x2x4")`` or, over slices,
             ``@pytest.mark.topology("tpu-v4:2x2x2", 2)`` (default "cpu:8")
  mesh       a Mesh on that topology, from ``@pytest.mark.mesh(data=2, model=4)`` (JAX's mesh_utils order;
             default: one axis 'x' over every device); entering `with mesh:` is done for you. The marker also
             takes ``allow_split_physical_axes=True`` and ``dcn={"data": 2}`` (create_hybrid_device_mesh over
             the topology's slices), as mesh_from_preset does

and the assertions, which work with or without pytest:

  assert_sharded_as(actual, expected, shape=None)         the same spec, or the same layout for `shape`
  assert_no_correction(spec, shape, mesh=None)             eformer's correction would not change `spec`
  assert_allclose_to_unsharded(actual, expected, ...)      sharded / simulated results equal the unsharded ones
"""

import numpy as np

import spmdsim

try:
    import pytest
except ImportError:  # the assertions work without pytest
    pytest = None

__all__ = ["assert_sharded_as", "assert_no_correction", "assert_allclose_to_unsharded", "mesh_from_preset"]


def mesh_from_preset(preset="cpu:8", *, dcn=None, allow_split_physical_axes=False, **axes):
    """A Mesh on Topology(preset) with named axes (in order) laid out as JAX's create_device_mesh lays them;
    without axes, one axis 'x' over every device. `allow_split_physical_axes` is JAX's flag (a torus axis may
    serve several mesh axes). `dcn` ({axis: size}) lays the mesh over slices (or hosts) as JAX's
    create_hybrid_device_mesh does: `axes` give the sizes inside one, `dcn` across them (absent: 1), and each mesh
    axis is their product. ("dcn" and "allow_split_physical_axes" are not axis names here.)"""
    topology = spmdsim.Topology(preset) if isinstance(preset, str) else preset
    dcn = dict(dcn or {})
    if not axes:
        axes = {"x": topology.num_devices // int(np.prod(list(dcn.values()), dtype=np.int64))}
    unknown = [a for a in dcn if a not in axes]
    if unknown:
        raise ValueError(f"dcn names {unknown}, which are not mesh axes; the axes: {list(axes)}")
    if dcn:
        devices = spmdsim.create_hybrid_device_mesh(tuple(axes.values()), tuple(dcn.get(a, 1) for a in axes),
                                                    topology.devices,
                                                    allow_split_physical_axes=allow_split_physical_axes)
    else:
        devices = spmdsim.create_device_mesh(tuple(axes.values()), topology.devices,
                                             allow_split_physical_axes=allow_split_physical_axes)
    return spmdsim.Mesh(devices, tuple(axes.keys()))


def _spec_and_mesh(value):
    if isinstance(value, spmdsim.NamedSharding):
        return value.spec, value.mesh
    if isinstance(value, spmdsim.PartitionSpec):
        return value, None
    if isinstance(value, tuple):
        return spmdsim.PartitionSpec(*value), None
    raise TypeError(f"expected a NamedSharding, a PartitionSpec or a tuple, got {value!r}")


def assert_sharded_as(actual, expected, shape=None, mesh=None):
    """Asserts that `actual` shards like `expected` (each a NamedSharding, a PartitionSpec or a tuple).

    Without `shape`, the specs must be equal as JAX compares them (P('x') != P('x', None)). With `shape`, the
    layouts must be equal: every device holds the same block (so P('x') and P('x', None) agree); the message
    names the first device that differs. Specs are bound to `mesh`, the sharding's mesh or the mesh of
    `with mesh:`.
    """
    actual_spec, actual_mesh = _spec_and_mesh(actual)
    expected_spec, expected_mesh = _spec_and_mesh(expected)
    if shape is None:
        if actual_spec != expected_spec:
            raise AssertionError(f"sharded as {actual_spec}, expected {expected_spec}")
        if actual_mesh is not None and expected_mesh is not None and actual_mesh != expected_mesh:
            raise AssertionError(f"sharded on {actual_mesh}, expected {expected_mesh}")
        return
    default_mesh = mesh or actual_mesh or expected_mesh or spmdsim.get_incontext_mesh()
    got = spmdsim.NamedSharding(actual_mesh or default_mesh, actual_spec).devices_indices_map(shape)
    want = spmdsim.NamedSharding(expected_mesh or default_mesh, expected_spec).devices_indices_map(shape)
    got = {d.id: index for d, index in got.items()}
    want = {d.id: index for d, index in want.items()}
    if got.keys() != want.keys():
        raise AssertionError(f"devices differ: {sorted(got)} vs expected {sorted(want)}")
    for device, index in want.items():
        if got[device] != index:
            raise AssertionError(f"{actual_spec} and {expected_spec} lay out shape {tuple(shape)} differently: "
                                 f"device {device} holds {got[device]}, expected {index}")


def assert_no_correction(spec, shape, mesh=None):
    """Asserts that eformer's get_corrected_named_sharding keeps `spec` for `shape` (every axis in the mesh,
    every dimension divisible, not longer than the shape); the message lists each correction."""
    mesh = mesh or spmdsim.get_incontext_mesh()
    report = spmdsim.correct_spec(spec, mesh, tuple(shape), mode="eformer")
    if report["corrections"]:
        lines = "; ".join(f"dim {c['dim']}: {c['message']}" for c in report["corrections"])
        raise AssertionError(f"{spec} on {mesh} for shape {tuple(shape)} is corrected to {report['corrected']}: "
                             f"{lines}")


def _as_float(x):
    x = np.asarray(x)
    if x.dtype.name == "bfloat16":
        return x.astype(np.float32)
    return x


def assert_allclose_to_unsharded(actual, expected, *, sharding=None, rtol=1e-5, atol=1e-6):
    """Asserts that sharded or simulated results equal the unsharded ones (numpy.testing.assert_allclose).

    `actual`: a global numpy array, shard()'s {device: block} dict (with `sharding`, gathered first; replicas must
    agree), or a ShardMapResult (its outputs). `expected`: an array, a tuple of arrays, or a callable returning
    them (computed after the simulation, e.g. the same math in numpy on the global inputs).
    """
    if isinstance(actual, spmdsim.ShardMapResult):
        actual = actual.outputs
    if isinstance(actual, dict):
        if sharding is None:
            raise TypeError("assert_allclose_to_unsharded: pass sharding= to gather a dict of shards")
        actual = spmdsim.gather(actual, sharding)
    if callable(expected):
        expected = expected()
    if isinstance(actual, tuple):
        if not isinstance(expected, tuple) or len(expected) != len(actual):
            raise AssertionError(f"{len(actual)} outputs, expected {expected!r}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            np.testing.assert_allclose(_as_float(a), _as_float(e), rtol=rtol, atol=atol, err_msg=f"output {i}")
        return
    np.testing.assert_allclose(_as_float(actual), _as_float(expected), rtol=rtol, atol=atol)


if pytest is not None:

    def pytest_configure(config):
        config.addinivalue_line("markers", "topology(preset): the Topology of the `topology` / `mesh` fixtures")
        config.addinivalue_line("markers", "mesh(**axes, dcn=None, allow_split_physical_axes=False): the axes of the "
                                "`mesh` fixture, e.g. mesh(data=2, model=4)")

    @pytest.fixture
    def topology(request):
        """Topology from @pytest.mark.topology("preset") or ("preset", num_slices) (default "cpu:8")."""
        marker = request.node.get_closest_marker("topology")
        return spmdsim.Topology(*marker.args, **marker.kwargs) if marker else spmdsim.Topology("cpu:8")

    @pytest.fixture
    def mesh(request, topology):
        """Mesh from @pytest.mark.mesh(axis=size, ...) on the `topology` fixture, entered (`with mesh:`)."""
        marker = request.node.get_closest_marker("mesh")
        axes = dict(marker.kwargs) if marker else {}
        m = mesh_from_preset(topology, **axes)
        with m:
            yield m
