"""JAX's mesh_utils.create_device_mesh / create_hybrid_device_mesh against spmdsim's, on TPU v2-v6e, GPU and CPU
machines: JAX reads the same device objects (id, coords, core_on_chip, slice_index, process_index, platform,
device_kind) that spmdsim lays out, and both must give the same device order, or both raise the same exception
type. A sample also goes through the C++ library via `spmdsim mesh --json`."""
import itertools
import random

import numpy as np
import pytest
from jax.experimental import mesh_utils

import peers
import spmdsim

SEED = 22
# (preset, slices): single-slice machines of every TPU generation, multi-slice ones, GPU and CPU hosts.
MACHINES = [
    ("tpu-v2:2x2", 1), ("tpu-v3:2x2", 1), ("tpu-v3:4x4", 1), ("tpu-v4:2x2x1", 1), ("tpu-v4:2x2x2", 1),
    ("tpu-v4:2x2x4", 1), ("tpu-v4:4x4x4", 1), ("tpu-v4:4x4x8", 1), ("tpu-v5e:2x2", 1), ("tpu-v5e:4x4", 1),
    ("tpu-v5e:8x8", 1), ("tpu-v5e:16x16", 1), ("tpu-v5p:2x2x1", 1), ("tpu-v5p:2x2x2", 1), ("tpu-v5p:4x4x4", 1),
    ("tpu-v6e:2x2", 1), ("tpu-v6e:4x4", 1), ("tpu-v6e:8x8", 1), ("tpu-v6e:16x16", 1), ("dgx-h100:2", 1),
    ("dgx-a100:4", 1), ("gpu:2x8", 1), ("cpu:8", 1), ("tpu-v4:2x2x2", 2), ("tpu-v5e:4x4", 2), ("tpu-v5p:2x2x2", 4),
    ("tpu-v6e:4x4", 2),
]


def factorizations(n, parts):
    """Every ordered tuple of `parts` positive ints whose product is n."""
    if parts == 1:
        return [(n,)]
    out = []
    for d in range(1, n + 1):
        if n % d == 0:
            out += [(d,) + rest for rest in factorizations(n // d, parts - 1)]
    return out


def mesh_shapes(rng, n, count):
    shapes = set()
    for parts in (1, 2, 3, 4):
        shapes.update(factorizations(n, parts))
    shapes = sorted(shapes)
    rng.shuffle(shapes)
    picked = shapes[:count]
    picked += [(n + 1,), (max(n // 2, 1), 3)]  # wrong device counts: both must raise
    return picked


def jax_mesh(shape, devices, **kw):
    return peers.ids_of(mesh_utils.create_device_mesh(shape, devices, **kw))


def ours_mesh(shape, devices, **kw):
    return peers.ids_of(spmdsim.create_device_mesh(shape, devices, **kw))


def same(a, b):
    return a[0] == b[0] and (a[1] == b[1] if a[0] == "ok" else True)


@pytest.mark.parametrize("preset,slices", [m for m in MACHINES if m[1] == 1])
def test_create_device_mesh_matches_jax(preset, slices):
    rng = random.Random(f"{SEED}:{preset}")
    topo = spmdsim.Topology(preset)
    fakes = peers.fake_devices(topo)
    ours_devices = [topo.devices[d.id] for d in fakes]
    bad = peers.Disagreements(f"mesh_utils.create_device_mesh on {preset}")
    cases = 0
    for shape in mesh_shapes(rng, topo.num_devices, 40):
        for contiguous, split in itertools.product((False, True), repeat=2):
            kw = dict(contiguous_submeshes=contiguous, allow_split_physical_axes=split)
            theirs = peers.outcome(jax_mesh, shape, fakes, **kw)
            ours = peers.outcome(ours_mesh, shape, ours_devices, **kw)
            cases += 1
            if not same(ours, theirs):
                bad.add((shape, kw), ours[:2], theirs[:2])
    peers.count("jax.mesh_utils.create_device_mesh", cases)
    bad.check()


@pytest.mark.parametrize("preset,slices", [m for m in MACHINES if m[1] > 1 or m[0].startswith(("dgx", "gpu"))])
def test_create_hybrid_device_mesh_matches_jax(preset, slices):
    rng = random.Random(f"{SEED}:hybrid:{preset}:{slices}")
    topo = spmdsim.Topology(preset, num_slices=slices)
    fakes = peers.fake_devices(topo)
    ours_devices = [topo.devices[d.id] for d in fakes]
    granule_count = slices if slices > 1 else topo.num_processes
    per_granule = topo.num_devices // granule_count
    bad = peers.Disagreements(f"mesh_utils.create_hybrid_device_mesh on {preset} x {slices}")
    cases = 0
    for rank in (1, 2, 3):
        ici_shapes = [s for s in factorizations(per_granule, rank)]
        dcn_shapes = [s for s in factorizations(granule_count, rank)]
        pairs = list(itertools.product(ici_shapes, dcn_shapes))
        rng.shuffle(pairs)
        for ici, dcn in pairs[:30]:
            for process_is_granule in ((False, True) if slices > 1 else (True,)):
                kw = dict(process_is_granule=process_is_granule)
                theirs = peers.outcome(lambda: peers.ids_of(
                    mesh_utils.create_hybrid_device_mesh(ici, dcn, fakes, **kw)))
                ours = peers.outcome(lambda: peers.ids_of(
                    spmdsim.create_hybrid_device_mesh(ici, dcn, ours_devices, **kw)))
                cases += 1
                if not same(ours, theirs):
                    bad.add((ici, dcn, kw), ours[:2], theirs[:2])
    peers.count("jax.mesh_utils.create_hybrid_device_mesh", cases)
    bad.check()


def test_cli_mesh_json_matches_jax():
    """The C++ library through the CLI: `spmdsim mesh --topology T --mesh ... --json`, a sample of machines and
    shapes, against JAX's create_device_mesh."""
    rng = random.Random(f"{SEED}:cli")
    bad = peers.Disagreements("mesh_utils.create_device_mesh via the CLI")
    cases = 0
    for preset, _ in [m for m in MACHINES if m[1] == 1]:
        topo = spmdsim.Topology(preset)
        fakes = peers.fake_devices(topo)
        for shape in mesh_shapes(rng, topo.num_devices, 2)[:2]:
            names = [f"a{i}" for i in range(len(shape))]
            theirs = peers.outcome(jax_mesh, shape, fakes)
            report = peers.cli("mesh", "--topology", preset, "--mesh", ",".join(f"{n}={s}" for n, s in zip(names, shape)))
            if isinstance(report, tuple):
                ours = ("raise", report[1])
            else:
                ours = ("ok", np.array(report["device_ids"]).reshape(shape).tolist())
            cases += 1
            if not same(ours, theirs):
                bad.add((preset, shape), ours[:2], theirs[:2])
    peers.count("jax.mesh_utils.create_device_mesh (CLI)", cases)
    bad.check()
