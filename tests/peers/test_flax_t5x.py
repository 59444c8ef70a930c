"""Flax's logical_to_mesh_axes / logical_to_mesh (random rules and names), and T5X's partitioning module (the copy
fjformer carries): standard_logical_axis_rules, get_mesh, default_mesh, get_gpu_mesh and LocalChunker on TPU and
GPU machines, against spmdsim's. T5X reads jax.devices() and the process layout; it is given the simulated machine's
devices (peers.FakeDevice) through a stand-in for its `jax` module."""
import itertools
import random

import jax
import numpy as np
import pytest
from flax import linen as nn
from flax.linen import spmd as flax_spmd
from jax.experimental import mesh_utils
from jax.sharding import PartitionSpec as JaxP

import peers
import spmdsim

SEED = 22
LOGICAL = ["batch", "length", "embed", "heads", "kv", "mlp", "vocab", "expert"]
MESH = ["data", "model", "fsdp", None, ("data", "fsdp")]


def random_rules(rng):
    return tuple((rng.choice(LOGICAL), rng.choice(MESH)) for _ in range(rng.randint(0, 7)))


def random_names(rng):
    names = [rng.choice(LOGICAL + [None]) for _ in range(rng.randint(0, 5))]
    if rng.random() < 0.05:
        names.append(JaxP.UNCONSTRAINED)
    return names


def ours_names(names):
    return [spmdsim.UNCONSTRAINED if n is JaxP.UNCONSTRAINED else n for n in names]


def norm(spec):
    return None if spec is None else tuple("UNCONSTRAINED" if type(e).__name__ == "UnconstrainedSingleton" else e
                                           for e in spec)


def test_logical_to_mesh_axes_matches_flax():
    rng = random.Random(SEED)
    bad = peers.Disagreements("flax logical_to_mesh_axes")
    cases = 0
    for _ in range(2000):
        rules, names = random_rules(rng), random_names(rng)
        theirs = peers.outcome(lambda: norm(flax_spmd.logical_to_mesh_axes(names, rules)))
        ours = peers.outcome(lambda: norm(spmdsim.logical_to_mesh_axes(ours_names(names), rules)))
        cases += 1
        if ours[:2] != theirs[:2]:
            bad.add((rules, names), ours[:2], theirs[:2])
        # The same through the context rules.
        with nn.logical_axis_rules(rules):
            theirs = peers.outcome(lambda: norm(flax_spmd.logical_to_mesh_axes(names)))
        with spmdsim.logical_axis_rules(rules):
            ours = peers.outcome(lambda: norm(spmdsim.logical_to_mesh_axes(ours_names(names))))
        cases += 1
        if ours[:2] != theirs[:2]:
            bad.add(("context", rules, names), ours[:2], theirs[:2])
    peers.count("flax.logical_to_mesh_axes", cases)
    bad.check()


def test_logical_to_mesh_over_trees_matches_flax():
    rng = random.Random(SEED + 1)
    bad = peers.Disagreements("flax logical_to_mesh")
    cases = 0
    for _ in range(300):
        rules = random_rules(rng)
        tree = {f"p{i}": [rng.choice(LOGICAL) for _ in range(rng.randint(1, 2))] for i in range(rng.randint(1, 4))}
        tree = {k: (v if rng.random() < 0.2 else {"w": v, "b": None}) for k, v in tree.items()}

        def build(P):
            return {k: ({"w": P(*v["w"]), "b": None} if isinstance(v, dict) else P(*v)) for k, v in tree.items()}

        def normalize(t):
            return {k: ({"w": norm(v["w"]), "b": v["b"]} if isinstance(v, dict) else norm(v)) for k, v in t.items()}

        theirs = peers.outcome(lambda: normalize(flax_spmd.logical_to_mesh(build(JaxP), rules)))
        ours = peers.outcome(lambda: normalize(spmdsim.logical_to_mesh(build(spmdsim.P), rules)))
        cases += 1
        if ours[:2] != theirs[:2]:
            bad.add((rules, tree), ours[:2], theirs[:2])
    peers.count("flax.logical_to_mesh", cases)
    bad.check()


def test_standard_logical_axis_rules_match_t5x():
    t5x = peers.t5x()
    bad = peers.Disagreements("t5x standard_logical_axis_rules")
    cases = 0
    extra_choices = [None, (("batch", "data"),), (("heads", None), ("mlp", "model"))]
    for act, param, extra in itertools.product((1, 2, 3), (1, 2, 3), extra_choices):
        theirs = peers.outcome(lambda: [tuple(r) for r in t5x.standard_logical_axis_rules(act, param, extra)])
        ours = peers.outcome(lambda: [tuple(r) for r in spmdsim.standard_logical_axis_rules(act, param, extra)])
        cases += 1
        if ours[:2] != theirs[:2]:
            bad.add((act, param, extra), ours[:2], theirs[:2])
    peers.count("t5x.standard_logical_axis_rules", cases)
    bad.check()


