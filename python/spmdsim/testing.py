"""pytest support for checking partitioning code on simulated meshes.

Use it as a plugin (in your conftest.py: ``pytest_plugins = ["spmdsim.testing"]``) to get the fixtures:

  topology   a Topology; preset from ``@pytest.mark.topology("tpu-v4:2x2x4")`` (default "cpu:8")
  mesh       a Mesh on that topology, from ``@pytest.mark.mesh(data=2, model=4)`` (JAX's mesh_utils order;
             default: one axis 'x' over every device); entering `with mesh:` is done for you. The marker
             also takes create_device_mesh's ``allow_split_physical_axes=True`` / ``contiguous_submeshes=True``,
             and ``dcn=dict(data=2)`` for a hybrid mesh over slices (the axes give each slice's ICI part, as
             create_hybrid_device_mesh's mesh_shape; ``process_is_granule=True`` with it):
             ``@pytest.mark.topology("tpu-v5e:4x4", num_slices=2)`` + ``@pytest.mark.mesh(data=1, model=16,
             dcn=dict(data=2))`` is a data=2 x model=16 mesh

and the assertions, which work with or without pytest:

  assert_sharded_as(actual, expected, shape=None)         the same spec, or the same layout for `shape`
  assert_no_correction(spec, shape, mesh=None)             eformer's correction would not change `spec`
  assert_allclose_to_unsharded(actual, expected, ...)      sharded / simulated results equal the unsharded ones
"""

import difflib

import numpy as np

import spmdsim

try:
    import pytest
except ImportError:  # the assertions work without pytest
    pytest = None

__all__ = ["assert_sharded_as", "assert_no_correction", "assert_allclose_to_unsharded", "mesh_from_preset"]


_MESH_OPTIONS = ("allow_split_physical_axes", "contiguous_submeshes", "process_is_granule", "dcn")


def _check_axis_sizes(axes, what):
    for name, size in axes.items():
        if isinstance(size, bool) or not isinstance(size, int):
            close = difflib.get_close_matches(name, _MESH_OPTIONS, n=1)
            hint = f"; did you mean {close[0]}=?" if close else ""
            raise TypeError(f"{what}: {name}={size!r} is neither an axis size (an int) nor one of the options "
                            f"{', '.join(_MESH_OPTIONS)}{hint}")


def mesh_from_preset(preset="cpu:8", *, dcn=None, allow_split_physical_axes=False, contiguous_submeshes=False,
                     process_is_granule=False, **axes):
    """A Mesh on Topology(preset) with named axes (in order) laid out as JAX's create_device_mesh lays them;
    without axes, one axis 'x' over every device. With `dcn` ({axis: size}, axes left out are 1) the axes are each
    slice's ICI part and the mesh is JAX's create_hybrid_device_mesh(ici, dcn): axis sizes are the products."""
    topology = spmdsim.Topology(preset) if isinstance(preset, str) else preset
    _check_axis_sizes(axes, "mesh")
    if not axes:
        axes = {"x": topology.num_devices}
    if dcn is None:
        if process_is_granule:
            raise TypeError("mesh: process_is_granule applies to a hybrid mesh; give dcn= too")
        devices = spmdsim.create_device_mesh(tuple(axes.values()), topology.devices,
                                             contiguous_submeshes=contiguous_submeshes,
                                             allow_split_physical_axes=allow_split_physical_axes)
        return spmdsim.Mesh(devices, tuple(axes.keys()))
    if not isinstance(dcn, dict):
        raise TypeError(f"mesh: dcn= takes a dict of axis sizes, e.g. dcn=dict(data=2), got {dcn!r}")
    _check_axis_sizes(dcn, "mesh dcn")
    unknown = [n for n in dcn if n not in axes]
    if unknown:
        raise ValueError(f"mesh: dcn axis {unknown[0]!r} is not a mesh axis; the axes are {tuple(axes)}")
    if contiguous_submeshes:
        raise TypeError("mesh: contiguous_submeshes applies to create_device_mesh only, not with dcn=")
    devices = spmdsim.create_hybrid_device_mesh(tuple(axes.values()), tuple(dcn.get(n, 1) for n in axes),
                                                topology.devices, process_is_granule=process_is_granule,
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
        config.addinivalue_line("markers", "topology(preset, num_slices=1): the Topology of the `topology` / "
                                "`mesh` fixtures")
        config.addinivalue_line("markers", "mesh(**axes, dcn=None, allow_split_physical_axes=False, "
                                "contiguous_submeshes=False, process_is_granule=False): the `mesh` fixture, e.g. "
                                "mesh(data=2, model=4)")

    @pytest.fixture
    def topology(request):
        """Topology from @pytest.mark.topology("preset", num_slices=1) (default "cpu:8")."""
        marker = request.node.get_closest_marker("topology")
        if marker is None:
            return spmdsim.Topology("cpu:8")
        return spmdsim.Topology(*marker.args, **marker.kwargs)

    @pytest.fixture
    def mesh(request, topology):
        """Mesh from @pytest.mark.mesh(axis=size, ..., options) on the `topology` fixture, entered (`with mesh:`)."""
        marker = request.node.get_closest_marker("mesh")
        axes = dict(marker.kwargs) if marker else {}
        m = mesh_from_preset(topology, **axes)
        with m:
            yield m