class JaxStandIn:
    """T5X's view of `jax` on the simulated machine: its devices and process layout; the rest is jax."""

    def __init__(self, fakes, process=0):
        self._fakes = fakes
        self._process = process

    def __getattr__(self, name):
        return getattr(jax, name)

    def devices(self, backend=None):
        return list(self._fakes)

    def local_devices(self, process_index=None, backend=None):
        p = self._process if process_index is None else process_index
        return [d for d in self._fakes if d.process_index == p]

    def process_count(self):
        return len({d.process_index for d in self._fakes})

    def local_device_count(self):
        return len(self.local_devices())

    def process_index(self):
        return self._process


class LocalView:
    """A JAX mesh as process `process` sees it (T5X's LocalChunker reads global_mesh.local_mesh)."""

    def __init__(self, mesh, process):
        self._mesh = mesh
        self.local_mesh = mesh._local_mesh(process)

    def __getattr__(self, name):
        return getattr(self._mesh, name)


def stand_in(monkeypatch, t5x, fakes):
    """T5X on the simulated machine: its `jax` reads the fake devices, and so does the create_hybrid_device_mesh it
    calls without devices (JAX's own reads the real ones otherwise)."""
    monkeypatch.setattr(t5x, "jax", JaxStandIn(fakes))
    real = mesh_utils.create_hybrid_device_mesh
    monkeypatch.setattr(t5x, "create_hybrid_device_mesh",
                        lambda *a, devices=None, **k: real(*a, devices=fakes if devices is None else devices, **k))


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def mesh_summary(mesh):
    return (tuple(mesh.axis_names), peers.ids_of(mesh.devices))


TPU_MACHINES = ["tpu-v3:4x4", "tpu-v4:2x2x4", "tpu-v4:4x4x4", "tpu-v5p:2x2x2", "tpu-v5e:4x4", "tpu-v6e:8x8"]


@pytest.mark.parametrize("preset", TPU_MACHINES)
def test_get_mesh_and_default_mesh_match_t5x(preset, monkeypatch):
    t5x = peers.t5x()
    rng = random.Random(f"{SEED}:{preset}")
    topo = spmdsim.Topology(preset)
    fakes = peers.fake_devices(topo)
    ours_devices = [topo.devices[d.id] for d in fakes]
    stand_in(monkeypatch, t5x, fakes)
    coords = np.array([d.coords for d in fakes])
    bounds = tuple(int(x) for x in coords.max(axis=0) + 1)
    cores = max(d.core_on_chip for d in fakes) + 1
    submeshes = list(itertools.product(divisors(bounds[0]), divisors(bounds[1]), divisors(bounds[2]), divisors(cores)))
    rng.shuffle(submeshes)
    bad = peers.Disagreements(f"t5x get_mesh / default_mesh on {preset}")
    cases = 0
    for submesh in submeshes[:40]:
        for tile in (True, False):
            theirs = peers.outcome(lambda: mesh_summary(t5x.get_mesh(submesh, fakes, [d for d in fakes if d.process_index == 0], tile)))
            ours = peers.outcome(lambda: mesh_summary(spmdsim.get_mesh(submesh, ours_devices, [d for d in ours_devices if d.process_index == 0], tile)))
            cases += 1
            if ours[:2] != theirs[:2]:
                bad.add(("get_mesh", submesh, tile), ours[:2], theirs[:2])
    for n in divisors(topo.num_devices):
        theirs = peers.outcome(lambda: mesh_summary(t5x.default_mesh(n)))
        ours = peers.outcome(lambda: mesh_summary(spmdsim.default_mesh(n, topology=topo)))
        cases += 1
        if ours[:2] != theirs[:2]:
            bad.add(("default_mesh", n), ours[:2], theirs[:2])
    peers.count("t5x.get_mesh/default_mesh", cases)
    bad.check()


@pytest.mark.parametrize("preset", ["dgx-h100:2", "gpu:4x8", "dgx-a100:4"])
def test_gpu_mesh_matches_t5x(preset, monkeypatch):
    t5x = peers.t5x()
    topo = spmdsim.Topology(preset)
    fakes = peers.fake_devices(topo)
    stand_in(monkeypatch, t5x, fakes)
    bad = peers.Disagreements(f"t5x get_gpu_mesh / default_mesh on {preset}")
    cases = 0
    for n in divisors(topo.num_devices):
        for fn, ours_fn in ((t5x.get_gpu_mesh, spmdsim.get_gpu_mesh), (t5x.default_mesh, spmdsim.default_mesh)):
            theirs = peers.outcome(lambda: mesh_summary(fn(n)))
            ours = peers.outcome(lambda: mesh_summary(ours_fn(n, topology=topo)))
            cases += 1
            if ours[:2] != theirs[:2]:
                bad.add((fn.__name__, n), ours[:2], theirs[:2])
    peers.count("t5x.get_gpu_mesh/default_mesh", cases)
    bad.check()


@pytest.mark.parametrize("preset", ["tpu-v4:2x2x4", "tpu-v3:4x4", "dgx-h100:2", "tpu-v5e:4x4"])
def test_local_chunker_matches_t5x(preset, monkeypatch):
    t5x = peers.t5x()
    rng = random.Random(f"{SEED}:chunker:{preset}")
    topo = spmdsim.Topology(preset)
    fakes = peers.fake_devices(topo)
    stand_in(monkeypatch, t5x, fakes)
    bad = peers.Disagreements(f"t5x LocalChunker on {preset}")
    cases = 0
    for n in divisors(topo.num_devices):
        jm = peers.outcome(t5x.default_mesh, n)
        om = peers.outcome(spmdsim.default_mesh, n, topology=topo)
        cases += 1
        if jm[0] != om[0] or (jm[0] == "raise" and jm[1] != om[1]):
            bad.add(("default_mesh", n), om[:2], jm[:2])
        if jm[0] != "ok" or om[0] != "ok":
            continue
        jmesh, omesh = jm[1], om[1]
        for host in range(topo.num_processes):
            theirs_c = peers.outcome(t5x.LocalChunker, LocalView(jmesh, host))
            ours_c = peers.outcome(spmdsim.LocalChunker, omesh, host=host)
            cases += 1
            if theirs_c[0] != ours_c[0]:
                bad.add((n, host), ours_c[:2], theirs_c[:2])
                continue
            if theirs_c[0] != "ok":
                continue
            t, o = theirs_c[1], ours_c[1]
            if (dict(t.num_chunks), dict(t.chunk_ids)) != (dict(o.num_chunks), dict(o.chunk_ids)):
                bad.add((n, host, "chunks"), (o.num_chunks, o.chunk_ids), (t.num_chunks, t.chunk_ids))
            for _ in range(8):
                shape = tuple(rng.choice([8, 16, 64, 128]) for _ in range(rng.randint(1, 3)))
                axes = [rng.choice([None, "data", "model", ("data", "model")]) for _ in shape]
                if len({a for a in axes if isinstance(a, str)}) < sum(isinstance(a, str) for a in axes):
                    continue
                ti = peers.outcome(lambda: (t.get_local_chunk_info(shape, axes).slice, t.get_local_chunk_info(shape, axes).replica_id))
                oi = peers.outcome(lambda: (o.get_local_chunk_info(shape, axes).slice, o.get_local_chunk_info(shape, axes).replica_id))
                cases += 1
                if ti[:2] != oi[:2]:
                    bad.add((n, host, shape, axes), oi[:2], ti[:2])
                sharded = [a for a in ("data", "model") if rng.random() < 0.5]
                for method in ("get_shard_id", "get_replica_id"):
                    tv = peers.outcome(getattr(t, method), sharded)
                    ov = peers.outcome(getattr(o, method), sharded)
                    cases += 1
                    if tv[:2] != ov[:2]:
                        bad.add((n, host, method, sharded), ov[:2], tv[:2])
    peers.count("t5x.LocalChunker", cases)
    bad.check()


def test_cli_rules_json_matches_flax():
    """The C++ library through `spmdsim rules --rules ... --names ... --json`, against Flax's logical_to_mesh_axes."""
    rng = random.Random(SEED + 2)
    bad = peers.Disagreements("flax logical_to_mesh_axes via `spmdsim rules --json`")
    cases = 0
    while cases < 40:
        rules, names = random_rules(rng), random_names(rng)
        if not rules or not names or JaxP.UNCONSTRAINED in names:
            continue

        def text(mesh):
            return "" if mesh is None else ("+".join(mesh) if isinstance(mesh, tuple) else mesh)

        theirs = peers.outcome(lambda: norm(flax_spmd.logical_to_mesh_axes(names, rules)))
        report = peers.cli("rules", "--rules", ",".join(f"{n}={text(m)}" for n, m in rules),
                           "--names", ",".join("_" if n is None else n for n in names))
        ours = ("raise", "ValueError") if isinstance(report, tuple) else (
            "ok", tuple(tuple(e) if isinstance(e, list) else e for e in report["spec"]))
        cases += 1
        if ours[:2] != theirs[:2]:
            bad.add((rules, names), ours[:2], theirs[:2])
    peers.count("flax.logical_to_mesh_axes (CLI)", cases)
    bad.check()
